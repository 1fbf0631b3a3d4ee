package group

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/ioring"
)

// The coordinator over an engine with a replication layer, without a
// network or a controller: the test plays replication/node, giving the
// partition of __consumer_offsets its roles, moving its high watermark and
// appending a leader's batches to it as a follower.

var offsetsTP = engine.TP{Topic: OffsetsTopic, Partition: 0}

func openReplicatedCluster(t *testing.T) (*engine.Core, *Coordinator) {
	t.Helper()
	e, err := engine.OpenCore(engine.Config{Dir: t.TempDir(), Shards: 2, IO: ioring.ModeAuto, OnAppended: func(engine.TP, int64) {}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	c := startCoordinator(t, e, Config{OffsetsTopicPartitions: 1})
	t.Cleanup(c.Close)
	createOffsetsTopic(t, e, c)
	if _, err := e.CreateTopicWithID("t", [16]byte{8}, 1, nil); err != nil {
		t.Fatal(err)
	}
	return e, c
}

// waitPartState waits until the partition's state is want.
func waitPartState(t *testing.T, e *engine.Core, c *Coordinator, want partState) {
	t.Helper()
	p := c.parts[0]
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := make(chan partState, 1)
		if err := e.OnShard(p.tp, func() { got <- p.state }); err != nil {
			t.Fatal(err)
		}
		if <-got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition state never became %d", want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// replicated moves the high watermark to the LEO, as the followers'
// fetches would, until an answer comes (the write it waits for may not
// be in the log yet), and returns it.
func replicated[Resp any](t *testing.T, e *engine.Core, got chan Resp) Resp {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := e.State(offsetsTP)
		mustOK(t, err)
		mustOK(t, e.SetHW(offsetsTP, st.LEO))
		select {
		case r := <-got:
			return r
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no answer once the high watermark reached the LEO")
		}
	}
}

func fetchedOffset(t *testing.T, c *Coordinator) (int64, int16) {
	t.Helper()
	r := call(t, func(reply func(*kmsg.OffsetFetchResponse)) { c.OffsetFetch(fetchRequest("g", false), reply) })
	if r.ErrorCode != 0 {
		return -1, r.ErrorCode
	}
	return r.Topics[0].Partitions[0].Offset, r.Topics[0].Partitions[0].ErrorCode
}

// answerWithin returns the answer fn gets within d, or nil.
func answerWithin[Resp any](d time.Duration, fn func(reply func(Resp))) (got chan Resp, answered func() (Resp, bool)) {
	got = make(chan Resp, 1)
	fn(func(r Resp) { got <- r })
	return got, func() (Resp, bool) {
		select {
		case r := <-got:
			return r, true
		case <-time.After(d):
			var zero Resp
			return zero, false
		}
	}
}

// TestClusterElectedResigned: a partition this broker does not lead is
// NOT_COORDINATOR; elected, it loads (COORDINATOR_LOAD_IN_PROGRESS, and
// WaitLoaded waits for it) and serves; a commit is answered only once the
// high watermark covers it; on resignation, the commit still waiting and
// a parked join are answered NOT_COORDINATOR, and so is everything after;
// elected again after following, it replays its log up to the LEO (what
// the other leader wrote, above the HW it learned) and serves that.
func TestClusterElectedResigned(t *testing.T) {
	e, c := openReplicatedCluster(t)
	join := func(member string) *kmsg.JoinGroupResponse {
		return call(t, func(reply func(*kmsg.JoinGroupResponse)) {
			c.JoinGroup(Client{ID: "c"}, joinRequest("g", member), reply)
		})
	}
	if r := join(""); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("join before any election: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if l := call(t, func(reply func(*kmsg.ListGroupsResponse)) { c.ListGroups(kmsg.NewPtrListGroupsRequest(), reply) }); l.ErrorCode != 0 || len(l.Groups) != 0 {
		t.Fatalf("list with no partition led here: %v %v", kerr.ErrorForCode(l.ErrorCode), l.Groups)
	}
	waitLoaded(t, c) // nothing elected: nothing to wait for

	// Elected at epoch 1, the replay held: loading.
	release := make(chan struct{})
	beforeInstall = func(int32) { <-release }
	defer func() { beforeInstall = nil }()
	mustOK(t, e.BecomeLeader(offsetsTP, 1))
	mustOK(t, e.SetISR(offsetsTP, 2, 3))
	c.Elected(0, 1)
	waitPartState(t, e, c, partLoading)
	if r := join(""); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("join while loading: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.WaitLoaded(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitLoaded while the elected partition loads: %v", err)
	}
	close(release)
	waitLoaded(t, c)
	waitPartState(t, e, c, partLoaded)
	c.Elected(0, 1) // a repeat: nothing happens

	// A commit waits for the high watermark.
	var member string
	generation := int32(-1)
	commit := func(offset int64) (chan *kmsg.OffsetCommitResponse, func() (*kmsg.OffsetCommitResponse, bool)) {
		req := commitRequest("g", offset)
		req.MemberID, req.Generation = member, generation
		return answerWithin(100*time.Millisecond, func(reply func(*kmsg.OffsetCommitResponse)) { c.OffsetCommit(req, reply) })
	}
	got, answered := commit(5)
	if r, ok := answered(); ok {
		t.Fatalf("commit answered before the high watermark covered it: %+v", r)
	}
	if off, code := fetchedOffset(t, c); off != -1 || code != 0 {
		t.Fatalf("offset visible before it is committed: %d %v", off, kerr.ErrorForCode(code))
	}
	if r := replicated(t, e, got); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	if off, _ := fetchedOffset(t, c); off != 5 {
		t.Fatalf("offset %d after the commit, want 5", off)
	}

	// A member joins (no write), a second one parks; a commit waits.
	first := join("")
	if first.ErrorCode != 0 {
		t.Fatalf("first join: %v", kerr.ErrorForCode(first.ErrorCode))
	}
	member, generation = first.MemberID, first.Generation
	parked, _ := answerWithin(0, func(reply func(*kmsg.JoinGroupResponse)) { c.JoinGroup(Client{ID: "c"}, joinRequest("g", ""), reply) })
	pending, answered := commit(6)
	if r, ok := answered(); ok {
		t.Fatalf("second commit answered before the high watermark covered it: %+v", r)
	}

	// Leadership moves away (the engine first, as replication/node does).
	mustOK(t, e.BecomeFollower(offsetsTP, 2))
	c.Resigned(0, 2)
	if r := recv(t, pending); r.Topics[0].Partitions[0].ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("commit waiting at the resignation: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	if r := recv(t, parked); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("join parked at the resignation: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	waitPartState(t, e, c, partUnloaded)
	if _, code := fetchedOffset(t, c); code != kerr.NotCoordinator.Code {
		t.Fatalf("offset fetch after the resignation: %v", kerr.ErrorForCode(code))
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", first.MemberID, first.Generation
	if h := call(t, func(reply func(*kmsg.HeartbeatResponse)) { c.Heartbeat(hb, reply) }); h.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat after the resignation: %v", kerr.ErrorForCode(h.ErrorCode))
	}

	// As a follower, the partition takes the new leader's commit of 42;
	// its HW stays behind.
	st, err := e.State(offsetsTP)
	mustOK(t, err)
	b, err := buildBatches([]record{{key: offsetKey("g", engine.TP{Topic: "t", Partition: 0}),
		value: offsetValue(committed{offset: 42, leaderEpoch: -1, commitMs: time.Now().UnixMilli(), expireMs: -1})}}, time.Now())
	mustOK(t, err)
	binary.BigEndian.PutUint64(b[0:], uint64(st.LEO))
	binary.BigEndian.PutUint32(b[12:], 2)
	leo := make(chan error, 1)
	e.AppendReplica(offsetsTP, b, func(_ int64, err error) { leo <- err })
	mustOK(t, <-leo)

	// A stale election (older than the resignation) is ignored.
	c.Elected(0, 1)
	time.Sleep(20 * time.Millisecond)
	waitPartState(t, e, c, partUnloaded)

	// Elected again at epoch 3: the replay reads to the LEO.
	mustOK(t, e.BecomeLeader(offsetsTP, 3))
	c.Elected(0, 3)
	waitPartState(t, e, c, partLoaded)
	if off, code := fetchedOffset(t, c); off != 42 || code != 0 {
		t.Fatalf("offset after re-election: %d %v, want 42 (written by the other leader)", off, kerr.ErrorForCode(code))
	}
	// A stale resignation changes nothing.
	c.Resigned(0, 2)
	time.Sleep(20 * time.Millisecond)
	if off, code := fetchedOffset(t, c); off != 42 || code != 0 {
		t.Fatalf("offset after a stale resignation: %d %v", off, kerr.ErrorForCode(code))
	}

	// Re-elected at a newer epoch without a resignation between (the
	// node saw the leadership come back in one step): a new term, whose
	// replay finds the commit the last term wrote.
	member, generation = "", -1 // the group came back Empty: its members never synced
	got, _ = commit(43)
	if r := replicated(t, e, got); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit at epoch 3: %v", kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode))
	}
	mustOK(t, e.BecomeLeader(offsetsTP, 5))
	c.Elected(0, 5)
	waitPartState(t, e, c, partLoaded)
	if off, code := fetchedOffset(t, c); off != 43 || code != 0 {
		t.Fatalf("offset after the new term: %d %v, want 43", off, kerr.ErrorForCode(code))
	}
}

// TestClusterConsumerGroupWaitsForHW: a KIP-848 heartbeat that writes
// records is answered once the high watermark covers them, and with
// NOT_COORDINATOR when leadership is lost first.
func TestClusterConsumerGroupWaitsForHW(t *testing.T) {
	e, c := openReplicatedCluster(t)
	mustOK(t, e.BecomeLeader(offsetsTP, 1))
	c.Elected(0, 1)
	waitPartState(t, e, c, partLoaded)
	heartbeat := func(member string) (chan *kmsg.ConsumerGroupHeartbeatResponse, func() (*kmsg.ConsumerGroupHeartbeatResponse, bool)) {
		return answerWithin(100*time.Millisecond, func(reply func(*kmsg.ConsumerGroupHeartbeatResponse)) {
			c.ConsumerGroupHeartbeat(Client{ID: "c"}, joinReq(member, "t"), reply)
		})
	}
	got, answered := heartbeat("m1")
	if r, ok := answered(); ok {
		t.Fatalf("join answered before its records were committed: %+v", r)
	}
	if r := replicated(t, e, got); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("join: %v epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
	got, answered = heartbeat("m2")
	if r, ok := answered(); ok {
		t.Fatalf("second join answered before its records were committed: %+v", r)
	}
	mustOK(t, e.BecomeFollower(offsetsTP, 2))
	c.Resigned(0, 2)
	if r := recv(t, got); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("join waiting at the resignation: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// recv waits for an answer, at most 10 s.
func recv[Resp any](t *testing.T, got chan Resp) Resp {
	t.Helper()
	select {
	case r := <-got:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		panic("unreachable")
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
