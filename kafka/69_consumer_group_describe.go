package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe, v0 and v1 (KIP-848; v1 adds the member type).
func init() {
	register(api{key: kmsg.ConsumerGroupDescribe, min: 0, max: 1, async: handleConsumerGroupDescribe})
}

func handleConsumerGroupDescribe(s *Server, cx *reqCtx, kreq kmsg.Request) {
	s.cfg.Groups.ConsumerGroupDescribe(kreq.(*kmsg.ConsumerGroupDescribeRequest), func(r *kmsg.ConsumerGroupDescribeResponse) { cx.reply(r) })
}
