package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine/group"
)

// ConsumerGroupHeartbeat, v0 and v1 (KIP-848: the consumer group protocol
// with server-side assignment; v1 has the client name its member id and
// adds regular-expression subscriptions). The coordinator answers once the
// records the answer reports are written.
func init() {
	register(api{key: kmsg.ConsumerGroupHeartbeat, min: 0, max: 1, async: handleConsumerGroupHeartbeat})
}

func handleConsumerGroupHeartbeat(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	if req.SubscribedTopicRegex != nil && len(*req.SubscribedTopicRegex) > group.RegexMaxBytes {
		// A protocol string holds at most 32,767 bytes: Kafka cannot
		// decode such a request and closes the connection, and so does
		// ringlog (the coordinator would refuse it too; engine/group's
		// regex.go).
		cx.noReply()
		cx.c.Close()
		return
	}
	s.cfg.Groups.ConsumerGroupHeartbeat(groupClient(cx), req,
		func(r *kmsg.ConsumerGroupHeartbeatResponse) { cx.reply(r) })
}
