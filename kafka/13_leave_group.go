package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// LeaveGroup, v0 to v5 (several members at once from v3, KIP-345); READ
// on the group (GROUP_AUTHORIZATION_FAILED).
func init() {
	register(api{key: kmsg.LeaveGroup, min: 0, max: 5, async: handleLeaveGroup})
}

func handleLeaveGroup(s *Server, cx *reqCtx, kreq kmsg.Request) {
	if req := kreq.(*kmsg.LeaveGroupRequest); !s.authorize(cx, acl.OpRead, acl.ResourceGroup, req.Group) {
		// The request's error alone, no member's (Kafka's getErrorResponse).
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		cx.reply(resp)
		return
	}
	s.cfg.Groups.LeaveGroup(kreq.(*kmsg.LeaveGroupRequest), func(r *kmsg.LeaveGroupResponse) { cx.reply(r) })
}
