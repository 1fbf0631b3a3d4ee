package kafka_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine/group"
)

// The rebalance state machine seen from raw members: who waits for whom,
// and what the timeouts do.

// pendingJoin is a JoinGroup sent on a connection of its own, parked in
// the broker until the rebalance completes.
type pendingJoin struct {
	c   *adminConn
	req *kmsg.JoinGroupRequest
	got chan *kmsg.JoinGroupResponse
}

func sendJoin(t *testing.T, b *testBroker, groupID string, o joinOpts) *pendingJoin {
	t.Helper()
	p := readyJoin(t, b, groupID, o)
	p.send()
	return p
}

// readyJoin dials and, for a new member, takes its member id (KIP-394),
// so that send puts the JoinGroup on the wire with nothing before it.
func readyJoin(t *testing.T, b *testBroker, groupID string, o joinOpts) *pendingJoin {
	t.Helper()
	c := dialAdmin(t, b.Addr)
	if o.memberID == "" && o.instance == nil {
		// Get the member id first (KIP-394), synchronously.
		r := c.join(groupID, o)
		if r.ErrorCode != kerr.MemberIDRequired.Code {
			t.Fatalf("first join: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		o.memberID = r.MemberID
	}
	return &pendingJoin{c: c, req: joinReq(groupID, o), got: make(chan *kmsg.JoinGroupResponse, 1)}
}

func (p *pendingJoin) send() {
	p.c.send(5, p.req)
	go func() { p.got <- p.c.read(p.req).(*kmsg.JoinGroupResponse) }()
}

func (p *pendingJoin) wait(t *testing.T, d time.Duration) *kmsg.JoinGroupResponse {
	t.Helper()
	select {
	case r := <-p.got:
		return r
	case <-time.After(d):
		t.Fatalf("join of %s not answered in %v", p.req.MemberID, d)
		return nil
	}
}

func (p *pendingJoin) parked(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case r := <-p.got:
		t.Fatalf("join answered while it should wait: %+v", r)
	case <-time.After(d):
	}
}

// TestGroupJoinWaitsForRebalance: a member joining a stable group parks
// until the current members rejoin (they learn of the rebalance from their
// heartbeats); then everyone gets the new generation, the leader with the
// members' metadata.
func TestGroupJoinWaitsForRebalance(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	e2eCreateTopic(t, b, "t", 2, nil)
	a := dialAdmin(t, b.Addr)
	o := joinOpts{protocols: rangeProtocol("t")}
	first, gen := a.stableMember(t, "g", o, []byte("all"))

	second := sendJoin(t, b, "g", o)
	second.parked(t, 200*time.Millisecond)
	wantCode(t, "heartbeat during the rebalance", a.heartbeat(3, "g", first, gen, nil), kerr.RebalanceInProgress)
	// A commit during the rebalance is still accepted (the member commits
	// what it consumed before rejoining).
	wantCodes(t, "commit while preparing", commitCodes(a.commit(7, "g", first, gen, nil,
		commitPart{topic: "t", partition: 0, offset: 3, epoch: -1})), 0)
	wantCode(t, "sync during the rebalance", a.sync(3, "g", first, gen, nil, nil).ErrorCode, kerr.RebalanceInProgress)

	o.memberID = first
	r1 := a.join("g", o)
	r2 := second.wait(t, 5*time.Second)
	if r1.ErrorCode != 0 || r2.ErrorCode != 0 || r1.Generation != gen+1 || r2.Generation != gen+1 {
		t.Fatalf("joins: %+v / %+v", r1, r2)
	}
	if r1.LeaderID != first || len(r1.Members) != 2 || len(r2.Members) != 0 || r2.LeaderID != first {
		t.Fatalf("leader %s: %d members to the leader, %d to the follower", r1.LeaderID, len(r1.Members), len(r2.Members))
	}
	// Commits wait for the assignment: REBALANCE_IN_PROGRESS between the
	// join and the sync.
	wantCodes(t, "commit while completing", commitCodes(a.commit(7, "g", first, r1.Generation, nil,
		commitPart{topic: "t", partition: 0, offset: 3, epoch: -1})), kerr.RebalanceInProgress.Code)

	// The follower's sync waits for the leader's.
	followerSync := make(chan *kmsg.SyncGroupResponse, 1)
	go func() {
		followerSync <- second.c.sync(3, "g", r2.MemberID, r2.Generation, nil, nil)
	}()
	select {
	case s := <-followerSync:
		t.Fatalf("follower's sync answered before the leader's: %+v", s)
	case <-time.After(200 * time.Millisecond):
	}
	s := a.sync(3, "g", first, r1.Generation, nil, map[string][]byte{first: []byte("p0"), r2.MemberID: []byte("p1"), "stranger": []byte("x")})
	if s.ErrorCode != 0 || string(s.MemberAssignment) != "p0" {
		t.Fatalf("leader's sync: %+v", s)
	}
	if fs := <-followerSync; fs.ErrorCode != 0 || string(fs.MemberAssignment) != "p1" {
		t.Fatalf("follower's sync: %+v", fs)
	}
	d := a.describe(5, "g").Groups[0]
	if d.State != "Stable" || d.Protocol != "range" || d.ProtocolType != "consumer" || len(d.Members) != 2 {
		t.Fatalf("described: %+v", d)
	}
}

// TestGroupTimeouts: a member that does not rejoin within the rebalance
// timeout is dropped from the generation; a member whose heartbeats stop
// is dropped after its session timeout; a member that does not sync is
// dropped after the rebalance timeout.
func TestGroupTimeouts(t *testing.T) {
	b := startBroker(t, brokerOpts{Groups: func(c *group.Config) { c.MinSessionTimeout = 100 * time.Millisecond }})
	e2eCreateTopic(t, b, "t", 2, nil)
	a := dialAdmin(t, b.Addr)
	o := joinOpts{protocols: rangeProtocol("t"), sessionMs: 10000, rebalMs: 400}
	first, gen := a.stableMember(t, "g", o, []byte("all"))

	// The rebalance timeout: the first member never rejoins.
	start := time.Now()
	second := sendJoin(t, b, "g", joinOpts{protocols: rangeProtocol("t"), sessionMs: 10000, rebalMs: 400})
	r := second.wait(t, 5*time.Second)
	if took := time.Since(start); r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 || took < 350*time.Millisecond {
		t.Fatalf("join after the rebalance timeout: %+v after %v", r, took)
	}
	wantCode(t, "dropped member's heartbeat", a.heartbeat(3, "g", first, gen, nil), kerr.UnknownMemberID)
	if s := second.c.sync(3, "g", r.MemberID, r.Generation, nil, map[string][]byte{r.MemberID: []byte("x")}); s.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(s.ErrorCode))
	}

	// The session timeout: heartbeats stop, the member goes, the group is
	// empty.
	short := joinOpts{protocols: rangeProtocol("t"), sessionMs: 300, rebalMs: 300}
	id, _ := a.stableMember(t, "h", short, []byte("all"))
	time.Sleep(150 * time.Millisecond)
	wantCode(t, "heartbeat in time", a.heartbeat(3, "h", id, 1, nil), nil)
	deadline := time.Now().Add(3 * time.Second)
	for a.describe(5, "h").Groups[0].State != "Empty" {
		if time.Now().After(deadline) {
			t.Fatalf("group h after its member's session: %+v", a.describe(5, "h").Groups[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantCode(t, "expired member's heartbeat", a.heartbeat(3, "h", id, 1, nil), kerr.UnknownMemberID)

	// The sync timeout: a member gets its join answer and never syncs.
	j := a.joinNew(t, "s", short)
	deadline = time.Now().Add(3 * time.Second)
	for a.describe(5, "s").Groups[0].State != "Empty" {
		if time.Now().After(deadline) {
			t.Fatalf("group s after its member did not sync: %+v", a.describe(5, "s").Groups[0])
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantCode(t, "unsynced member's heartbeat", a.heartbeat(3, "s", j.MemberID, j.Generation, nil), kerr.UnknownMemberID)

	// A member id handed out with MEMBER_ID_REQUIRED is waited for by a
	// rebalance, until it expires after the session timeout it asked for.
	xo := joinOpts{protocols: rangeProtocol("t"), sessionMs: 10000, rebalMs: 5000}
	x, xgen := a.stableMember(t, "p", xo, []byte("all"))
	pending := a.join("p", joinOpts{protocols: rangeProtocol("t"), sessionMs: 300, rebalMs: 5000})
	wantCode(t, "pending member", pending.ErrorCode, kerr.MemberIDRequired)
	xo.memberID = x
	start = time.Now()
	rx := a.join("p", xo) // a leader's join rebalances
	if took := time.Since(start); rx.ErrorCode != 0 || rx.Generation != xgen+1 || len(rx.Members) != 1 ||
		took < 250*time.Millisecond || took > 3*time.Second {
		t.Fatalf("rebalance held by a pending member: %+v after %v", rx, took)
	}
}

// TestGroupInitialRebalanceDelay: the first rebalance of an empty group
// waits group.initial.rebalance.delay.ms, longer while members keep
// joining (KIP-134), so that they all land in the first generation.
func TestGroupInitialRebalanceDelay(t *testing.T) {
	const delay = 500 * time.Millisecond
	b := startBroker(t, brokerOpts{Groups: func(c *group.Config) { c.InitialRebalanceDelay = delay }})
	e2eCreateTopic(t, b, "t", 2, nil)
	o := joinOpts{protocols: rangeProtocol("t"), rebalMs: 5000}
	// Both members dialled and named before the first join, so that the
	// second's join is one write 200 ms after the first's, well inside
	// the delay even on a loaded machine.
	j1, j2 := readyJoin(t, b, "g", o), readyJoin(t, b, "g", o)
	start := time.Now()
	j1.send()
	time.Sleep(200 * time.Millisecond)
	j2.send()
	r1, r2 := j1.wait(t, 5*time.Second), j2.wait(t, 5*time.Second)
	took := time.Since(start)
	if r1.ErrorCode != 0 || r2.ErrorCode != 0 || r1.Generation != 1 || r2.Generation != 1 {
		t.Fatalf("joins %+v / %+v", r1, r2)
	}
	if took < delay+200*time.Millisecond || took > 4*time.Second {
		t.Fatalf("first generation after %v: the delay should have been extended once (200 ms + %v)", took, delay)
	}
}
