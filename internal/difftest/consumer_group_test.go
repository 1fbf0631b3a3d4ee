package difftest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerHeartbeatReq is a KIP-848 heartbeat; a joining member (epoch 0)
// sends its whole state, later ones may leave fields null (unchanged).
func consumerHeartbeatReq(group, member string, epoch int32, topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.SetVersion(vConsumerHeartbeat)
	req.Group, req.MemberID, req.MemberEpoch = group, member, epoch
	req.RebalanceTimeoutMillis = -1
	if epoch == 0 {
		req.RebalanceTimeoutMillis = rebalanceTimeout
		req.SubscribedTopicNames = topics
		req.ServerAssignor = kmsg.StringPtr("uniform")
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	}
	return req
}

func consumerDescribeReq(groups ...string) *kmsg.ConsumerGroupDescribeRequest {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.SetVersion(vConsumerDescribe)
	req.Groups = groups
	return req
}

// consumer is a KIP-848 member as a client keeps it: the member id it made
// up (ConsumerGroupHeartbeat v1, KIP-1082; the same on both sides, so that
// it compares), its epoch, and the partitions it owns, which it reports.
type consumer struct {
	c     *conn
	group string
	id    string
	epoch int32
	owned []kmsg.ConsumerGroupHeartbeatRequestTopic
}

// take follows a heartbeat's answer as a client does: the new epoch, and
// the new assignment when there is one (which it then owns: the scripts
// revoke and take partitions at once).
func (m *consumer) take(r *kmsg.ConsumerGroupHeartbeatResponse) {
	if r.ErrorCode != 0 {
		return
	}
	m.epoch = r.MemberEpoch
	if r.Assignment != nil {
		m.owned = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, t := range r.Assignment.Topics {
			m.owned = append(m.owned, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
		}
	}
}

// join sends a member's first heartbeat (req, at epoch 0) and records the
// answer under label without its assignment, which the member then takes.
// A first member's partitions are timing (README.md, "Not compared"):
// Kafka 4.4 computes the target assignment off the heartbeat's path and
// once answered a join with no partitions, handing them out a heartbeat
// later; ringlog computes it in the join. The scripts compare the
// assignment once the group settles.
func (s *side) join(label string, m *consumer, req *kmsg.ConsumerGroupHeartbeatRequest) {
	resp, err := m.c.roundTrip(req)
	if err != nil {
		s.record(m.c, label, req, nil, err)
		return
	}
	r := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
	recorded := *r
	recorded.Assignment = nil
	s.record(m.c, label, req, &recorded, nil)
	m.take(r)
}

// settle heartbeats the members (unrecorded) until the group is stable:
// every member at the group epoch, which is the assignment epoch, and
// every partition of the group's topics assigned. Kafka computes target
// assignments off the heartbeat's path and hands them out at a later
// heartbeat; ringlog computes them in the heartbeat that needs them: the
// scripts compare stable groups, not when they got there.
func (s *side) settle(partitions int, members ...*consumer) {
	s.eventually("a stable consumer group", func() kmsg.Request {
		for _, m := range members {
			req := consumerHeartbeatReq(m.group, m.id, m.epoch)
			req.Topics = m.owned
			m.take(s.quietOn(m.c, req).(*kmsg.ConsumerGroupHeartbeatResponse))
		}
		return consumerDescribeReq(members[0].group)
	}, func(r kmsg.Response) bool {
		g := r.(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
		if g.State != "Stable" || g.Epoch != g.AssignmentEpoch || len(g.Members) != len(members) {
			return false
		}
		n := 0
		for _, dm := range g.Members {
			if dm.MemberEpoch != g.Epoch {
				return false
			}
			for _, t := range dm.Assignment.TopicPartitions {
				n += len(t.Partitions)
			}
		}
		for _, m := range members {
			if m.epoch != g.Epoch {
				return false
			}
		}
		return n == partitions
	})
}

// TestConsumerGroup: KIP-848 members join, get their assignments,
// heartbeat with wrong epochs and unknown ids, are described with both
// describe APIs and listed, commit, and leave.
func TestConsumerGroup(t *testing.T) {
	run(t, func(s *side) {
		group, topic := name(s.t, ""), name(s.t, "")
		s.createTopic(topic, 2, nil)
		s.coordinated(group)
		a := &consumer{c: s.mainConn(), group: group, id: "difftest-member-a-0000"}
		s.join("join", a, consumerHeartbeatReq(group, a.id, 0, topic))
		s.settle(2, a)
		first := a.epoch
		s.do("heartbeat", consumerHeartbeatReq(group, a.id, a.epoch))
		s.do("describe", consumerDescribeReq(group, name(s.t, "nope")))
		s.do("describe, classic API", describeGroupsReq(group))
		s.listGroupsOf("list, consumer", nil, []string{"consumer"}, group)
		s.listGroupsOf("list, classic", nil, []string{"classic"}, group)

		// A second member on a connection (and client id) of its own;
		// what its join answers depends on when the assignor runs.
		b := &consumer{c: s.conn(), group: group, id: "difftest-member-b-0000"}
		b.take(s.quietOn(b.c, consumerHeartbeatReq(group, b.id, 0, topic)).(*kmsg.ConsumerGroupHeartbeatResponse))
		s.settle(2, a, b)
		var kept int32 // the partition a kept when b came
		for _, t := range a.owned {
			kept = t.Partitions[0]
		}
		s.do("describe, two members", consumerDescribeReq(group))
		s.doOn(b.c, "leave", consumerHeartbeatReq(group, b.id, -1))
		s.settle(2, a)

		s.do("heartbeat, newer epoch", consumerHeartbeatReq(group, a.id, a.epoch+3))
		s.do("heartbeat, older epoch", consumerHeartbeatReq(group, a.id, a.epoch-1))
		s.do("heartbeat, unknown member", consumerHeartbeatReq(group, "difftest-nobody-00000", a.epoch))
		s.do("heartbeat, no member id", consumerHeartbeatReq(group, "", 0, topic))
		s.do("heartbeat, no subscription", func() kmsg.Request {
			r := consumerHeartbeatReq(group, "difftest-member-c-0000", 0)
			r.SubscribedTopicNames = nil
			return r
		}())
		s.do("heartbeat, unknown assignor", func() kmsg.Request {
			r := consumerHeartbeatReq(group, "difftest-member-c-0000", 0, topic)
			r.ServerAssignor = kmsg.StringPtr("nope")
			return r
		}())
		s.do("classic heartbeat", heartbeatReq(group, a.id, a.epoch))
		s.do("commit", commitReq(group, a.id, a.epoch, topic, 4, 0))
		s.do("commit, stale epoch", commitReq(group, a.id, a.epoch-1, topic, 4, 0))
		// KIP-1251: an older epoch commits what the member held since it.
		s.do("commit at the first epoch, the partition kept", commitReq(group, a.id, first, topic, 5, kept))
		s.do("commit at the first epoch, both partitions", commitReq(group, a.id, first, topic, 6, 0, 1))
		s.do("commit, newer epoch", commitReq(group, a.id, a.epoch+1, topic, 6, 0))
		s.do("fetch offsets", fetchOffsetsReq(group, topic, 0, 1))
		s.do("leave the last", consumerHeartbeatReq(group, a.id, -1))
		s.do("describe, empty", consumerDescribeReq(group))
		s.do("heartbeat after leaving", consumerHeartbeatReq(group, a.id, a.epoch))
		s.do("delete", deleteGroupsReq(group))
		s.do("describe, deleted", consumerDescribeReq(group))
	})
}
