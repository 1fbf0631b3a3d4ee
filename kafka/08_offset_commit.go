package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// OffsetCommit, v0 to v10: members of KIP-848 consumer groups commit with
// their member epoch from v9, and v10 names topics by id.
//
// With an authorizer the committer needs READ on the group (every
// partition GROUP_AUTHORIZATION_FAILED otherwise) and READ on each topic:
// the partitions of a topic it may not read are TOPIC_AUTHORIZATION_FAILED
// and the others are committed, as Kafka's KafkaApis does.
func init() {
	register(api{key: kmsg.OffsetCommit, min: 0, max: 10, async: handleOffsetCommit})
}

func handleOffsetCommit(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	reply := func(r *kmsg.OffsetCommitResponse) { cx.reply(r) }
	if s.cfg.Authorizer == nil {
		s.cfg.Groups.OffsetCommit(req, reply)
		return
	}
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	if !s.authorize(cx, acl.OpRead, acl.ResourceGroup, req.Group) {
		for _, t := range req.Topics {
			resp.Topics = append(resp.Topics, offsetCommitRefused(t, kerr.GroupAuthorizationFailed.Code))
		}
		reply(resp)
		return
	}
	var refused []kmsg.OffsetCommitResponseTopic
	var kept []kmsg.OffsetCommitRequestTopic
	for _, t := range req.Topics {
		if s.authorizeTopic(cx, acl.OpRead, t.Topic, t.TopicID) {
			kept = append(kept, t)
		} else {
			refused = append(refused, offsetCommitRefused(t, kerr.TopicAuthorizationFailed.Code))
		}
	}
	switch {
	case len(refused) == 0:
		s.cfg.Groups.OffsetCommit(req, reply)
	case len(kept) == 0:
		resp.Topics = refused
		reply(resp)
	default:
		sub := *req
		sub.Topics = kept
		s.cfg.Groups.OffsetCommit(&sub, func(r *kmsg.OffsetCommitResponse) {
			r.Topics = append(r.Topics, refused...)
			reply(r)
		})
	}
}

// offsetCommitRefused answers every partition of t with code.
func offsetCommitRefused(t kmsg.OffsetCommitRequestTopic, code int16) kmsg.OffsetCommitResponseTopic {
	rt := kmsg.NewOffsetCommitResponseTopic()
	rt.Topic, rt.TopicID = t.Topic, t.TopicID
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetCommitResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}
