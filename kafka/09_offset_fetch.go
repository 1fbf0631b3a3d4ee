package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// OffsetFetch, v0 to v10: one group before v8, several from v8 (KIP-709),
// require_stable from v7 (KIP-447), the member and its epoch from v9 and
// topic ids from v10 (KIP-848).
//
// With an authorizer, as Kafka's KafkaApis: a group the principal may not
// DESCRIBE is GROUP_AUTHORIZATION_FAILED (v2+ at the top, v0 and v1 on
// each partition asked for, having no top-level error); of the topics
// asked for, those it may not DESCRIBE are answered
// TOPIC_AUTHORIZATION_FAILED with offset -1 after the others; asked for
// every topic (null), those it may not DESCRIBE are left out.
func init() {
	register(api{key: kmsg.OffsetFetch, min: 0, max: 10, async: handleOffsetFetch})
}

func handleOffsetFetch(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	if s.cfg.Authorizer == nil {
		s.cfg.Groups.OffsetFetch(req, func(r *kmsg.OffsetFetchResponse) { cx.reply(r) })
		return
	}
	if req.Version < 8 {
		s.offsetFetchOne(cx, req)
		return
	}
	// v8+: the groups it may describe go to the coordinator, each with
	// the topics it may describe; the answer is put back in the
	// request's order.
	sub := *req
	sub.Groups = nil
	var at []int
	refusedTopics := make(map[int][]kmsg.OffsetFetchResponseGroupTopic)
	for i, g := range req.Groups {
		if !s.authorize(cx, acl.OpDescribe, acl.ResourceGroup, g.Group) {
			continue
		}
		if g.Topics != nil {
			kept := []kmsg.OffsetFetchRequestGroupTopic{}
			for _, t := range g.Topics {
				if s.authorizeTopic(cx, acl.OpDescribe, t.Topic, t.TopicID) {
					kept = append(kept, t)
					continue
				}
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				for _, p := range t.Partitions {
					rp := unknownOffsetRefused(p)
					rt.Partitions = append(rt.Partitions, rp)
				}
				refusedTopics[i] = append(refusedTopics[i], rt)
			}
			g.Topics = kept
		}
		sub.Groups = append(sub.Groups, g)
		at = append(at, i)
	}
	answer := func(r *kmsg.OffsetFetchResponse) {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ThrottleMillis = r.ThrottleMillis
		resp.Groups = make([]kmsg.OffsetFetchResponseGroup, len(req.Groups))
		for i, g := range req.Groups {
			resp.Groups[i] = kmsg.NewOffsetFetchResponseGroup()
			resp.Groups[i].Group, resp.Groups[i].ErrorCode = g.Group, kerr.GroupAuthorizationFailed.Code
		}
		for j, i := range at {
			if j >= len(r.Groups) {
				break
			}
			gr := r.Groups[j]
			if gr.ErrorCode == 0 {
				if req.Groups[i].Topics == nil {
					gr.Topics = s.describableOffsets(cx, gr.Topics)
				} else {
					gr.Topics = append(gr.Topics, refusedTopics[i]...)
				}
			}
			resp.Groups[i] = gr
		}
		cx.reply(resp)
	}
	if len(sub.Groups) == 0 {
		answer(kmsg.NewPtrOffsetFetchResponse())
		return
	}
	s.cfg.Groups.OffsetFetch(&sub, answer)
}

// offsetFetchOne is OffsetFetch before v8: one group.
func (s *Server) offsetFetchOne(cx *reqCtx, req *kmsg.OffsetFetchRequest) {
	if !s.authorize(cx, acl.OpDescribe, acl.ResourceGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		if req.Version >= 2 {
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		} else {
			for _, t := range req.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, -1, -1, kmsg.StringPtr("")
					rp.ErrorCode = kerr.GroupAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		}
		cx.reply(resp)
		return
	}
	sub := *req
	var refused []kmsg.OffsetFetchResponseTopic
	if req.Topics != nil {
		sub.Topics = []kmsg.OffsetFetchRequestTopic{}
		for _, t := range req.Topics {
			if s.authorize(cx, acl.OpDescribe, acl.ResourceTopic, t.Topic) {
				sub.Topics = append(sub.Topics, t)
				continue
			}
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, -1, -1, kmsg.StringPtr("")
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			refused = append(refused, rt)
		}
	}
	s.cfg.Groups.OffsetFetch(&sub, func(r *kmsg.OffsetFetchResponse) {
		if r.ErrorCode == 0 {
			if req.Topics == nil {
				kept := r.Topics[:0]
				for _, t := range r.Topics {
					if s.authorize(cx, acl.OpDescribe, acl.ResourceTopic, t.Topic) {
						kept = append(kept, t)
					}
				}
				r.Topics = kept
			} else {
				r.Topics = append(r.Topics, refused...)
			}
		}
		cx.reply(r)
	})
}

// describableOffsets keeps the topics of an all-topics answer that the
// principal may DESCRIBE.
func (s *Server) describableOffsets(cx *reqCtx, ts []kmsg.OffsetFetchResponseGroupTopic) []kmsg.OffsetFetchResponseGroupTopic {
	kept := ts[:0]
	for _, t := range ts {
		if s.authorizeTopic(cx, acl.OpDescribe, t.Topic, t.TopicID) {
			kept = append(kept, t)
		}
	}
	return kept
}

// unknownOffsetRefused is a partition's TOPIC_AUTHORIZATION_FAILED: no
// offset, as Kafka answers it.
func unknownOffsetRefused(p int32) kmsg.OffsetFetchResponseGroupTopicPartition {
	rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, -1, -1, kmsg.StringPtr("")
	rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
	return rp
}
