package difftest

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Session and rebalance timeouts of the classic members: above Kafka's
// group.min.session.timeout.ms (6 s), long enough that no member expires
// while the script runs.
const (
	sessionTimeout   = 10_000
	rebalanceTimeout = 10_000
)

// consumerMetadata is a consumer's subscription as JoinGroup carries it.
func consumerMetadata(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version, m.Topics = 0, topics
	return m.AppendTo(nil)
}

func consumerAssignment(topic string, partitions ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	t := kmsg.NewConsumerMemberAssignmentTopic()
	t.Topic, t.Partitions = topic, partitions
	a.Topics = append(a.Topics, t)
	return a.AppendTo(nil)
}

func joinReq(group, member string, topics ...string) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.SetVersion(vJoinGroup)
	req.Group, req.MemberID, req.ProtocolType = group, member, "consumer"
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = sessionTimeout, rebalanceTimeout
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", consumerMetadata(topics...)
	req.Protocols = append(req.Protocols, p)
	return req
}

func syncReq(group, member string, generation int32, assignments map[string][]byte) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.SetVersion(vSyncGroup)
	req.Group, req.MemberID, req.Generation = group, member, generation
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	for m, a := range assignments {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = m, a
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	return req
}

func heartbeatReq(group, member string, generation int32) *kmsg.HeartbeatRequest {
	req := kmsg.NewPtrHeartbeatRequest()
	req.SetVersion(vHeartbeat)
	req.Group, req.MemberID, req.Generation = group, member, generation
	return req
}

func leaveReq(group string, members ...string) *kmsg.LeaveGroupRequest {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.SetVersion(vLeaveGroup)
	req.Group = group
	for _, m := range members {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = m
		req.Members = append(req.Members, lm)
	}
	return req
}

// commitReq commits offset to every partition named, by topic name.
func commitReq(group, member string, generation int32, topic string, offset int64, partitions ...int32) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(vOffsetCommitNames)
	req.Group, req.MemberID, req.Generation = group, member, generation
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, offset, -1
		rp.Metadata = kmsg.StringPtr("m")
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	return req
}

// fetchOffsetsReq asks for a group's offsets: of the topics named (by
// name) and their partitions, or of every topic when topic is "".
func fetchOffsetsReq(group, topic string, partitions ...int32) *kmsg.OffsetFetchRequest {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(vOffsetFetchNames)
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	if topic != "" {
		t := kmsg.NewOffsetFetchRequestGroupTopic()
		t.Topic, t.Partitions = topic, partitions
		g.Topics = append(g.Topics, t)
	}
	req.Groups = append(req.Groups, g)
	return req
}

func offsetDeleteReq(group, topic string, partitions ...int32) *kmsg.OffsetDeleteRequest {
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.SetVersion(vOffsetDelete)
	req.Group = group
	t := kmsg.NewOffsetDeleteRequestTopic()
	t.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewOffsetDeleteRequestTopicPartition()
		rp.Partition = p
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	return req
}

func deleteGroupsReq(groups ...string) *kmsg.DeleteGroupsRequest {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.SetVersion(vDeleteGroups)
	req.Groups = groups
	return req
}

// listGroupsOf lists the groups with the states and types given and keeps
// those named (every test's groups share the brokers).
func (s *side) listGroupsOf(label string, states, types []string, groups ...string) {
	req := kmsg.NewPtrListGroupsRequest()
	req.SetVersion(vListGroups)
	req.StatesFilter, req.TypesFilter = states, types
	resp := s.do(label, req).(*kmsg.ListGroupsResponse)
	resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool { return !slices.Contains(groups, g.Group) })
}

// TestClassicGroup takes one classic group through its states with one
// member and then two: joins (KIP-394's member id round), syncs,
// heartbeats with wrong generations and members, offset commits and
// fetches (also of unknown topics), describe, list, leave, offset delete,
// delete.
func TestClassicGroup(t *testing.T) {
	run(t, func(s *side) {
		group, topic := name(s.t, ""), name(s.t, "")
		s.createTopic(topic, 2, nil)
		s.coordinated(group)
		s.do("find coordinator", findCoordinatorReq(0, group))
		s.do("describe, empty", describeGroupsReq(group))

		first := s.do("join, no member id", joinReq(group, "", topic)).(*kmsg.JoinGroupResponse)
		a := first.MemberID
		j := s.do("join", joinReq(group, a, topic)).(*kmsg.JoinGroupResponse)
		gen := j.Generation
		s.do("heartbeat before sync", heartbeatReq(group, a, gen))
		s.do("sync, wrong generation", syncReq(group, a, gen+1, nil))
		s.do("sync, unknown member", syncReq(group, "nobody", gen, nil))
		s.do("sync", syncReq(group, a, gen, map[string][]byte{a: consumerAssignment(topic, 0, 1)}))
		s.do("heartbeat", heartbeatReq(group, a, gen))
		s.do("heartbeat, wrong generation", heartbeatReq(group, a, gen+5))
		s.do("heartbeat, unknown member", heartbeatReq(group, "nobody", gen))
		s.do("heartbeat, unknown group", heartbeatReq(name(s.t, "nope"), a, gen))
		s.do("describe, stable", describeGroupsReq(group, name(s.t, "nope")))

		s.do("commit", commitReq(group, a, gen, topic, 5, 0, 1))
		s.do("commit, wrong generation", commitReq(group, a, gen+1, topic, 6, 0))
		s.do("commit, unknown member", commitReq(group, "nobody", gen, topic, 6, 0))
		s.do("commit, unknown partition", commitReq(group, a, gen, topic, 6, 9))
		s.do("commit, unknown topic", commitReq(group, a, gen, name(s.t, "nope"), 6, 0))
		s.do("fetch offsets", fetchOffsetsReq(group, topic, 0, 1, 9))
		s.do("fetch offsets, unknown topic", fetchOffsetsReq(group, name(s.t, "nope"), 0))
		s.do("fetch offsets, all", fetchOffsetsReq(group, ""))
		s.do("fetch offsets, unknown group", fetchOffsetsReq(name(s.t, "nope"), topic, 0))
		s.listGroupsOf("list", nil, nil, group)
		s.listGroupsOf("list, stable classic", []string{"Stable"}, []string{"classic"}, group)
		s.listGroupsOf("list, empty", []string{"Empty"}, nil, group)

		// A second member: the first learns of the rebalance from its
		// heartbeat and joins again; both sync.
		b2 := s.conn()
		first2 := s.doOn(b2, "second join, no member id", joinReq(group, "", topic)).(*kmsg.JoinGroupResponse)
		b := first2.MemberID
		joinB := s.async(b2, "second join", joinReq(group, b, topic))
		s.eventually("the rebalance", func() kmsg.Request { return describeGroupsReq(group) }, func(r kmsg.Response) bool {
			return r.(*kmsg.DescribeGroupsResponse).Groups[0].State == "PreparingRebalance"
		})
		s.do("heartbeat during the rebalance", heartbeatReq(group, a, gen))
		s.do("commit during the rebalance", commitReq(group, a, gen, topic, 7, 0))
		ja := s.do("join again", joinReq(group, a, topic)).(*kmsg.JoinGroupResponse)
		jb := s.wait(joinB).(*kmsg.JoinGroupResponse)
		gen2 := ja.Generation
		syncB := s.async(b2, "second sync", syncReq(group, jb.MemberID, jb.Generation, nil))
		s.do("leader sync", syncReq(group, a, gen2, map[string][]byte{
			a: consumerAssignment(topic, 0), b: consumerAssignment(topic, 1),
		}))
		s.wait(syncB)
		s.do("heartbeat, old generation", heartbeatReq(group, a, gen))
		s.do("describe, two members", describeGroupsReq(group))
		s.do("offset delete, subscribed", offsetDeleteReq(group, topic, 0))
		s.do("delete, not empty", deleteGroupsReq(group))

		s.do("leave, unknown member", leaveReq(group, "nobody"))
		s.do("leave", leaveReq(group, b))
		s.do("heartbeat after a leave", heartbeatReq(group, a, gen2))
		s.do("leave the last", leaveReq(group, a))
		s.do("describe, empty again", describeGroupsReq(group))
		s.do("offset delete", offsetDeleteReq(group, topic, 0))
		s.do("offset delete, unknown topic", offsetDeleteReq(group, name(s.t, "nope"), 0))
		s.do("fetch offsets after offset delete", fetchOffsetsReq(group, topic, 0, 1))
		s.do("offset delete, unknown group", offsetDeleteReq(name(s.t, "nope"), topic, 0))
		s.do("delete", deleteGroupsReq(group, name(s.t, "nope")))
		s.do("describe, deleted", describeGroupsReq(group))

		s.slow(func() { classicTimeouts(s, name(s.t, "timeouts"), topic) })
	})
}

// classicTimeouts: a member whose session ends is removed; a member that
// does not join again within the rebalance timeout is removed from the
// rebalance, which completes without it.
func classicTimeouts(s *side, group, topic string) {
	s.coordinated(group)
	join := func(c *conn, label, member string, session, rebalance int32) *kmsg.JoinGroupResponse {
		req := joinReq(group, member, topic)
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = session, rebalance
		return s.doOn(c, label, req).(*kmsg.JoinGroupResponse)
	}
	a := join(s.mainConn(), "join, no member id", "", 6000, 3000).MemberID
	j := join(s.mainConn(), "join, 6 s session", a, 6000, 3000)
	s.do("sync", syncReq(group, a, j.Generation, map[string][]byte{a: consumerAssignment(topic, 0, 1)}))
	time.Sleep(8 * time.Second) // no heartbeat: the session ends
	s.do("heartbeat after the session", heartbeatReq(group, a, j.Generation))
	s.do("describe after the session", describeGroupsReq(group))

	// A member that joins and does not sync within the rebalance timeout.
	a = join(s.mainConn(), "join again, no member id", "", 30000, 3000).MemberID
	j = join(s.mainConn(), "join again", a, 30000, 3000)
	time.Sleep(5 * time.Second)
	s.do("sync after the rebalance timeout", syncReq(group, a, j.Generation, map[string][]byte{a: consumerAssignment(topic, 0, 1)}))
	s.do("describe after no sync", describeGroupsReq(group))

	// Two members; the second does not join the next rebalance.
	c2 := s.conn()
	a = join(s.mainConn(), "join a third time, no member id", "", 30000, 3000).MemberID
	j = join(s.mainConn(), "join a third time", a, 30000, 3000)
	s.do("sync", syncReq(group, a, j.Generation, map[string][]byte{a: consumerAssignment(topic, 0, 1)}))
	b := join(c2, "second, no member id", "", 30000, 3000).MemberID
	joinB := s.async(c2, "second join", func() kmsg.Request {
		r := joinReq(group, b, topic)
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 30000, 3000
		return r
	}())
	ja := join(s.mainConn(), "first joins the rebalance", a, 30000, 3000)
	jb := s.wait(joinB).(*kmsg.JoinGroupResponse)
	syncB := s.async(c2, "second sync", syncReq(group, b, jb.Generation, nil))
	s.do("leader sync", syncReq(group, a, ja.Generation, map[string][]byte{a: consumerAssignment(topic, 0), b: consumerAssignment(topic, 1)}))
	s.wait(syncB)
	// The first member joins again (a rebalance); the second never does.
	rejoin := join(s.mainConn(), "join, the second absent", a, 30000, 3000)
	s.do("heartbeat of the one left out", heartbeatReq(group, b, jb.Generation))
	s.do("sync alone", syncReq(group, a, rejoin.Generation, map[string][]byte{a: consumerAssignment(topic, 0, 1)}))
	s.do("describe, one member", describeGroupsReq(group))
	s.do("leave", leaveReq(group, a))
}

// TestSimpleGroupOffsets: a group that never joins (an "assign" consumer)
// commits and fetches offsets with generation -1 and no member.
func TestSimpleGroupOffsets(t *testing.T) {
	run(t, func(s *side) {
		group, topic := name(s.t, ""), name(s.t, "")
		s.createTopic(topic, 1, nil)
		s.coordinated(group)
		s.do("commit", commitReq(group, "", -1, topic, 3, 0))
		s.do("commit, wrong generation", commitReq(group, "", 4, topic, 3, 0))
		s.do("fetch", fetchOffsetsReq(group, topic, 0))
		s.do("describe", describeGroupsReq(group))
		s.listGroupsOf("list", nil, nil, group)
		s.do("join with another protocol type", func() kmsg.Request {
			r := joinReq(group, "", topic)
			r.ProtocolType = "connect"
			return r
		}())
		s.do("delete", deleteGroupsReq(group))
		s.do("fetch after delete", fetchOffsetsReq(group, topic, 0))
	})
}
