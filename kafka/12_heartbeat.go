package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// Heartbeat, v0 to v4; READ on the group (GROUP_AUTHORIZATION_FAILED).
func init() {
	register(api{key: kmsg.Heartbeat, min: 0, max: 4, async: handleHeartbeat})
}

func handleHeartbeat(s *Server, cx *reqCtx, kreq kmsg.Request) {
	if req := kreq.(*kmsg.HeartbeatRequest); !s.authorize(cx, acl.OpRead, acl.ResourceGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		cx.reply(resp)
		return
	}
	s.cfg.Groups.Heartbeat(kreq.(*kmsg.HeartbeatRequest), func(r *kmsg.HeartbeatResponse) { cx.reply(r) })
}
