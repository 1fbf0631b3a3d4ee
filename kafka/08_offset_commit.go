package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit, v0 to v9. v10 (topic ids, KIP-848's consumers) is left for
// the next-generation protocol.
func init() {
	register(api{key: kmsg.OffsetCommit, min: 0, max: 9, async: handleOffsetCommit})
}

func handleOffsetCommit(s *Server, cx *reqCtx, kreq kmsg.Request) {
	s.cfg.Groups.OffsetCommit(kreq.(*kmsg.OffsetCommitRequest), func(r *kmsg.OffsetCommitResponse) { cx.reply(r) })
}
