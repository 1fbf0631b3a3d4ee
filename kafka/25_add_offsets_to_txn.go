package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// AddOffsetsToTxn, v0 to v4 (KIP-98): the partition of __consumer_offsets
// that holds the group joins the producer's transaction, so that its
// TxnOffsetCommit is committed or aborted with the transaction's records.
// The producer needs WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group
// (GROUP_AUTHORIZATION_FAILED).
func init() {
	register(api{key: kmsg.AddOffsetsToTxn, min: 0, max: 4, async: handleAddOffsetsToTxn})
}

func handleAddOffsetsToTxn(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !s.authorize(cx, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		cx.reply(resp)
		return
	case !s.authorize(cx, acl.OpRead, acl.ResourceGroup, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		cx.reply(resp)
		return
	}
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
