package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// DeleteGroups, v0 to v3 (v3 adds error messages, KIP-1043).
// With an authorizer, a group the principal may not DELETE is
// GROUP_AUTHORIZATION_FAILED.
func init() {
	register(api{key: kmsg.DeleteGroups, min: 0, max: 3, async: handleDeleteGroups})
}

func handleDeleteGroups(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	if s.cfg.Authorizer == nil {
		s.cfg.Groups.DeleteGroups(req, func(r *kmsg.DeleteGroupsResponse) { cx.reply(r) })
		return
	}
	var refused []kmsg.DeleteGroupsResponseGroup
	sub := *req
	sub.Groups = nil
	seen := make(map[string]bool, len(req.Groups))
	for _, g := range req.Groups {
		switch {
		case s.authorize(cx, acl.OpDelete, acl.ResourceGroup, g):
			sub.Groups = append(sub.Groups, g)
		case !seen[g]:
			// Kafka answers each refused group once, after the others.
			seen[g] = true
			d := kmsg.NewDeleteGroupsResponseGroup()
			d.Group, d.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
			refused = append(refused, d)
		}
	}
	answer := func(r *kmsg.DeleteGroupsResponse) {
		r.Groups = append(r.Groups, refused...)
		cx.reply(r)
	}
	if len(sub.Groups) == 0 {
		answer(req.ResponseKind().(*kmsg.DeleteGroupsResponse))
		return
	}
	s.cfg.Groups.DeleteGroups(&sub, answer)
}
