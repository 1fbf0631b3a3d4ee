package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat, v0 to v4.
func init() {
	register(api{key: kmsg.Heartbeat, min: 0, max: 4, async: handleHeartbeat})
}

func handleHeartbeat(s *Server, cx *reqCtx, kreq kmsg.Request) {
	s.cfg.Groups.Heartbeat(kreq.(*kmsg.HeartbeatRequest), func(r *kmsg.HeartbeatResponse) { cx.reply(r) })
}
