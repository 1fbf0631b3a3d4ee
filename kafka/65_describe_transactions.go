package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// DescribeTransactions, v0 (KIP-664): the state of transactional ids this
// broker coordinates (others are NOT_COORDINATOR: clients ask each id's
// coordinator, found with FindCoordinator).
//
// With an authorizer, an id the principal may not DESCRIBE is
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and a transaction's partitions
// of topics it may not DESCRIBE are left out, as Kafka's KafkaApis does.
func init() {
	register(api{key: kmsg.DescribeTransactions, min: 0, max: 0, async: handleDescribeTransactions})
}

func handleDescribeTransactions(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	if s.cfg.Authorizer == nil {
		s.cfg.Txns.Describe(req.TransactionalIDs, func(states []kmsg.DescribeTransactionsResponseTransactionState) {
			resp.TransactionStates = states
			cx.reply(resp)
		})
		return
	}
	var ids []string
	var at []int
	resp.TransactionStates = make([]kmsg.DescribeTransactionsResponseTransactionState, len(req.TransactionalIDs))
	for i, id := range req.TransactionalIDs {
		if s.authorize(cx, acl.OpDescribe, acl.ResourceTransactionalID, id) {
			ids, at = append(ids, id), append(at, i)
			continue
		}
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ErrorCode = id, kerr.TransactionalIDAuthorizationFailed.Code
		resp.TransactionStates[i] = st
	}
	s.cfg.Txns.Describe(ids, func(states []kmsg.DescribeTransactionsResponseTransactionState) {
		for j, st := range states {
			kept := st.Topics[:0]
			for _, t := range st.Topics {
				if s.authorize(cx, acl.OpDescribe, acl.ResourceTopic, t.Topic) {
					kept = append(kept, t)
				}
			}
			st.Topics = kept
			resp.TransactionStates[at[j]] = st
		}
		cx.reply(resp)
	})
}
