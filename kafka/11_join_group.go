package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// JoinGroup, v0 to v9 (MEMBER_ID_REQUIRED from v4, KIP-394; static
// membership from v5, KIP-345; SkipAssignment in v9, KIP-814). The answer
// comes when the rebalance completes. The member needs READ on the group
// (GROUP_AUTHORIZATION_FAILED).
func init() {
	register(api{key: kmsg.JoinGroup, min: 0, max: 9, async: handleJoinGroup})
}

func handleJoinGroup(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.JoinGroupRequest)
	if !s.authorize(cx, acl.OpRead, acl.ResourceGroup, req.Group) {
		// Kafka's refusal: no member, generation -1.
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation = kerr.GroupAuthorizationFailed.Code, -1
		if req.Version < 7 {
			resp.Protocol = kmsg.StringPtr("")
		}
		cx.reply(resp)
		return
	}
	s.cfg.Groups.JoinGroup(groupClient(cx), kreq.(*kmsg.JoinGroupRequest), func(r *kmsg.JoinGroupResponse) { cx.reply(r) })
}
