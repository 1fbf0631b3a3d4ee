package controller

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestQuorumProgressCaughtUp: a report is caught up when it reaches the
// commit index the leader had at the node's previous report (Kafka's rule
// for lastCaughtUpTimestamp), and the first report only sets the mark.
func TestQuorumProgressCaughtUp(t *testing.T) {
	var q quorumProgress
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	steps := []struct {
		index, commit uint64
		caughtUp      time.Time
	}{
		{5, 10, time.Time{}}, // first report: nothing to compare with
		{10, 20, at(1)},      // reached 10, the commit at the report before
		{15, 30, at(1)},      // behind 20
		{30, 30, at(3)},      // reached 30
	}
	for i, s := range steps {
		q.report(7, "h:1", false, s.index, s.commit, at(i))
		p, ok := q.get(7)
		if !ok || p.lastIndex != s.index || !p.lastFetch.Equal(at(i)) || !p.lastCaughtUp.Equal(s.caughtUp) {
			t.Fatalf("step %d: %+v, want caught up at %v", i, p, s.caughtUp)
		}
	}
	q.forget(7)
	if _, ok := q.get(7); ok || len(q.ids()) != 0 {
		t.Fatal("forget kept the node")
	}
}

func TestQuorumInfoEncoding(t *testing.T) {
	now := time.UnixMilli(time.Now().UnixMilli())
	in := QuorumInfo{LeaderID: 2, Epoch: 7, HighWatermark: 1234,
		Voters:    []QuorumReplica{{ID: 1, Addr: "a:1", LogEndOffset: 1230, LastFetch: now, LastCaughtUp: now}, {ID: 2, Addr: "b:2", LogEndOffset: 1234, LastFetch: now, LastCaughtUp: now}},
		Observers: []QuorumReplica{{ID: 4, Addr: "c:3", LogEndOffset: -1}}}
	out, err := decodeQuorumInfo(encodeQuorumInfo(in))
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("%+v %v, want %+v", out, err, in)
	}
	if _, err := decodeQuorumInfo(encodeQuorumInfo(in)[:20]); err == nil {
		t.Fatal("a truncated answer decoded")
	}
}

func FuzzDecodeQuorumInfo(f *testing.F) {
	f.Add(encodeQuorumInfo(QuorumInfo{LeaderID: 1, Voters: []QuorumReplica{{ID: 1, Addr: "a:1"}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var q QuorumInfo
		var err error
		if n := allocated(func() { q, err = decodeQuorumInfo(b) }); n > allocBound(len(b)) {
			t.Fatalf("decoding %d bytes allocated %d", len(b), n)
		}
		if err != nil {
			return
		}
		again, err := decodeQuorumInfo(encodeQuorumInfo(q))
		if err != nil || !reflect.DeepEqual(q, again) {
			t.Fatalf("decode-encode-decode: %+v, %v; first %+v", again, err, q)
		}
	})
}

// TestObserversAndVoterChanges: on one static voter, a broker-only node
// that knows the quorum only by a bootstrap address joins as a non-voter
// and applies the log, and registers; a node with
// another cluster id is refused; a controller outside the voter list
// observes, is added as a voter (the quorum of two then needs it), and
// the first voter is removed, after which the new one leads alone.
func TestObserversAndVoterChanges(t *testing.T) {
	nodes := newCluster(t, 1, func(cfg *Config) { cfg.ClusterID = "c1" })
	v := nodes[0]
	waitLeader(t, nodes, 5*time.Second)
	join := func(id int32, nonVoter bool, cluster string) *testNode {
		t.Helper()
		ln := listen(t)
		cfg := v.cfg
		cfg.NodeID, cfg.Voters, cfg.Dir, cfg.Listener = id, nil, t.TempDir(), ln
		cfg.Addr, cfg.BootstrapServers, cfg.NonVoter, cfg.ClusterID = ln.Addr().String(), []string{v.cfg.Voters[0].Addr}, nonVoter, cluster
		nd := &testNode{cfg: cfg}
		nd.open(t)
		t.Cleanup(func() { nd.close(t) })
		return nd
	}
	b := join(4, true, "c1")
	// A Sync through the observer waits until it applied the no-op it
	// wrote through the leader: it receives and applies the log.
	if err := b.c.Sync(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatalf("observer Sync: %v", err)
	}
	if _, err := b.c.RegisterBroker(ctxTimeout(t, 5*time.Second), BrokerInfo{ID: 4, Addr: "127.0.0.1:9092"}); err != nil {
		t.Fatal(err)
	}
	waitImage(t, b.c, 5*time.Second, "broker 4 registered, seen by itself", func(img *Image) bool { _, ok := img.Broker(4); return ok })

	join(5, true, "c2")
	info, err := v.c.DescribeQuorum(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Voters) != 1 || info.Voters[0].ID != 1 || len(info.Observers) != 1 || info.Observers[0].ID != 4 || info.LeaderID != 1 {
		t.Fatalf("DescribeQuorum: %+v (node 5 of another cluster must not join)", info)
	}

	c := join(6, false, "c1")
	if err := v.c.AddVoter(ctxTimeout(t, 5*time.Second), 4, b.cfg.Addr); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("AddVoter of a broker-only node: %v", err)
	}
	if err := v.c.AddVoter(ctxTimeout(t, 5*time.Second), 6, c.cfg.Addr); err != nil {
		t.Fatalf("AddVoter 6: %v", err)
	}
	if err := v.c.AddVoter(ctxTimeout(t, 5*time.Second), 6, c.cfg.Addr); !errors.Is(err, ErrDuplicateVoter) {
		t.Fatalf("AddVoter 6 again: %v", err)
	}
	if err := c.c.RemoveVoter(ctxTimeout(t, 5*time.Second), 1); err != nil {
		t.Fatalf("RemoveVoter 1: %v", err)
	}
	nodes6 := []*testNode{c}
	waitLeader(t, nodes6, 5*time.Second)
	if err := c.c.RemoveVoter(ctxTimeout(t, 5*time.Second), 6); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("RemoveVoter of the last voter: %v", err)
	}
	if err := c.c.RemoveVoter(ctxTimeout(t, 5*time.Second), 1); !errors.Is(err, ErrVoterNotFound) {
		t.Fatalf("RemoveVoter 1 again: %v", err)
	}
	// The new voter commits alone: the old one does not count any more.
	v.close(t)
	if err := b.c.Sync(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatalf("Sync with the first voter gone: %v", err)
	}
}
