package difftest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// staticJoinReq is joinReq for a static member (KIP-345).
func staticJoinReq(group, member, instance string, topics ...string) *kmsg.JoinGroupRequest {
	req := joinReq(group, member, topics...)
	req.InstanceID = kmsg.StringPtr(instance)
	return req
}

func staticHeartbeatReq(group, member, instance string, generation int32) *kmsg.HeartbeatRequest {
	req := heartbeatReq(group, member, generation)
	req.InstanceID = kmsg.StringPtr(instance)
	return req
}

// TestStaticGroup: a classic group's static member (group.instance.id,
// KIP-345) joins without the member id round, comes back under a new
// member id with the same instance id without a rebalance, fences its old
// incarnation (FENCED_INSTANCE_ID), and leaves by instance id.
func TestStaticGroup(t *testing.T) {
	run(t, func(s *side) {
		group, topic := name(s.t, ""), name(s.t, "")
		s.createTopic(topic, 2, nil)
		s.coordinated(group)
		j := s.do("join", staticJoinReq(group, "", "i1", topic)).(*kmsg.JoinGroupResponse)
		a, gen := j.MemberID, j.Generation
		s.do("sync", syncReq(group, a, gen, map[string][]byte{a: consumerAssignment(topic, 0, 1)}))
		s.do("heartbeat", staticHeartbeatReq(group, a, "i1", gen))
		s.do("describe", describeGroupsReq(group))

		j2 := s.do("join again, same instance id, no member id", staticJoinReq(group, "", "i1", topic)).(*kmsg.JoinGroupResponse)
		a2, gen2 := j2.MemberID, j2.Generation
		s.do("heartbeat of the old member id", staticHeartbeatReq(group, a, "i1", gen))
		s.do("sync of the old member id", func() kmsg.Request {
			r := syncReq(group, a, gen, nil)
			r.InstanceID = kmsg.StringPtr("i1")
			return r
		}())
		s.do("join of the old member id", staticJoinReq(group, a, "i1", topic))
		s.do("sync of the new member id", func() kmsg.Request {
			r := syncReq(group, a2, gen2, nil)
			r.InstanceID = kmsg.StringPtr("i1")
			return r
		}())
		s.do("heartbeat of the new member id", staticHeartbeatReq(group, a2, "i1", gen2))
		s.do("heartbeat, unknown instance id", staticHeartbeatReq(group, a2, "i9", gen2))
		s.do("commit of the old member id", func() kmsg.Request {
			r := commitReq(group, a, gen, topic, 3, 0)
			r.InstanceID = kmsg.StringPtr("i1")
			return r
		}())
		s.do("describe after the new incarnation", describeGroupsReq(group))
		s.do("leave, instance id with the old member id", func() kmsg.Request {
			r := leaveReq(group)
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID, m.InstanceID = a, kmsg.StringPtr("i1")
			r.Members = append(r.Members, m)
			return r
		}())
		s.do("leave by instance id", func() kmsg.Request {
			r := leaveReq(group)
			m := kmsg.NewLeaveGroupRequestMember()
			m.InstanceID = kmsg.StringPtr("i1")
			r.Members = append(r.Members, m)
			return r
		}())
		s.do("describe after the leave", describeGroupsReq(group))
	})
}

// TestConsumerGroupStatic: a KIP-848 static member: another member cannot
// take its instance id while it is there (UNRELEASED_INSTANCE_ID); once it
// leaves for a while (epoch -2) a new incarnation takes its place and its
// partitions at once; the old incarnation is fenced.
func TestConsumerGroupStatic(t *testing.T) {
	run(t, func(s *side) {
		group, topic := name(s.t, ""), name(s.t, "")
		s.createTopic(topic, 2, nil)
		s.coordinated(group)
		static := func(id string, epoch int32, topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
			r := consumerHeartbeatReq(group, id, epoch, topics...)
			r.InstanceID = kmsg.StringPtr("s1")
			return r
		}
		a := &consumer{c: s.mainConn(), group: group, id: "difftest-static-a-0000"}
		s.join("join", a, static(a.id, 0, topic))
		s.settle(2, a)
		s.do("describe", consumerDescribeReq(group))
		s.do("another member id, same instance id", static("difftest-static-b-0000", 0, topic))
		s.do("heartbeat without the instance id", consumerHeartbeatReq(group, a.id, a.epoch))
		s.do("leave for a while", static(a.id, -2))
		s.do("describe, away", consumerDescribeReq(group))
		b := &consumer{c: s.conn(), group: group, id: "difftest-static-b-0000"}
		b.take(s.doOn(b.c, "a new incarnation", static(b.id, 0, topic)).(*kmsg.ConsumerGroupHeartbeatResponse))
		s.do("the old incarnation heartbeats", static(a.id, a.epoch))
		s.do("the old incarnation joins", static(a.id, 0, topic))
		s.do("unknown instance id", func() kmsg.Request {
			r := consumerHeartbeatReq(group, b.id, b.epoch)
			r.InstanceID = kmsg.StringPtr("s9")
			return r
		}())
		s.do("describe, replaced", consumerDescribeReq(group))
		s.doOn(b.c, "leave", static(b.id, -1))
		s.do("describe, empty", consumerDescribeReq(group))
	})
}
