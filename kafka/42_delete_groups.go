package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups, v0 to v3 (v3 adds error messages, KIP-1043).
func init() {
	register(api{key: kmsg.DeleteGroups, min: 0, max: 3, async: handleDeleteGroups})
}

func handleDeleteGroups(s *Server, cx *reqCtx, kreq kmsg.Request) {
	s.cfg.Groups.DeleteGroups(kreq.(*kmsg.DeleteGroupsRequest), func(r *kmsg.DeleteGroupsResponse) { cx.reply(r) })
}
