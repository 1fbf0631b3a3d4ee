package difftest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// electLeadersReq asks for an election of type typ (0 preferred, 1
// unclean) of topic's partitions; all: a null list (every partition).
func electLeadersReq(version int16, typ int8, all bool, topic string, partitions ...int32) *kmsg.ElectLeadersRequest {
	req := kmsg.NewPtrElectLeadersRequest()
	req.SetVersion(version)
	req.ElectionType, req.TimeoutMillis = typ, 10_000
	if !all {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic, rt.Partitions = topic, partitions
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// TestElectLeaders: on one broker every partition is led by its preferred
// replica, so each election is ELECTION_NOT_NEEDED, and a partition or
// topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION; both types, at
// v0 (preferred only, no request-wide code) and v2, by list and for every
// partition (which leaves out the partitions that needed nothing).
func TestElectLeaders(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		s.createTopic(topic, 2, nil)
		for _, v := range []int16{0, 2} {
			s.do("preferred, led by their preferred replica", electLeadersReq(v, 0, false, topic, 0, 1))
			s.do("preferred, a partition that does not exist", electLeadersReq(v, 0, false, topic, 5))
			s.do("preferred, a topic that does not exist", electLeadersReq(v, 0, false, name(s.t, "missing"), 0))
			s.do("preferred, every partition", electLeadersReq(v, 0, true, ""))
		}
		s.do("unclean, led", electLeadersReq(2, 1, false, topic, 0, 1))
		s.do("unclean, a partition that does not exist", electLeadersReq(2, 1, false, topic, 9))
		s.do("unclean, every partition", electLeadersReq(2, 1, true, ""))
	})
}
