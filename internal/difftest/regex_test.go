package difftest

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// regexHeartbeatReq is a KIP-848 join subscribing by regular expression.
func regexHeartbeatReq(group, member, regex string) *kmsg.ConsumerGroupHeartbeatRequest {
	r := consumerHeartbeatReq(group, member, 0)
	r.SubscribedTopicNames = nil
	r.SubscribedTopicRegex = kmsg.StringPtr(regex)
	return r
}

// TestConsumerGroupRegex: a KIP-848 member subscribing with a regular
// expression (SubscribedTopicRegex) gets the partitions of the topics it
// matches, whole names only; an invalid one is refused, as are long ones.
func TestConsumerGroupRegex(t *testing.T) {
	run(t, func(s *side) {
		group := name(s.t, "")
		a1, a2, b := name(s.t, "a1"), name(s.t, "a2"), name(s.t, "b")
		s.createTopic(a1, 1, nil)
		s.createTopic(a2, 2, nil)
		s.createTopic(b, 1, nil)
		s.coordinated(group)
		m := &consumer{c: s.mainConn(), group: group, id: "difftest-regex-a-0000"}
		// The prefix is the test's own, so that the topics of other tests
		// do not match.
		// Kafka resolves a new regex off the heartbeat's path: its answer
		// to the join may not have the assignment yet (not compared).
		m.take(s.quietOn(m.c, regexHeartbeatReq(group, m.id, name(s.t, "a.*"))).(*kmsg.ConsumerGroupHeartbeatResponse))
		s.settle(3, m)
		s.do("describe", consumerDescribeReq(group))
		s.do("invalid", regexHeartbeatReq(group, "difftest-regex-d-0000", "["))
		s.do("a Java construct RE2 lacks", regexHeartbeatReq(group, "difftest-regex-e-0000", name(s.t, "(?=a)a1")))
		// A protocol string holds at most 32,767 bytes: Kafka takes a
		// regex that long and cannot decode a longer one.
		c := &consumer{c: s.conn(), group: group, id: "difftest-regex-c-0000"}
		c.take(s.doOn(c.c, "a prefix is not a match", regexHeartbeatReq(group, c.id, name(s.t, "a"))).(*kmsg.ConsumerGroupHeartbeatResponse))
		f := &consumer{c: s.conn(), group: group, id: "difftest-regex-f-0000"}
		longest := name(s.t, "") + "-" + strings.Repeat("x", 32767-len(name(s.t, ""))-1)
		f.take(s.doOn(f.c, "a regex of 32,767 bytes", regexHeartbeatReq(group, f.id, longest)).(*kmsg.ConsumerGroupHeartbeatResponse))
		s.doOn(s.conn(), "a regex of 32,768 bytes", regexHeartbeatReq(group, "difftest-regex-g-0000", longest+"x"))
		s.settle(3, m, c, f)
		s.do("describe with three members", consumerDescribeReq(group))
		for _, x := range []*consumer{c, f, m} {
			s.doOn(x.c, "leave", consumerHeartbeatReq(group, x.id, -1))
		}
	})
}
