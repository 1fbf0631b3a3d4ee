package controller

import (
	"context"
	"log/slog"
	"net"
	"os"
	"slices"
	"testing"
	"time"
)

// Test clusters run real raft over real TCP on 127.0.0.1 with bolt files
// in t.TempDir(), with timeouts short enough for the package to finish in
// well under a minute on two cores with -race.

func testLogger() *slog.Logger {
	// raft logs every refused dial at ERROR while a peer is down, which
	// the tests do on purpose: quiet unless asked for.
	level := slog.LevelError + 4
	if os.Getenv("RINGLOG_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// testNode is one node of a test cluster, reopenable on the same dir and
// address.
type testNode struct {
	cfg Config
	c   *Controller
}

func newCluster(t *testing.T, n int, tweak func(*Config)) []*testNode {
	t.Helper()
	var lns []net.Listener
	var voters []Voter
	for i := range n {
		ln := listen(t)
		lns = append(lns, ln)
		voters = append(voters, Voter{ID: int32(i + 1), Addr: ln.Addr().String()})
	}
	var nodes []*testNode
	for i := range n {
		cfg := Config{
			NodeID:                  int32(i + 1),
			Voters:                  voters,
			Dir:                     t.TempDir(),
			Listener:                lns[i],
			BrokerSessionTimeout:    3 * time.Second,
			BrokerHeartbeatInterval: 100 * time.Millisecond,
			LeaderRebalanceInterval: -1,
			ElectionTimeout:         300 * time.Millisecond,
			SnapshotThreshold:       16,
			SnapshotInterval:        200 * time.Millisecond,
			Logger:                  testLogger(),
		}
		if tweak != nil {
			tweak(&cfg)
		}
		nodes = append(nodes, &testNode{cfg: cfg})
	}
	for _, nd := range nodes {
		nd.open(t)
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.close(t)
		}
	})
	return nodes
}

func (nd *testNode) open(t *testing.T) {
	t.Helper()
	c, err := Open(nd.cfg)
	if err != nil {
		t.Fatal(err)
	}
	nd.c = c
	// A reopened node listens on its voter address itself.
	nd.cfg.Listener = nil
}

func (nd *testNode) close(t *testing.T) {
	t.Helper()
	if nd.c == nil {
		return
	}
	start := time.Now()
	if err := nd.c.Close(); err != nil {
		t.Errorf("close node %d: %v", nd.cfg.NodeID, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("close node %d took %v", nd.cfg.NodeID, d)
	}
	nd.c = nil
}

// waitLeader waits until one open node leads and every open node knows it.
func waitLeader(t *testing.T, nodes []*testNode, timeout time.Duration) *testNode {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var leader *testNode
		agree := true
		for _, nd := range nodes {
			if nd.c != nil && nd.c.raft.State().String() == "Leader" {
				leader = nd
			}
		}
		if leader != nil {
			for _, nd := range nodes {
				if nd.c != nil && nd.c.LeaderID() != leader.cfg.NodeID {
					agree = false
				}
			}
			if agree {
				return leader
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no leader within %v", timeout)
	return nil
}

// waitImage waits until cond holds for c's image.
func waitImage(t *testing.T, c *Controller, timeout time.Duration, what string, cond func(*Image) bool) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		img := c.Image()
		if cond(img) {
			return
		}
		select {
		case <-img.Superseded():
		case <-timer.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// topicsState is the encoding of every topic, to compare nodes' states.
func topicsState(img *Image) []byte {
	e := &encoder{}
	for _, name := range img.TopicNames() {
		encodeTopic(e, img.Topic(name))
	}
	return e.b
}

// stateOf is the full encoded state without the index.
func stateOf(img *Image) []byte { return encodeImage(img)[snapshotHeaderBytes:] }

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}
