package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddOffsetsToTxn, v0 to v4 (KIP-98): the partition of __consumer_offsets
// that holds the group joins the producer's transaction, so that its
// TxnOffsetCommit is committed or aborted with the transaction's records.
func init() {
	register(api{key: kmsg.AddOffsetsToTxn, min: 0, max: 4, async: handleAddOffsetsToTxn})
}

func handleAddOffsetsToTxn(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if s.cfg.Groups == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		cx.reply(resp)
		return
	}
	s.cfg.Txns.AddOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, func(code int16) {
		if req.Version < 2 && code == kerr.ProducerFenced.Code {
			code = kerr.InvalidProducerEpoch.Code
		}
		resp.ErrorCode = code
		cx.reply(resp)
	})
}
