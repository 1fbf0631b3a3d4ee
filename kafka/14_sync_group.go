package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup, v0 to v5 (protocol type and name checked from v5, KIP-559).
// A follower's answer waits for the leader's assignment.
func init() {
	register(api{key: kmsg.SyncGroup, min: 0, max: 5, async: handleSyncGroup})
}

func handleSyncGroup(s *Server, cx *reqCtx, kreq kmsg.Request) {
	s.cfg.Groups.SyncGroup(kreq.(*kmsg.SyncGroupRequest), func(r *kmsg.SyncGroupResponse) { cx.reply(r) })
}
