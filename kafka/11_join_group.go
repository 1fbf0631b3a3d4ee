package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup, v0 to v9 (MEMBER_ID_REQUIRED from v4, KIP-394; static
// membership from v5, KIP-345; SkipAssignment in v9, KIP-814). The answer
// comes when the rebalance completes.
func init() {
	register(api{key: kmsg.JoinGroup, min: 0, max: 9, async: handleJoinGroup})
}

func handleJoinGroup(s *Server, cx *reqCtx, kreq kmsg.Request) {
	s.cfg.Groups.JoinGroup(groupClient(cx), kreq.(*kmsg.JoinGroupRequest), func(r *kmsg.JoinGroupResponse) { cx.reply(r) })
}
