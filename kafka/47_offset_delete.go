package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// OffsetDelete, v0 (KIP-496).
// With an authorizer, the principal needs DELETE on the group (the
// request's error GROUP_AUTHORIZATION_FAILED) and READ on each topic
// (its partitions TOPIC_AUTHORIZATION_FAILED), as Kafka's KafkaApis.
func init() {
	register(api{key: kmsg.OffsetDelete, min: 0, max: 0, async: handleOffsetDelete})
}

func handleOffsetDelete(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	reply := func(r *kmsg.OffsetDeleteResponse) { cx.reply(r) }
	if s.cfg.Authorizer == nil {
		s.cfg.Groups.OffsetDelete(req, reply)
		return
	}
	if !s.authorize(cx, acl.OpDelete, acl.ResourceGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		reply(resp)
		return
	}
	var refused []kmsg.OffsetDeleteResponseTopic
	sub := *req
	sub.Topics = nil
	for _, t := range req.Topics {
		if s.authorize(cx, acl.OpRead, acl.ResourceTopic, t.Topic) {
			sub.Topics = append(sub.Topics, t)
			continue
		}
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		refused = append(refused, rt)
	}
	if len(refused) == 0 {
		s.cfg.Groups.OffsetDelete(req, reply)
		return
	}
	if len(sub.Topics) == 0 {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.Topics = refused
		reply(resp)
		return
	}
	s.cfg.Groups.OffsetDelete(&sub, func(r *kmsg.OffsetDeleteResponse) {
		if r.ErrorCode == 0 {
			r.Topics = append(r.Topics, refused...)
		}
		reply(r)
	})
}
