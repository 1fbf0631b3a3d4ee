package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch, v0 to v10: one group before v8, several from v8 (KIP-709),
// require_stable from v7 (KIP-447), the member and its epoch from v9 and
// topic ids from v10 (KIP-848).
func init() {
	register(api{key: kmsg.OffsetFetch, min: 0, max: 10, async: handleOffsetFetch})
}

func handleOffsetFetch(s *Server, cx *reqCtx, kreq kmsg.Request) {
	s.cfg.Groups.OffsetFetch(kreq.(*kmsg.OffsetFetchRequest), func(r *kmsg.OffsetFetchResponse) { cx.reply(r) })
}
