package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete, v0 (KIP-496).
func init() {
	register(api{key: kmsg.OffsetDelete, min: 0, max: 0, async: handleOffsetDelete})
}

func handleOffsetDelete(s *Server, cx *reqCtx, kreq kmsg.Request) {
	s.cfg.Groups.OffsetDelete(kreq.(*kmsg.OffsetDeleteRequest), func(r *kmsg.OffsetDeleteResponse) { cx.reply(r) })
}
