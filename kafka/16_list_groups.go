package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// ListGroups, v0 to v5 (states filter v4+, KIP-518; types filter v5+,
// KIP-848: "classic" and "consumer" groups).
// With an authorizer, a principal with DESCRIBE on the cluster sees
// every group, any other only the groups it may DESCRIBE (Kafka's
// KafkaApis; never an error).
func init() {
	register(api{key: kmsg.ListGroups, min: 0, max: 5, async: handleListGroups})
}

func handleListGroups(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.ListGroupsRequest)
	if s.cfg.Authorizer == nil || s.authorizeCluster(cx, acl.OpDescribe) {
		s.cfg.Groups.ListGroups(req, func(r *kmsg.ListGroupsResponse) { cx.reply(r) })
		return
	}
	s.cfg.Groups.ListGroups(req, func(r *kmsg.ListGroupsResponse) {
		kept := r.Groups[:0]
		for _, g := range r.Groups {
			if s.authorize(cx, acl.OpDescribe, acl.ResourceGroup, g.Group) {
				kept = append(kept, g)
			}
		}
		r.Groups = kept
		cx.reply(r)
	})
}
