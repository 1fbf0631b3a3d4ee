package controller

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestSeedFromLocalQuorum: a local quorum's directory (a snapshot and
// entries after it) reopens as the only voter of a networked quorum and
// keeps its image; once it leads, its voter's address in raft's
// configuration is its controller port. The starts that would lose or
// split its quorum are refused without touching it: as a broker-only
// node, by bootstrap servers, with voters beside it, as another node; and
// once it seeded a cluster, alone again.
func TestSeedFromLocalQuorum(t *testing.T) {
	dir := t.TempDir()
	base := Config{
		NodeID: 1, Dir: dir, BrokerSessionTimeout: time.Minute, BrokerHeartbeatInterval: 100 * time.Millisecond,
		LeaderRebalanceInterval: -1, ElectionTimeout: 300 * time.Millisecond, SnapshotInterval: time.Hour, Logger: testLogger(),
	}
	local := &testNode{cfg: base}
	local.cfg.Voters = LocalQuorum(1)
	local.open(t)
	ctx := ctxTimeout(t, 30*time.Second)
	if err := local.c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := local.c.RegisterBroker(ctx, BrokerInfo{ID: 1, Addr: "127.0.0.1:9092"}); err != nil {
		t.Fatal(err)
	}
	if _, err := local.c.CreateTopic(ctx, CreateTopicRequest{Name: "before-snapshot", Partitions: 2, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	if err := local.c.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := local.c.CreateTopic(ctx, CreateTopicRequest{Name: "after-snapshot", Partitions: 1, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	local.close(t)

	other := listen(t)
	defer other.Close()
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
		want string
	}{
		{"broker-only", func(c *Config) {
			c.Voters, c.NonVoter, c.Listener = []Voter{{ID: 7, Addr: other.Addr().String()}}, true, listen(t)
			c.Addr = c.Listener.Addr().String()
		}, "a broker-only node cannot join another quorum"},
		{"bootstrap servers", func(c *Config) {
			c.BootstrapServers, c.Listener, c.ClusterID = []string{other.Addr().String()}, listen(t), "AAAAAAAAAAAAAAAAAAAAAA"
			c.Addr = c.Listener.Addr().String()
		}, "cannot join the quorum at controller.quorum.bootstrap.servers"},
		{"voters beside it", func(c *Config) {
			ln := listen(t)
			c.Voters, c.Listener = []Voter{{ID: 1, Addr: ln.Addr().String()}, {ID: 7, Addr: other.Addr().String()}}, ln
		}, "names voters 7 beside it"},
		{"another node", func(c *Config) {
			ln := listen(t)
			c.NodeID, c.Voters, c.Listener = 2, []Voter{{ID: 2, Addr: ln.Addr().String()}}, ln
		}, "holds the single-node quorum of node 1, this is node 2"},
	} {
		cfg := base
		tc.cfg(&cfg)
		c, err := Open(cfg)
		if err == nil {
			c.Close()
			t.Fatalf("%s: opened", tc.name)
		}
		if !errors.Is(err, ErrStoredQuorum) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: %v, want ErrStoredQuorum saying %q", tc.name, err, tc.want)
		}
	}

	ln := listen(t)
	seed := &testNode{cfg: base}
	seed.cfg.Voters, seed.cfg.Listener = []Voter{{ID: 1, Addr: ln.Addr().String()}}, ln
	seed.open(t)
	if err := seed.c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	img := seed.c.Image()
	if img.Topic("before-snapshot") == nil || img.Topic("after-snapshot") == nil {
		t.Fatalf("the seed's image lost topics of its local quorum")
	}
	var last []raft.Server
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		servers, err := seed.c.configuration()
		if err != nil {
			t.Fatal(err)
		}
		last = servers
		if len(servers) == 1 && servers[0].Suffrage == raft.Voter && string(servers[0].Address) == ln.Addr().String() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the seed's configuration after 10 s: %+v, want voter 1 at %s", last, ln.Addr())
		}
	}
	seed.close(t)

	alone := base
	alone.Voters = LocalQuorum(1)
	if c, err := Open(alone); err == nil {
		c.Close()
		t.Fatal("a seeded cluster's directory opened as a local quorum")
	} else if !errors.Is(err, ErrStoredQuorum) || !strings.Contains(err.Error(), "holds the metadata quorum of a cluster") {
		t.Fatalf("alone again: %v", err)
	}
}
