package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine/group"
	"ringlog/internal/acl"
)

// ConsumerGroupHeartbeat, v0 and v1 (KIP-848: the consumer group protocol
// with server-side assignment; v1 has the client name its member id and
// adds regular-expression subscriptions). The coordinator answers once the
// records the answer reports are written. With an authorizer, see
// consumerHeartbeatAuthorized; a regular-expression subscription then
// resolves only to topics the member may DESCRIBE.
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
	if code := s.consumerHeartbeatAuthorized(cx, req); code != 0 {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		cx.reply(resp)
		return
	}
	cl := groupClient(cx)
	if a := s.cfg.Authorizer; a != nil && cx.session != nil {
		// Regex subscriptions resolve to the topics the member may
		// DESCRIBE (Kafka 4, KAFKA-18813). Asked on the coordinator's
		// shard, so the principal and host are taken here, and the
		// authorizer asked without the connection's cache.
		principal, host := cx.session.Principal(), cx.session.host()
		cl.DescribeTopic = func(topic string) bool {
			return a.Authorize(principal, host, acl.OpDescribe, acl.ResourceTopic, topic)
		}
	}
	s.cfg.Groups.ConsumerGroupHeartbeat(cl, req,
		func(r *kmsg.ConsumerGroupHeartbeatResponse) { cx.reply(r) })
}

// consumerHeartbeatAuthorized is Kafka 4's check of a heartbeat: READ on
// the group (GROUP_AUTHORIZATION_FAILED), then DESCRIBE on every topic
// of a subscription by names (TOPIC_AUTHORIZATION_FAILED: a member may
// not learn the partitions of a topic it may not see).
func (s *Server) consumerHeartbeatAuthorized(cx *reqCtx, req *kmsg.ConsumerGroupHeartbeatRequest) int16 {
	if s.cfg.Authorizer == nil {
		return 0
	}
	if !s.authorize(cx, acl.OpRead, acl.ResourceGroup, req.Group) {
		return kerr.GroupAuthorizationFailed.Code
	}
	for _, t := range req.SubscribedTopicNames {
		if !s.authorize(cx, acl.OpDescribe, acl.ResourceTopic, t) {
			return kerr.TopicAuthorizationFailed.Code
		}
	}
	return 0
}
