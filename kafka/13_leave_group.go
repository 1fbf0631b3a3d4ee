package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup, v0 to v5 (several members at once from v3, KIP-345).
func init() {
	register(api{key: kmsg.LeaveGroup, min: 0, max: 5, async: handleLeaveGroup})
}

func handleLeaveGroup(s *Server, cx *reqCtx, kreq kmsg.Request) {
	s.cfg.Groups.LeaveGroup(kreq.(*kmsg.LeaveGroupRequest), func(r *kmsg.LeaveGroupResponse) { cx.reply(r) })
}
