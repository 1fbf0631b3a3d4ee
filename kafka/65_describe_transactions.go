package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTransactions, v0 (KIP-664): the state of transactional ids this
// broker coordinates (others are NOT_COORDINATOR: clients ask each id's
// coordinator, found with FindCoordinator).
func init() {
	register(api{key: kmsg.DescribeTransactions, min: 0, max: 0, async: handleDescribeTransactions})
}

func handleDescribeTransactions(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	s.cfg.Txns.Describe(req.TransactionalIDs, func(states []kmsg.DescribeTransactionsResponseTransactionState) {
		resp.TransactionStates = states
		cx.reply(resp)
	})
}
