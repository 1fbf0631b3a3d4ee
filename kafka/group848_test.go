package kafka_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine/group"
)

// KIP-848's APIs on the wire, code by code, with raw requests (kgo would
// retry or hide the codes).

func cgJoin(groupID, member string, topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.RebalanceTimeoutMillis = groupID, member, 0, 10000
	req.SubscribedTopicNames, req.Topics = topics, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return req
}

func cgBeat(groupID, member string, epoch int32, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch, req.Topics = groupID, member, epoch, owned
	return req
}

func (a *adminConn) cg(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	a.t.Helper()
	v := req.Version
	if v == 0 && req.MemberID != "" {
		v = 1
	}
	return a.do(v, req).(*kmsg.ConsumerGroupHeartbeatResponse)
}

// owned turns a heartbeat answer's assignment into what the member
// reports owning next.
func owned(r *kmsg.ConsumerGroupHeartbeatResponse) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r.Assignment != nil {
		for _, t := range r.Assignment.Topics {
			out = append(out, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
		}
	}
	return out
}

func (a *adminConn) cgDescribe(v int16, groups ...string) []kmsg.ConsumerGroupDescribeResponseGroup {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = groups
	return a.do(v, req).(*kmsg.ConsumerGroupDescribeResponse).Groups
}

func group848Broker(t *testing.T, maxSize int) *testBroker {
	return startBroker(t, brokerOpts{Groups: func(c *group.Config) {
		c.ConsumerSessionTimeout, c.ConsumerHeartbeatInterval = 10*time.Second, 200*time.Millisecond
		c.ConsumerMaxSize = maxSize
	}})
}

// TestGroup848HeartbeatErrors: ConsumerGroupHeartbeat's refusals.
func TestGroup848HeartbeatErrors(t *testing.T) {
	b := group848Broker(t, 2)
	e2eCreateTopic(t, b, "t", 4, nil)
	a := dialAdmin(t, b.Addr)

	for _, c := range []struct {
		what string
		req  *kmsg.ConsumerGroupHeartbeatRequest
		want *kerr.Error
	}{
		{"empty group id", cgJoin("", "m", "t"), kerr.InvalidRequest},
		{"v1 without member id", func() *kmsg.ConsumerGroupHeartbeatRequest {
			r := cgJoin("g", "", "t")
			r.Version = 1
			return r
		}(), kerr.InvalidRequest},
		{"join without subscription", cgJoin("g", "m"), kerr.InvalidRequest},
		{"join owning partitions", func() *kmsg.ConsumerGroupHeartbeatRequest {
			r := cgJoin("g", "m", "t")
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{Partitions: []int32{0}}}
			return r
		}(), kerr.InvalidRequest},
		{"unknown assignor", func() *kmsg.ConsumerGroupHeartbeatRequest {
			r := cgJoin("g", "m", "t")
			r.ServerAssignor = kmsg.StringPtr("cooperative-sticky")
			return r
		}(), kerr.UnsupportedAssignor},
		{"invalid regex", func() *kmsg.ConsumerGroupHeartbeatRequest {
			r := cgJoin("g", "m")
			r.SubscribedTopicRegex = kmsg.StringPtr("(t")
			return r
		}(), kerr.InvalidRegularExpression},
		{"heartbeat, no group", cgBeat("nogroup", "m", 3, nil), kerr.GroupIDNotFound},
		{"leave, no group", cgBeat("nogroup", "m", -1, nil), kerr.GroupIDNotFound},
	} {
		r := a.cg(c.req)
		wantCode(t, c.what, r.ErrorCode, c.want)
		if r.ErrorMessage == nil {
			t.Errorf("%s: no message", c.what)
		}
	}

	// v0: the coordinator names the member.
	v0 := cgJoin("g", "", "t")
	r := a.cg(v0)
	if r.ErrorCode != 0 || r.MemberID == nil || *r.MemberID == "" || r.MemberEpoch != 1 || r.HeartbeatIntervalMillis != 200 {
		t.Fatalf("v0 join: %+v", r)
	}
	first := *r.MemberID
	wantCode(t, "second member", a.cg(cgJoin("g", "m2", "t")).ErrorCode, nil)
	wantCode(t, "third member (group.consumer.max.size 2)", a.cg(cgJoin("g", "m3", "t")).ErrorCode, kerr.GroupMaxSizeReached)
	wantCode(t, "unknown member", a.cg(cgBeat("g", "nobody", 2, nil)).ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "epoch ahead", a.cg(cgBeat("g", "m2", 9, nil)).ErrorCode, kerr.FencedMemberEpoch)

	// Static members: an instance id in use is not released.
	s1 := cgJoin("s", "s1", "t")
	s1.InstanceID = kmsg.StringPtr("inst")
	wantCode(t, "static member", a.cg(s1).ErrorCode, nil)
	s2 := cgJoin("s", "s2", "t")
	s2.InstanceID = kmsg.StringPtr("inst")
	wantCode(t, "instance id in use", a.cg(s2).ErrorCode, kerr.UnreleasedInstanceID)
	zombie := cgBeat("s", "s2", 1, nil)
	zombie.InstanceID = kmsg.StringPtr("inst")
	wantCode(t, "instance of another member", a.cg(zombie).ErrorCode, kerr.FencedInstanceID)

	// Leaving: the answer carries the leave epoch.
	if r := a.cg(cgBeat("g", first, -1, nil)); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	wantCode(t, "heartbeat after leaving", a.cg(cgBeat("g", first, 1, nil)).ErrorCode, kerr.UnknownMemberID)
}

// TestGroup848ClassicConflicts: classic and consumer groups share the
// group id space; each protocol is refused by a group of the other type
// with members, with Kafka's codes, and takes over an empty one (keeping
// its offsets). Kafka would also convert a group with members when its
// group.consumer.migration.policy allows; ringlog answers as Kafka does
// with the conversion disabled.
func TestGroup848ClassicConflicts(t *testing.T) {
	b := group848Broker(t, 0)
	e2eCreateTopic(t, b, "t", 2, nil)
	a := dialAdmin(t, b.Addr)

	// A classic group with a member: no consumer member may join.
	a.stableMember(t, "classic", joinOpts{protocols: rangeProtocol("t")}, []byte("x"))
	wantCode(t, "consumer member joining a classic group", a.cg(cgJoin("classic", "m", "t")).ErrorCode, kerr.GroupIDNotFound)
	if d := a.cgDescribe(1, "classic", "none", ""); d[0].ErrorCode != kerr.GroupIDNotFound.Code || d[1].ErrorCode != kerr.GroupIDNotFound.Code ||
		d[2].ErrorCode != kerr.InvalidGroupID.Code || d[0].ErrorMessage == nil {
		t.Fatalf("ConsumerGroupDescribe of a classic, a missing and an empty id: %+v", d)
	}

	// A consumer group with a member: no classic member may join, and
	// classic requests do not know its members.
	r := a.cg(cgJoin("cg", "m", "t"))
	wantCode(t, "consumer join", r.ErrorCode, nil)
	wantCode(t, "classic member joining a consumer group", a.join("cg", joinOpts{protocols: rangeProtocol("t")}).ErrorCode, kerr.InconsistentGroupProtocol)
	wantCode(t, "classic heartbeat", a.heartbeat(4, "cg", "m", r.MemberEpoch, nil), kerr.UnknownMemberID)
	wantCode(t, "classic sync", a.sync(5, "cg", "m", r.MemberEpoch, nil, nil).ErrorCode, kerr.UnknownMemberID)
	if d := a.describe(5, "cg").Groups[0]; d.State != "Dead" || d.ErrorCode != 0 {
		t.Fatalf("DescribeGroups v5 of a consumer group: %+v", d)
	}
	if d := a.describe(6, "cg", "none").Groups; d[0].ErrorCode != kerr.GroupIDNotFound.Code || d[0].ErrorMessage == nil ||
		!strings.Contains(*d[0].ErrorMessage, "not a classic group") || d[1].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("DescribeGroups v6: %+v", d)
	}

	// An empty classic group (a simple consumer's offsets) becomes a
	// consumer group; its offsets stay. And back.
	wantCodes(t, "simple commit", commitCodes(a.commit(7, "idle", "", -1, nil, commitPart{topic: "t", partition: 1, offset: 42, epoch: -1})), 0)
	r = a.cg(cgJoin("idle", "m", "t"))
	wantCode(t, "consumer member taking an empty classic group", r.ErrorCode, nil)
	checkOffsetAt(t, a, "idle", "t", 1, 42)
	wantCode(t, "leave", a.cg(cgBeat("idle", "m", -1, nil)).ErrorCode, nil)
	j := a.joinNew(t, "idle", joinOpts{protocols: rangeProtocol("t")})
	if j.Generation != 1 {
		t.Fatalf("classic member taking an empty consumer group: %+v", j)
	}
	checkOffsetAt(t, a, "idle", "t", 1, 42)
	if d := a.cgDescribe(0, "idle")[0]; d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("the consumer group is still there: %+v", d)
	}
}

// TestGroup848Offsets: OffsetCommit and OffsetFetch from consumer group
// members (v9+: member epochs; v10: topic ids), OffsetDelete, ListGroups,
// ConsumerGroupDescribe and DeleteGroups of a consumer group.
func TestGroup848Offsets(t *testing.T) {
	b := group848Broker(t, 0)
	e2eCreateTopic(t, b, "t", 2, nil)
	e2eCreateTopic(t, b, "other", 1, nil)
	info, _ := b.Engine.Topic("t")
	a := dialAdmin(t, b.Addr)

	r := a.cg(cgJoin("g", "m", "t"))
	epoch := r.MemberEpoch
	one := commitPart{topic: "t", partition: 0, offset: 10, epoch: -1}
	wantCodes(t, "commit v9 at the member epoch", commitCodes(a.commit(9, "g", "m", epoch, nil, one)), 0)
	wantCodes(t, "commit v9, stale epoch", commitCodes(a.commit(9, "g", "m", epoch+1, nil, one)), kerr.StaleMemberEpoch.Code)
	wantCodes(t, "commit v9, unknown member", commitCodes(a.commit(9, "g", "x", epoch, nil, one)), kerr.UnknownMemberID.Code)
	wantCodes(t, "commit v8 from a consumer member", commitCodes(a.commit(8, "g", "m", epoch, nil, one)), kerr.UnsupportedVersion.Code)
	wantCodes(t, "anonymous commit to a group with members", commitCodes(a.commit(9, "g", "", -1, nil, one)), kerr.UnknownMemberID.Code)

	// v10 names topics by id.
	c10 := kmsg.NewPtrOffsetCommitRequest()
	c10.Group, c10.MemberID, c10.Generation = "g", "m", epoch
	c10.Topics = []kmsg.OffsetCommitRequestTopic{
		{TopicID: info.ID, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 20, LeaderEpoch: -1}}},
		{TopicID: [16]byte{9, 9}, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}},
	}
	cr := a.do(10, c10).(*kmsg.OffsetCommitResponse)
	if cr.Topics[0].TopicID != info.ID || cr.Topics[0].Partitions[0].ErrorCode != 0 || cr.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("commit v10: %+v", cr.Topics)
	}

	fetch := func(v int16, member *string, epoch int32, byID bool) *kmsg.OffsetFetchResponse {
		req := kmsg.NewPtrOffsetFetchRequest()
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group, rg.MemberID, rg.MemberEpoch = "g", member, epoch
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = "t", []int32{0, 1}
		if byID {
			rt.TopicID = info.ID
		}
		rg.Topics = append(rg.Topics, rt)
		if byID {
			rg.Topics = append(rg.Topics, kmsg.OffsetFetchRequestGroupTopic{TopicID: [16]byte{9, 9}, Partitions: []int32{0}})
		}
		req.Groups = append(req.Groups, rg)
		return a.do(v, req).(*kmsg.OffsetFetchResponse)
	}
	f := fetch(9, kmsg.StringPtr("m"), epoch, false)
	if g := f.Groups[0]; g.ErrorCode != 0 || g.Topics[0].Partitions[0].Offset != 10 || g.Topics[0].Partitions[1].Offset != 20 {
		t.Fatalf("fetch v9: %+v", g)
	}
	wantCode(t, "fetch v9, stale epoch", fetch(9, kmsg.StringPtr("m"), epoch-1, false).Groups[0].ErrorCode, kerr.StaleMemberEpoch)
	wantCode(t, "fetch v9, unknown member", fetch(9, kmsg.StringPtr("x"), epoch, false).Groups[0].ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "fetch v9, no member (an admin)", fetch(9, nil, -1, false).Groups[0].ErrorCode, nil)
	f = fetch(10, kmsg.StringPtr("m"), epoch, true)
	if g := f.Groups[0]; g.Topics[0].TopicID != info.ID || g.Topics[0].Partitions[1].Offset != 20 || g.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("fetch v10: %+v", g)
	}

	// OffsetDelete: the subscribed topic's offsets stay.
	wantCodes(t, "commit other", commitCodes(a.commit(9, "g", "m", epoch, nil, commitPart{topic: "other", partition: 0, offset: 3, epoch: -1})), 0)
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	for _, topic := range []string{"t", "other"} {
		od.Topics = append(od.Topics, kmsg.OffsetDeleteRequestTopic{Topic: topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}})
	}
	odr := a.do(0, od).(*kmsg.OffsetDeleteResponse)
	if odr.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code || odr.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: %+v", odr.Topics)
	}

	// ListGroups by type.
	a.stableMember(t, "classic", joinOpts{protocols: rangeProtocol("t")}, []byte("x"))
	list := func(types ...string) []string {
		lr := kmsg.NewPtrListGroupsRequest()
		lr.TypesFilter = types
		var out []string
		for _, g := range a.do(5, lr).(*kmsg.ListGroupsResponse).Groups {
			out = append(out, g.Group+"/"+g.ProtocolType+"/"+g.GroupState+"/"+g.GroupType)
		}
		slices.Sort(out)
		return out
	}
	if got := list("Consumer"); !slices.Equal(got, []string{"g/consumer/Stable/consumer"}) {
		t.Fatalf("consumer groups: %v", got)
	}
	if got := list("classic"); !slices.Equal(got, []string{"classic/consumer/Stable/classic"}) {
		t.Fatalf("classic groups: %v", got)
	}
	if got := list(); len(got) != 2 {
		t.Fatalf("all groups: %v", got)
	}

	// ConsumerGroupDescribe.
	d := a.cgDescribe(1, "g")[0]
	if d.ErrorCode != 0 || d.State != "Stable" || d.Epoch != epoch || d.AssignmentEpoch != epoch || d.AssignorName != "uniform" || len(d.Members) != 1 {
		t.Fatalf("describe: %+v", d)
	}
	m := d.Members[0]
	if m.MemberID != "m" || m.MemberEpoch != epoch || m.ClientID != "admin-test" || m.ClientHost != "/127.0.0.1" || m.MemberType != 1 ||
		!slices.Equal(m.SubscribedTopics, []string{"t"}) || len(m.Assignment.TopicPartitions) != 1 ||
		m.Assignment.TopicPartitions[0].Topic != "t" || len(m.Assignment.TopicPartitions[0].Partitions) != 2 || len(m.TargetAssignment.TopicPartitions) != 1 {
		t.Fatalf("described member: %+v", m)
	}
	// No regular expression: "", as Kafka describes it, not null.
	if m.SubscribedTopicRegex == nil || *m.SubscribedTopicRegex != "" {
		t.Fatalf("described member's regex: %v, want \"\"", m.SubscribedTopicRegex)
	}

	// DeleteGroups: not while it has members; then, with its offsets.
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g"}
	dr := a.do(3, del).(*kmsg.DeleteGroupsResponse).Groups[0]
	if dr.ErrorCode != kerr.NonEmptyGroup.Code || dr.ErrorMessage == nil {
		t.Fatalf("delete a consumer group with members: %+v", dr)
	}
	wantCode(t, "leave", a.cg(cgBeat("g", "m", -1, nil)).ErrorCode, nil)
	if got := list("consumer"); !slices.Equal(got, []string{"g/consumer/Empty/consumer"}) {
		t.Fatalf("empty consumer group: %v", got)
	}
	wantCode(t, "delete an empty consumer group", a.do(3, del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, nil)
	checkOffsetAt(t, a, "g", "t", 0, -1)
	wantCode(t, "describe a deleted group", a.cgDescribe(0, "g")[0].ErrorCode, kerr.GroupIDNotFound)
	wantCodes(t, "member commit v9 after the deletion", commitCodes(a.commit(9, "g", "m", epoch, nil, one)), kerr.GroupIDNotFound.Code)
}
