package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// EndTxn, v0 to v5 (KIP-98): commit or abort the producer's transaction.
// The answer leaves once the coordinator wrote PrepareCommit or
// PrepareAbort; the markers follow. From v5 (KIP-890 part 2) every end
// bumps the producer's epoch, and the answer carries the producer id and
// epoch to use next. The producer needs WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
func init() {
	register(api{key: kmsg.EndTxn, min: 0, max: 5, async: handleEndTxn})
}

func handleEndTxn(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !s.authorize(cx, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = kerr.TransactionalIDAuthorizationFailed.Code, -1, -1
		cx.reply(resp)
		return
	}
	s.cfg.Txns.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, req.Version, func(code int16, id int64, epoch int16) {
		if req.Version < 2 && code == kerr.ProducerFenced.Code {
			code = kerr.InvalidProducerEpoch.Code
		}
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, id, epoch
		cx.reply(resp)
	})
}
