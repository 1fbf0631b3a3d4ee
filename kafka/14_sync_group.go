package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// SyncGroup, v0 to v5 (protocol type and name checked from v5, KIP-559).
// A follower's answer waits for the leader's assignment. READ on the
// group (GROUP_AUTHORIZATION_FAILED).
func init() {
	register(api{key: kmsg.SyncGroup, min: 0, max: 5, async: handleSyncGroup})
}

func handleSyncGroup(s *Server, cx *reqCtx, kreq kmsg.Request) {
	if req := kreq.(*kmsg.SyncGroupRequest); !s.authorize(cx, acl.OpRead, acl.ResourceGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		cx.reply(resp)
		return
	}
	s.cfg.Groups.SyncGroup(kreq.(*kmsg.SyncGroupRequest), func(r *kmsg.SyncGroupResponse) { cx.reply(r) })
}
