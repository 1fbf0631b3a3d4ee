package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine/txn"
)

// ListTransactions, v0 and v1 (KIP-664; v1 adds KIP-994's duration filter):
// the transactions of the partitions of __transaction_state this broker
// coordinates, filtered by state and producer id. v2's transactional id
// pattern (KIP-1152) is Java's regex syntax, which is not served.
func init() {
	register(api{key: kmsg.ListTransactions, min: 0, max: 1, async: handleListTransactions})
}

func handleListTransactions(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.ListTransactionsRequest)
	f := txn.ListFilter{States: req.StateFilters, ProducerIDs: req.ProducerIDFilters, DurationMs: -1}
	if req.Version >= 1 {
		f.DurationMs = req.DurationFilterMillis
	}
	s.cfg.Txns.List(f, func(r *kmsg.ListTransactionsResponse) {
		r.SetVersion(req.Version)
		cx.reply(r)
	})
}
