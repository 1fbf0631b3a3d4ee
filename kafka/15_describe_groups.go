package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// DescribeGroups, v0 to v6 (v6 answers a missing group, or a consumer
// group, GROUP_ID_NOT_FOUND with a message, KIP-1043).
// With an authorizer, a group the principal may not DESCRIBE is
// GROUP_AUTHORIZATION_FAILED, answered before the others as Kafka does;
// the others carry the principal's operations on them (KIP-430).
func init() {
	register(api{key: kmsg.DescribeGroups, min: 0, max: 6, async: handleDescribeGroups})
}

func handleDescribeGroups(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	if s.cfg.Authorizer == nil {
		s.cfg.Groups.DescribeGroups(req, func(r *kmsg.DescribeGroupsResponse) { cx.reply(r) })
		return
	}
	var refused []kmsg.DescribeGroupsResponseGroup
	sub := *req
	allowed, denied := s.splitAuthorized(cx, acl.OpDescribe, acl.ResourceGroup, req.Groups)
	sub.Groups = allowed
	for _, g := range denied {
		d := kmsg.NewDescribeGroupsResponseGroup()
		d.Group, d.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		refused = append(refused, d)
	}
	answer := func(r *kmsg.DescribeGroupsResponse) {
		for i := range r.Groups {
			if d := &r.Groups[i]; d.ErrorCode == 0 && req.Version >= 3 {
				d.AuthorizedOperations = s.authorizedOperations(cx, req.IncludeAuthorizedOperations, acl.ResourceGroup, d.Group)
			}
		}
		r.Groups = append(refused, r.Groups...)
		cx.reply(r)
	}
	if len(sub.Groups) == 0 {
		answer(req.ResponseKind().(*kmsg.DescribeGroupsResponse))
		return
	}
	s.cfg.Groups.DescribeGroups(&sub, answer)
}
