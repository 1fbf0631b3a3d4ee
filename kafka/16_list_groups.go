package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups, v0 to v5 (states filter v4+, KIP-518; types filter v5+,
// KIP-848: "classic" and "consumer" groups).
func init() {
	register(api{key: kmsg.ListGroups, min: 0, max: 5, async: handleListGroups})
}

func handleListGroups(s *Server, cx *reqCtx, kreq kmsg.Request) {
	s.cfg.Groups.ListGroups(kreq.(*kmsg.ListGroupsRequest), func(r *kmsg.ListGroupsResponse) { cx.reply(r) })
}
