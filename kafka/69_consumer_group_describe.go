package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// ConsumerGroupDescribe, v0 and v1 (KIP-848; v1 adds the member type).
// With an authorizer, a group the principal may not DESCRIBE is
// GROUP_AUTHORIZATION_FAILED (before the others, as Kafka answers); the
// others carry the principal's operations on them (KIP-430).
func init() {
	register(api{key: kmsg.ConsumerGroupDescribe, min: 0, max: 1, async: handleConsumerGroupDescribe})
}

func handleConsumerGroupDescribe(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	if s.cfg.Authorizer == nil {
		s.cfg.Groups.ConsumerGroupDescribe(req, func(r *kmsg.ConsumerGroupDescribeResponse) { cx.reply(r) })
		return
	}
	var refused []kmsg.ConsumerGroupDescribeResponseGroup
	sub := *req
	allowed, denied := s.splitAuthorized(cx, acl.OpDescribe, acl.ResourceGroup, req.Groups)
	sub.Groups = allowed
	for _, g := range denied {
		d := kmsg.NewConsumerGroupDescribeResponseGroup()
		d.Group, d.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		refused = append(refused, d)
	}
	answer := func(r *kmsg.ConsumerGroupDescribeResponse) {
		for i := range r.Groups {
			if d := &r.Groups[i]; d.ErrorCode == 0 {
				d.AuthorizedOperations = s.authorizedOperations(cx, req.IncludeAuthorizedOperations, acl.ResourceGroup, d.Group)
			}
		}
		r.Groups = append(refused, r.Groups...)
		cx.reply(r)
	}
	if len(sub.Groups) == 0 {
		answer(req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse))
		return
	}
	s.cfg.Groups.ConsumerGroupDescribe(&sub, answer)
}
