package kafka

import "sync/atomic"

// The transaction APIs (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
// DescribeTransactions, ListTransactions, and InitProducerId with a
// transactional id) are thin, as the group APIs are: each hands its
// request to the transaction coordinator (engine/txn), which keeps a
// transactional id's state on the shard that owns the id's partition of
// __transaction_state and answers through the reply function.

// replyGather counts the parts of a request answered from several shards;
// the last part to finish replies. The caller holds one count while it
// dispatches.
type replyGather struct {
	n     atomic.Int32
	reply func()
}

func newReplyGather(reply func()) *replyGather {
	g := &replyGather{reply: reply}
	g.n.Store(1)
	return g
}

func (g *replyGather) add() { g.n.Add(1) }
func (g *replyGather) done() {
	if g.n.Add(-1) == 0 {
		g.reply()
	}
}
