package kafka_test

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/engine/group"
	"ringlog/internal/testkit"
	"ringlog/internal/testkit/testbroker"
	"ringlog/kafka"
)

// Groups and committed offsets live in __consumer_offsets: they survive
// restarts, and offsets.retention.minutes expires those of empty groups.

// TestGroupPersistence: commits and group metadata survive a restart (the
// member keeps its generation and assignment and goes on heartbeating);
// after the group empties, its offsets expire after the retention, and the
// tombstones hold over another restart.
func TestGroupPersistence(t *testing.T) {
	adminIOPaths(t, brokerOpts{}, func(t *testing.T, b *testBroker) {
		e2eCreateTopic(t, b, "t", 3, nil)
		e2eCreateTopic(t, b, "u", 1, nil)
		a := dialAdmin(t, b.Addr)
		o := joinOpts{protocols: rangeProtocol("t"), sessionMs: 30000}
		id, gen := a.stableMember(t, "g", o, []byte("t:0,1,2"))
		m0, m1 := "zero", ""
		wantCodes(t, "member commit", commitCodes(a.commit(7, "g", id, gen, nil,
			commitPart{topic: "t", partition: 0, offset: 10, epoch: 3, meta: &m0},
			commitPart{topic: "t", partition: 1, offset: 20, epoch: -1, meta: &m1},
			commitPart{topic: "u", partition: 0, offset: 4, epoch: -1})), 0, 0, 0)
		// Overwritten: the last commit counts after replay.
		wantCodes(t, "member commit again", commitCodes(a.commit(7, "g", id, gen, nil,
			commitPart{topic: "t", partition: 1, offset: 21, epoch: 2})), 0)
		// A simple consumer's commit (no group membership).
		wantCodes(t, "simple commit", commitCodes(a.commit(2, "simple", "", -1, nil,
			commitPart{topic: "t", partition: 2, offset: 5, epoch: -1})), 0)
		// A group that is deleted stays deleted.
		wantCodes(t, "doomed commit", commitCodes(a.commit(7, "doomed", "", -1, nil,
			commitPart{topic: "t", partition: 2, offset: 1, epoch: -1})), 0)
		del := kmsg.NewPtrDeleteGroupsRequest()
		del.Groups = []string{"doomed"}
		wantCode(t, "delete group", a.do(2, del).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, nil)

		b.Restart()
		a = dialAdmin(t, b.Addr)
		checkOffsets := func(when string) {
			t.Helper()
			f := a.fetchOffsets(5, "g", "t", 0, 1, 2)
			p := f.Topics[0].Partitions
			if f.ErrorCode != 0 || p[0].Offset != 10 || p[0].LeaderEpoch != 3 || *p[0].Metadata != "zero" ||
				p[1].Offset != 21 || p[1].LeaderEpoch != 2 || p[2].Offset != -1 {
				t.Fatalf("%s: offsets %+v", when, f.Topics)
			}
			if f := a.fetchOffsets(1, "simple", "t", 2); f.Topics[0].Partitions[0].Offset != 5 {
				t.Fatalf("%s: simple group's offsets %+v", when, f.Topics)
			}
		}
		checkOffsets("after a restart")
		// The member is back with its generation and assignment: its
		// heartbeats and syncs are valid, no rebalance.
		d := a.describe(5, "g").Groups[0]
		if d.State != "Stable" || d.Protocol != "range" || len(d.Members) != 1 || d.Members[0].MemberID != id ||
			string(d.Members[0].MemberAssignment) != "t:0,1,2" || d.Members[0].ClientID != "admin-test" {
			t.Fatalf("group after a restart: %+v", d)
		}
		wantCode(t, "heartbeat after a restart", a.heartbeat(3, "g", id, gen, nil), nil)
		if s := a.sync(3, "g", id, gen, nil, nil); s.ErrorCode != 0 || string(s.MemberAssignment) != "t:0,1,2" {
			t.Fatalf("sync after a restart: %+v", s)
		}
		if d := a.describe(5, "doomed").Groups[0]; d.State != "Dead" {
			t.Fatalf("deleted group after a restart: %+v", d)
		}
		if f := a.fetchOffsets(5, "doomed", "t", 2); f.Topics[0].Partitions[0].Offset != -1 {
			t.Fatalf("deleted group's offsets after a restart: %+v", f.Topics)
		}

		// A stable consumer group keeps the offsets of topics it subscribes
		// to ("t") but not of others ("u", KIP-496); empty groups lose them
		// all once they have been empty for the retention.
		b.Restart(func(c *broker.Config) {
			c.Groups.OffsetsRetention = 300 * time.Millisecond
			c.Groups.OffsetsRetentionCheckInterval = 50 * time.Millisecond
		})
		a = dialAdmin(t, b.Addr)
		wantCode(t, "heartbeat", a.heartbeat(3, "g", id, gen, nil), nil)
		waitOffset(t, a, "g", "u", 0, -1)
		waitOffset(t, a, "simple", "t", 2, -1)
		checkOffsetAt(t, a, "g", "t", 0, 10)
		wantCode(t, "leave", a.leave(3, "g", leaving(id, nil)).Members[0].ErrorCode, nil)
		waitOffset(t, a, "g", "t", 0, -1)
		listed := a.do(4, kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse)
		if len(listed.Groups) != 0 {
			t.Fatalf("groups after expiry: %+v", listed.Groups)
		}
		b.Restart(func(c *broker.Config) { c.Groups = testbroker.Config(b.dir).Groups })
		a = dialAdmin(t, b.Addr)
		for _, g := range []string{"g", "simple"} {
			// COORDINATOR_LOAD_IN_PROGRESS until the replay ends.
			var d kmsg.DescribeGroupsResponseGroup
			testkit.WaitFor(t, 20*time.Second, "the coordinator to load", func() bool {
				d = a.describe(5, g).Groups[0]
				return d.ErrorCode != kerr.CoordinatorLoadInProgress.Code
			})
			if d.ErrorCode != 0 || d.State != "Dead" {
				t.Fatalf("expired group %s after a restart: %+v", g, d)
			}
		}
		checkOffsetAt(t, a, "g", "t", 1, -1)
		checkOffsetAt(t, a, "simple", "t", 2, -1)
	})
}

func checkOffsetAt(t *testing.T, a *adminConn, groupID, topic string, p int32, want int64) {
	t.Helper()
	if got := a.fetchOffsets(5, groupID, topic, p).Topics[0].Partitions[0].Offset; got != want {
		t.Fatalf("%s %s/%d: offset %d, want %d", groupID, topic, p, got, want)
	}
}

func waitOffset(t *testing.T, a *adminConn, groupID, topic string, p int32, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := a.fetchOffsets(5, groupID, topic, p).Topics[0].Partitions[0].Offset
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s/%d: offset %d, want %d", groupID, topic, p, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGroupAdminAPIs: FindCoordinator, OffsetFetch (all partitions, several
// groups, old versions), ListGroups filters, DescribeGroups, DeleteGroups
// and OffsetDelete, with their codes.
func TestGroupAdminAPIs(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	e2eCreateTopic(t, b, "t", 2, nil)
	e2eCreateTopic(t, b, "other", 1, nil)
	a := dialAdmin(t, b.Addr)

	// __consumer_offsets is there, compacted, and internal.
	md := a.do(1, kafka.MetadataReq(1, group.OffsetsTopic, "t")).(*kmsg.MetadataResponse)
	if !md.Topics[0].IsInternal || md.Topics[1].IsInternal || len(md.Topics[0].Partitions) != int(b.Groups.Partitions()) {
		t.Fatalf("metadata: %+v", md.Topics)
	}
	if info, _ := b.Engine.Topic(group.OffsetsTopic); info.Config.CleanupPolicy != "compact" {
		t.Fatalf("%s: cleanup.policy %s", group.OffsetsTopic, info.Config.CleanupPolicy)
	}

	for _, v := range []int16{0, 1, 3} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = "g"
		r := a.do(v, req).(*kmsg.FindCoordinatorResponse)
		if r.ErrorCode != 0 || r.NodeID != 0 || r.Host != "127.0.0.1" || r.Port != advertisedPort(b) {
			t.Fatalf("FindCoordinator v%d: %+v", v, r)
		}
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys = []string{"a", "b", ""}
	r := a.do(6, req).(*kmsg.FindCoordinatorResponse)
	if len(r.Coordinators) != 3 || r.Coordinators[1].Key != "b" || r.Coordinators[2].ErrorCode != 0 || r.Coordinators[2].Port != advertisedPort(b) {
		t.Fatalf("batched FindCoordinator: %+v", r)
	}
	req.CoordinatorType = 1
	r = a.do(4, req).(*kmsg.FindCoordinatorResponse)
	if c := r.Coordinators[0]; c.ErrorCode != 0 || c.NodeID != 0 || c.Port != advertisedPort(b) {
		t.Fatalf("transaction coordinator: %+v", c)
	}
	req.CoordinatorType = 2
	wantCode(t, "share coordinator", a.do(6, req).(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode, kerr.InvalidRequest)

	// Two groups: one with a member (subscribed to "t"), one simple.
	id, gen := a.stableMember(t, "live", joinOpts{protocols: rangeProtocol("t")}, []byte("x"))
	wantCodes(t, "commit", commitCodes(a.commit(7, "live", id, gen, nil,
		commitPart{topic: "t", partition: 0, offset: 1, epoch: -1},
		commitPart{topic: "t", partition: 1, offset: 2, epoch: -1},
		commitPart{topic: "other", partition: 0, offset: 3, epoch: -1})), 0, 0, 0)
	wantCodes(t, "simple commit", commitCodes(a.commit(7, "idle", "", -1, nil,
		commitPart{topic: "t", partition: 0, offset: 7, epoch: -1})), 0)

	// OffsetFetch: every partition (null topics, v2+), several groups (v8+).
	all := a.fetchOffsets(5, "live", "")
	if len(all.Topics) != 2 || all.Topics[0].Topic != "other" || len(all.Topics[1].Partitions) != 2 || all.Topics[1].Partitions[1].Offset != 2 {
		t.Fatalf("all offsets: %+v", all.Topics)
	}
	multi := kmsg.NewPtrOffsetFetchRequest()
	for _, g := range []string{"live", "idle", "nobody"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		if g != "live" {
			rt := kmsg.NewOffsetFetchRequestGroupTopic()
			rt.Topic, rt.Partitions = "t", []int32{0}
			rg.Topics = append(rg.Topics, rt)
		}
		multi.Groups = append(multi.Groups, rg)
	}
	multi.RequireStable = true
	mr := a.do(9, multi).(*kmsg.OffsetFetchResponse)
	if len(mr.Groups) != 3 || len(mr.Groups[0].Topics) != 2 || mr.Groups[1].Topics[0].Partitions[0].Offset != 7 ||
		mr.Groups[2].Topics[0].Partitions[0].Offset != -1 || mr.Groups[2].ErrorCode != 0 {
		t.Fatalf("multi-group fetch: %+v", mr.Groups)
	}
	if f := a.fetchOffsets(0, "idle", "t", 0, 1); f.Topics[0].Partitions[0].Offset != 7 || f.Topics[0].Partitions[1].Offset != -1 {
		t.Fatalf("v0 fetch: %+v", f.Topics)
	}

	// ListGroups, filtered by state (v4+) and type (v5+).
	list := func(v int16, states, types []string) []string {
		lr := kmsg.NewPtrListGroupsRequest()
		lr.StatesFilter, lr.TypesFilter = states, types
		resp := a.do(v, lr).(*kmsg.ListGroupsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("ListGroups: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		var names []string
		for _, g := range resp.Groups {
			names = append(names, g.Group+"/"+g.ProtocolType+"/"+g.GroupState+"/"+g.GroupType)
		}
		slices.Sort(names)
		return names
	}
	if got := list(5, nil, nil); !slices.Equal(got, []string{"idle//Empty/classic", "live/consumer/Stable/classic"}) {
		t.Fatalf("ListGroups: %v", got)
	}
	if got := list(4, []string{"stable"}, nil); len(got) != 1 || got[0] != "live/consumer/Stable/" {
		t.Fatalf("ListGroups stable: %v", got)
	}
	if got := list(5, nil, []string{"consumer"}); len(got) != 0 {
		t.Fatalf("ListGroups of type consumer (KIP-848): %v", got)
	}
	if got := list(0, nil, nil); len(got) != 2 {
		t.Fatalf("ListGroups v0: %v", got)
	}

	// DescribeGroups with authorized operations (v3+).
	dr := kmsg.NewPtrDescribeGroupsRequest()
	dr.Groups, dr.IncludeAuthorizedOperations = []string{"live", "idle", "nobody"}, true
	desc := a.do(5, dr).(*kmsg.DescribeGroupsResponse).Groups
	if desc[0].State != "Stable" || desc[0].AuthorizedOperations != 1<<3|1<<6|1<<8 || desc[1].State != "Empty" ||
		desc[1].ProtocolType != "" || desc[2].State != "Dead" || desc[2].ErrorCode != 0 {
		t.Fatalf("described: %+v", desc)
	}

	// OffsetDelete: a consumer group with members keeps the offsets of
	// the topics it subscribes to.
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "live"
	for _, tp := range []struct {
		topic string
		p     int32
	}{{"t", 0}, {"other", 0}, {"missing", 0}, {"t", 9}} {
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = tp.topic
		rt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: tp.p}}
		od.Topics = append(od.Topics, rt)
	}
	odr := a.do(0, od).(*kmsg.OffsetDeleteResponse)
	var codes []int16
	for _, t := range odr.Topics {
		codes = append(codes, t.Partitions[0].ErrorCode)
	}
	wantCodes(t, "offset delete", codes, kerr.GroupSubscribedToTopic.Code, 0, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code)
	checkOffsetAt(t, a, "live", "other", 0, -1)
	checkOffsetAt(t, a, "live", "t", 0, 1)
	od.Group = "nobody"
	wantCode(t, "offset delete, no group", a.do(0, od).(*kmsg.OffsetDeleteResponse).ErrorCode, kerr.GroupIDNotFound)

	// DeleteGroups: only empty groups.
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"live", "idle", "nobody"}
	delr := a.do(2, del).(*kmsg.DeleteGroupsResponse).Groups
	wantCode(t, "delete a group with members", delr[0].ErrorCode, kerr.NonEmptyGroup)
	wantCode(t, "delete an empty group", delr[1].ErrorCode, nil)
	wantCode(t, "delete a missing group", delr[2].ErrorCode, kerr.GroupIDNotFound)
	checkOffsetAt(t, a, "idle", "t", 0, -1)
	if got := list(5, nil, nil); len(got) != 1 {
		t.Fatalf("groups after the deletion: %v", got)
	}
}

// advertisedPort is the port Metadata and FindCoordinator tell clients.
func advertisedPort(b *testBroker) int32 {
	_, port := kafka.Advertised(b.Server)
	return port
}
