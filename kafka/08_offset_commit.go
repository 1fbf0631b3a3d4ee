package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit, v0 to v10: members of KIP-848 consumer groups commit with
// their member epoch from v9, and v10 names topics by id.
func init() {
	register(api{key: kmsg.OffsetCommit, min: 0, max: 10, async: handleOffsetCommit})
}

func handleOffsetCommit(s *Server, cx *reqCtx, kreq kmsg.Request) {
	s.cfg.Groups.OffsetCommit(kreq.(*kmsg.OffsetCommitRequest), func(r *kmsg.OffsetCommitResponse) { cx.reply(r) })
}
