package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups, v0 to v6 (v6 answers a missing group, or a consumer
// group, GROUP_ID_NOT_FOUND with a message, KIP-1043).
func init() {
	register(api{key: kmsg.DescribeGroups, min: 0, max: 6, async: handleDescribeGroups})
}

func handleDescribeGroups(s *Server, cx *reqCtx, kreq kmsg.Request) {
	s.cfg.Groups.DescribeGroups(kreq.(*kmsg.DescribeGroupsRequest), func(r *kmsg.DescribeGroupsResponse) { cx.reply(r) })
}
