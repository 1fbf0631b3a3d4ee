package kafka_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine/group"
)

// The group APIs' answers to wrong requests, code by code, as Kafka's
// classic coordinator gives them.

func groupErrorsBroker(t *testing.T) *testBroker {
	return startBroker(t, brokerOpts{Groups: func(c *group.Config) {
		c.MinSessionTimeout = 100 * time.Millisecond
		c.MaxSessionTimeout = 10 * time.Second
		c.MemberMetadataMaxBytes = 64 << 10
		c.GroupMetadataMaxBytes = 256 << 10
	}})
}

// TestGroupJoinErrors: JoinGroup's refusals.
func TestGroupJoinErrors(t *testing.T) {
	b := groupErrorsBroker(t)
	e2eCreateTopic(t, b, "t", 2, nil)
	a := dialAdmin(t, b.Addr)
	protos := rangeProtocol("t")

	for _, v := range []int16{-1, 4, 9} {
		wantCode(t, "empty group id", a.join("", joinOpts{version: v, protocols: protos}).ErrorCode, kerr.InvalidGroupID)
		wantCode(t, "session timeout below the minimum", a.join("g", joinOpts{version: v, protocols: protos, sessionMs: 50}).ErrorCode, kerr.InvalidSessionTimeout)
		wantCode(t, "session timeout above the maximum", a.join("g", joinOpts{version: v, protocols: protos, sessionMs: 20000}).ErrorCode, kerr.InvalidSessionTimeout)
		wantCode(t, "unknown member id, no group", a.join("nogroup", joinOpts{version: v, memberID: "who", protocols: protos}).ErrorCode, kerr.UnknownMemberID)
		wantCode(t, "no protocol type", a.join("g", joinOpts{version: v, protocolType: "-", protocols: protos}).ErrorCode, kerr.InconsistentGroupProtocol)
		wantCode(t, "no protocols", a.join("g", joinOpts{version: v}).ErrorCode, kerr.InconsistentGroupProtocol)
	}
	// Refused joins leave no group behind.
	if r := a.describe(0, "g", "nogroup"); r.Groups[0].State != "Dead" || r.Groups[1].State != "Dead" {
		t.Fatalf("groups after refused joins: %+v", r.Groups)
	}

	// KIP-394: from v4 a new dynamic member is given its id first.
	r := a.join("g", joinOpts{version: 4, protocols: protos})
	wantCode(t, "v4 new member", r.ErrorCode, kerr.MemberIDRequired)
	if !strings.HasPrefix(r.MemberID, "admin-test-") {
		t.Fatalf("member id %q", r.MemberID)
	}
	r = a.join("g", joinOpts{version: 4, memberID: r.MemberID, protocols: protos})
	if r.ErrorCode != 0 || r.Generation != 1 || r.LeaderID != r.MemberID || len(r.Members) != 1 {
		t.Fatalf("join with the given id: %+v", r)
	}
	first := r.MemberID

	// The group is consumer/range: another type, or no common protocol,
	// is refused.
	wantCode(t, "other protocol type", a.join("g", joinOpts{protocolType: "connect", protocols: protos}).ErrorCode, kerr.InconsistentGroupProtocol)
	other := []kmsg.JoinGroupRequestProtocol{{Name: "roundrobin", Metadata: consumerMeta("t")}}
	wantCode(t, "no common protocol", a.join("g", joinOpts{protocols: other}).ErrorCode, kerr.InconsistentGroupProtocol)
	wantCode(t, "known member, other type", a.join("g", joinOpts{memberID: first, protocolType: "connect", protocols: protos}).ErrorCode, kerr.InconsistentGroupProtocol)

	// Huge metadata is bounded: one member's (MESSAGE_TOO_LARGE), and the
	// group's in all (GROUP_MAX_SIZE_REACHED).
	huge := []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: bytes.Repeat([]byte{1}, 65<<10)}}
	wantCode(t, "huge metadata", a.join("big", joinOpts{protocols: huge}).ErrorCode, kerr.MessageTooLarge)
	wantCode(t, "huge metadata, known member", a.join("g", joinOpts{memberID: first, protocols: huge}).ErrorCode, kerr.MessageTooLarge)
	big := []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: bytes.Repeat([]byte{1}, 60<<10)}}
	refused := 0
	for i := range 6 {
		// v3 joins at once (no member id round); each parks until the
		// rebalance ends, so each joins from a connection of its own.
		c := dialAdmin(t, b.Addr)
		req := joinReq("big", joinOpts{protocols: big, rebalMs: 60000})
		c.send(3, req)
		if i < 4 {
			// Connections are served concurrently: let this join land
			// before the next one is sent.
			deadline := time.Now().Add(5 * time.Second)
			for len(a.describe(5, "big").Groups[0].Members) != i+1 {
				if time.Now().After(deadline) {
					t.Fatalf("join %d did not land: %+v", i, a.describe(5, "big").Groups[0])
				}
				time.Sleep(5 * time.Millisecond)
			}
		} else {
			// 4 members of 60 KiB fill the 256 KiB budget.
			resp := c.read(req).(*kmsg.JoinGroupResponse)
			wantCode(t, "join beyond the group's metadata budget", resp.ErrorCode, kerr.GroupMaxSizeReached)
			refused++
		}
	}
	if refused != 2 {
		t.Fatal("budget not applied")
	}
	// The parked joins of "big" are answered when the broker stops.
}

// TestGroupHugeAssignment: a leader's assignment too large to be written
// (the group's record beyond the offsets topic's max.message.bytes) fails
// the SyncGroup as Kafka fails it (UNKNOWN_SERVER_ERROR), and the group
// rebalances; nothing of it is kept.
func TestGroupHugeAssignment(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	e2eCreateTopic(t, b, "t", 1, nil)
	a := dialAdmin(t, b.Addr)
	r := a.joinNew(t, "g", joinOpts{protocols: rangeProtocol("t")})
	s := a.sync(3, "g", r.MemberID, r.Generation, nil, map[string][]byte{r.MemberID: bytes.Repeat([]byte{7}, 2<<20)})
	wantCode(t, "sync with a 2 MiB assignment", s.ErrorCode, kerr.UnknownServerError)
	if d := a.describe(5, "g").Groups[0]; d.State != "PreparingRebalance" {
		t.Fatalf("group after the failed sync: %+v", d)
	}
	// The member rejoins and syncs a sane assignment.
	o := joinOpts{memberID: r.MemberID, protocols: rangeProtocol("t")}
	r = a.join("g", o)
	if s := a.sync(3, "g", r.MemberID, r.Generation, nil, map[string][]byte{r.MemberID: []byte("ok")}); s.ErrorCode != 0 || string(s.MemberAssignment) != "ok" {
		t.Fatalf("sync after rejoining: %+v", s)
	}
}

// TestGroupMaxSize: group.max.size (KIP-389).
func TestGroupMaxSize(t *testing.T) {
	b := startBroker(t, brokerOpts{Groups: func(c *group.Config) { c.MaxSize = 1 }})
	e2eCreateTopic(t, b, "t", 2, nil)
	a := dialAdmin(t, b.Addr)
	a.stableMember(t, "small", joinOpts{protocols: rangeProtocol("t")}, []byte("a"))
	for _, v := range []int16{-1, 5} {
		r := a.join("small", joinOpts{version: v, protocols: rangeProtocol("t")})
		wantCode(t, "second member", r.ErrorCode, kerr.GroupMaxSizeReached)
	}
}

// TestGroupMemberErrors: SyncGroup, Heartbeat, OffsetCommit and LeaveGroup
// from unknown members, stale generations, mismatched protocols, fenced
// static members.
func TestGroupMemberErrors(t *testing.T) {
	b := groupErrorsBroker(t)
	e2eCreateTopic(t, b, "t", 2, nil)
	a := dialAdmin(t, b.Addr)
	id, gen := a.stableMember(t, "g", joinOpts{protocols: rangeProtocol("t")}, []byte("assignment"))

	for _, v := range []int16{0, 3, 5} {
		wantCode(t, "sync, unknown member", a.sync(v, "g", "nobody", gen, nil, nil).ErrorCode, kerr.UnknownMemberID)
		wantCode(t, "sync, group unknown", a.sync(v, "other", id, gen, nil, nil).ErrorCode, kerr.UnknownMemberID)
		wantCode(t, "sync, stale generation", a.sync(v, "g", id, gen-1, nil, nil).ErrorCode, kerr.IllegalGeneration)
		wantCode(t, "sync, empty group id", a.sync(v, "", id, gen, nil, nil).ErrorCode, kerr.InvalidGroupID)
		// A stable group hands a member its assignment again.
		if s := a.sync(v, "g", id, gen, nil, nil); s.ErrorCode != 0 || string(s.MemberAssignment) != "assignment" {
			t.Fatalf("sync v%d in a stable group: %+v", v, s)
		}
	}
	// v5 names the protocol type and protocol (KIP-559).
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation, req.ProtocolType, req.Protocol = "g", id, gen, kmsg.StringPtr("connect"), kmsg.StringPtr("range")
	wantCode(t, "sync v5, other protocol type", a.do(5, req).(*kmsg.SyncGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol)
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("sticky")
	wantCode(t, "sync v5, other protocol", a.do(5, req).(*kmsg.SyncGroupResponse).ErrorCode, kerr.InconsistentGroupProtocol)
	req.Protocol = kmsg.StringPtr("range")
	wantCode(t, "sync v5, right protocol", a.do(5, req).(*kmsg.SyncGroupResponse).ErrorCode, nil)

	for _, v := range []int16{0, 4} {
		wantCode(t, "heartbeat", a.heartbeat(v, "g", id, gen, nil), nil)
		wantCode(t, "heartbeat, unknown member", a.heartbeat(v, "g", "nobody", gen, nil), kerr.UnknownMemberID)
		wantCode(t, "heartbeat, unknown group", a.heartbeat(v, "nogroup", id, gen, nil), kerr.UnknownMemberID)
		wantCode(t, "heartbeat, stale generation", a.heartbeat(v, "g", id, gen+1, nil), kerr.IllegalGeneration)
		wantCode(t, "heartbeat, empty group id", a.heartbeat(v, "", id, gen, nil), kerr.InvalidGroupID)
	}

	meta := strings.Repeat("m", 4096)
	tooLong := strings.Repeat("m", 4097)
	for _, v := range []int16{1, 7, 9} {
		ok := commitPart{topic: "t", partition: 0, offset: 5, epoch: -1, meta: &meta}
		wantCodes(t, "commit", commitCodes(a.commit(v, "g", id, gen, nil, ok)), 0)
		wantCodes(t, "commit, stale generation", commitCodes(a.commit(v, "g", id, gen-1, nil, ok)), kerr.IllegalGeneration.Code)
		wantCodes(t, "commit, unknown member", commitCodes(a.commit(v, "g", "nobody", gen, nil, ok)), kerr.UnknownMemberID.Code)
		// A simple consumer (no generation) cannot commit for a group
		// with members.
		wantCodes(t, "simple commit to a group with members", commitCodes(a.commit(v, "g", "", -1, nil, ok)), kerr.UnknownMemberID.Code)
		// A member's commit to a group that does not exist is stale; from
		// v9 Kafka says the group is not found (KIP-848).
		noGroup := kerr.IllegalGeneration.Code
		if v >= 9 {
			noGroup = kerr.GroupIDNotFound.Code
		}
		wantCodes(t, "member commit, no group", commitCodes(a.commit(v, "gone", "x", 3, nil, ok)), noGroup)
		// Partition by partition: unknown topic, unknown partition, long
		// metadata; the others are stored.
		r := a.commit(v, "g", id, gen, nil,
			commitPart{topic: "t", partition: 1, offset: 7, epoch: -1},
			commitPart{topic: "t", partition: 2, offset: 1, epoch: -1},
			commitPart{topic: "t", partition: 0, offset: 9, epoch: -1, meta: &tooLong},
			commitPart{topic: "nope", partition: 0, offset: 1, epoch: -1})
		wantCodes(t, "commit, partition by partition", commitCodes(r), 0, kerr.UnknownTopicOrPartition.Code,
			kerr.OffsetMetadataTooLarge.Code, kerr.UnknownTopicOrPartition.Code)
	}
	f := a.fetchOffsets(5, "g", "t", 0, 1)
	if p := f.Topics[0].Partitions; p[0].Offset != 5 || *p[0].Metadata != meta || p[1].Offset != 7 {
		t.Fatalf("offsets after the commits: %+v", f.Topics)
	}

	// Static members (KIP-345): a zombie with the instance id but an old
	// member id is fenced everywhere.
	inst := kmsg.StringPtr("instance-1")
	sr := a.join("s", joinOpts{instance: inst, protocols: rangeProtocol("t")})
	if sr.ErrorCode != 0 {
		t.Fatalf("static join (no member id round for static members): %v", kerr.ErrorForCode(sr.ErrorCode))
	}
	if s := a.sync(3, "s", sr.MemberID, sr.Generation, inst, map[string][]byte{sr.MemberID: []byte("mine")}); s.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(s.ErrorCode))
	}
	again := a.join("s", joinOpts{instance: inst, protocols: rangeProtocol("t")})
	if again.ErrorCode != 0 || again.Generation != sr.Generation || again.MemberID == sr.MemberID {
		t.Fatalf("static member's new instance: %+v (first was %s gen %d)", again, sr.MemberID, sr.Generation)
	}
	// Before v9, a returning static leader is told of the old leader id,
	// so that it does not assign (the group keeps its assignment).
	if again.LeaderID != sr.MemberID || len(again.Members) != 0 {
		t.Fatalf("static rejoin v5: leader %s, %d members", again.LeaderID, len(again.Members))
	}
	wantCode(t, "zombie heartbeat", a.heartbeat(3, "s", sr.MemberID, sr.Generation, inst), kerr.FencedInstanceID)
	wantCode(t, "zombie sync", a.sync(3, "s", sr.MemberID, sr.Generation, inst, nil).ErrorCode, kerr.FencedInstanceID)
	wantCodes(t, "zombie commit", commitCodes(a.commit(7, "s", sr.MemberID, sr.Generation, inst,
		commitPart{topic: "t", partition: 0, offset: 1, epoch: -1})), kerr.FencedInstanceID.Code)
	wantCode(t, "zombie join", a.join("s", joinOpts{memberID: sr.MemberID, instance: inst, protocols: rangeProtocol("t")}).ErrorCode, kerr.FencedInstanceID)
	wantCode(t, "unknown instance", a.heartbeat(3, "s", again.MemberID, sr.Generation, kmsg.StringPtr("instance-2")), kerr.UnknownMemberID)
	if s := a.sync(3, "s", again.MemberID, again.Generation, inst, nil); s.ErrorCode != 0 || string(s.MemberAssignment) != "mine" {
		t.Fatalf("new instance's sync: %+v", s)
	}
	// v9 tells the returning static leader it leads, and to skip the
	// assignment (KIP-814).
	v9 := a.join("s", joinOpts{version: 9, instance: inst, protocols: rangeProtocol("t")})
	if v9.ErrorCode != 0 || !v9.SkipAssignment || v9.LeaderID != v9.MemberID || len(v9.Members) != 1 || v9.Generation != sr.Generation {
		t.Fatalf("static rejoin v9: %+v", v9)
	}

	// LeaveGroup: unknown members, by instance id, batched.
	wantCode(t, "leave v0, unknown member", a.leave(0, "g", leaving("nobody", nil)).ErrorCode, kerr.UnknownMemberID)
	lr := a.leave(3, "s", leaving("nobody", nil), leaving("", kmsg.StringPtr("instance-9")), leaving("", inst))
	if lr.ErrorCode != 0 || len(lr.Members) != 3 || lr.Members[0].ErrorCode != kerr.UnknownMemberID.Code ||
		lr.Members[1].ErrorCode != kerr.UnknownMemberID.Code || lr.Members[2].ErrorCode != 0 {
		t.Fatalf("batched leave: %+v", lr)
	}
	wantCode(t, "leave", a.leave(1, "g", leaving(id, nil)).ErrorCode, nil)
	if d := a.describe(5, "g", "s"); d.Groups[0].State != "Empty" || d.Groups[1].State != "Empty" {
		t.Fatalf("after leaving: %+v", d.Groups)
	}
	wantCode(t, "heartbeat after leaving", a.heartbeat(3, "g", id, gen, nil), kerr.UnknownMemberID)
}

func wantCodes(t *testing.T, what string, got []int16, want ...int16) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: codes %v, want %v", what, got, want)
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s: partition %d: %v, want %v", what, i, kerr.ErrorForCode(got[i]), kerr.ErrorForCode(want[i]))
		}
	}
}
