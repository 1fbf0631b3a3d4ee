package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnOffsetCommit, v0 to v4 (KIP-98; v3 adds the group's member and
// generation, KIP-447): a transactional producer commits its consumer
// group's offsets inside its transaction; the group coordinator keeps them
// pending until the transaction's marker lands on the group's partition of
// __consumer_offsets. v5 (KIP-890 part 2: the offsets partition added to
// the transaction implicitly) is not served.
func init() {
	register(api{key: kmsg.TxnOffsetCommit, min: 0, max: 4, async: handleTxnOffsetCommit})
}

func handleTxnOffsetCommit(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	s.cfg.Groups.TxnOffsetCommit(req, func(r *kmsg.TxnOffsetCommitResponse) {
		r.SetVersion(req.Version)
		cx.reply(r)
	})
}
