package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch, v0 to v9: one group before v8, several from v8 (KIP-709),
// require_stable from v7 (KIP-447). v10 (topic ids) is left for KIP-848.
func init() {
	register(api{key: kmsg.OffsetFetch, min: 0, max: 9, async: handleOffsetFetch})
}

func handleOffsetFetch(s *Server, cx *reqCtx, kreq kmsg.Request) {
	s.cfg.Groups.OffsetFetch(kreq.(*kmsg.OffsetFetchRequest), func(r *kmsg.OffsetFetchResponse) { cx.reply(r) })
}
