package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups, v0 to v5. (v6 answers a missing group
// GROUP_ID_NOT_FOUND with a message, KIP-1043; not served yet.)
func init() {
	register(api{key: kmsg.DescribeGroups, min: 0, max: 5, async: handleDescribeGroups})
}

func handleDescribeGroups(s *Server, cx *reqCtx, kreq kmsg.Request) {
	s.cfg.Groups.DescribeGroups(kreq.(*kmsg.DescribeGroupsRequest), func(r *kmsg.DescribeGroupsResponse) { cx.reply(r) })
}
