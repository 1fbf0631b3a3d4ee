package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupHeartbeat, v0 and v1 (KIP-848: the consumer group protocol
// with server-side assignment; v1 has the client name its member id and
// adds regular-expression subscriptions). The coordinator answers once the
// records the answer reports are written.
func init() {
	register(api{key: kmsg.ConsumerGroupHeartbeat, min: 0, max: 1, async: handleConsumerGroupHeartbeat})
}

func handleConsumerGroupHeartbeat(s *Server, cx *reqCtx, kreq kmsg.Request) {
	s.cfg.Groups.ConsumerGroupHeartbeat(groupClient(cx), kreq.(*kmsg.ConsumerGroupHeartbeatRequest),
		func(r *kmsg.ConsumerGroupHeartbeatResponse) { cx.reply(r) })
}
