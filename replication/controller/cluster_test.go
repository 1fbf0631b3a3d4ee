package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// One voter, listening on its port or as a local quorum (no port, the
// in-memory transport): the same state machine, persisted and restored.
func TestOneVoterRestart(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(map[bool]string{false: "listening", true: "local"}[local], func(t *testing.T) { testOneVoterRestart(t, local) })
	}
}

func testOneVoterRestart(t *testing.T, local bool) {
	nodes := newCluster(t, 1, func(cfg *Config) {
		cfg.BrokerSessionTimeout = time.Minute
		if local {
			cfg.Listener.Close()
			cfg.Listener, cfg.Voters, cfg.ElectionTimeout = nil, LocalQuorum(1), 0
		}
	})
	nd := nodes[0]
	ctx := ctxTimeout(t, 20*time.Second)
	if err := nd.c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if !nd.c.Fresh() {
		t.Fatal("a new quorum does not say it is fresh")
	}
	if got := nd.c.LeaderID(); got != 1 {
		t.Fatalf("LeaderID %d", got)
	}
	epoch, err := nd.c.RegisterBroker(ctx, BrokerInfo{ID: 1, Addr: "127.0.0.1:9092", Rack: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	topic, err := nd.c.CreateTopic(ctx, CreateTopicRequest{Name: "orders", Partitions: 3, ReplicationFactor: 1,
		Configs: map[string]string{"retention.ms": "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(topic.Partitions) != 3 || topic.Partitions[2].Leader != 1 || topic.ID == (TopicID{}) {
		t.Fatalf("created %+v", topic)
	}
	if got := nd.c.Image().Topic("orders"); got == nil || got.ID != topic.ID {
		t.Fatal("the write is not in Image when CreateTopic returns")
	}
	if err := nd.c.AlterConfigs(ctx, "orders", map[string]string{"retention.ms": "2000"}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = nd.c.CreateTopic(ctx, CreateTopicRequest{Name: "wide", Partitions: 1, ReplicationFactor: 2})
	if !errors.Is(err, ErrInvalidReplicationFactor) || !strings.Contains(err.Error(), "only 1 broker(s) are registered") {
		t.Fatalf("rf 2 on one broker: %v", err)
	}
	if _, err := nd.c.CreateTopic(ctx, CreateTopicRequest{Name: "orders", Partitions: 1, ReplicationFactor: 1}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("create twice: %v", err)
	}
	v, err := nd.c.CreateTopic(ctx, CreateTopicRequest{Name: "dry", Partitions: -1, ReplicationFactor: -1, ValidateOnly: true})
	if err != nil || len(v.Partitions) != 1 || nd.c.Image().Topic("dry") != nil {
		t.Fatalf("validateOnly: %v %+v", err, v)
	}

	// CreateTopic latency on one voter (fsync of bolt included).
	var lat []time.Duration
	for i := range 20 {
		start := time.Now()
		if _, err := nd.c.CreateTopic(ctx, CreateTopicRequest{Name: fmt.Sprintf("lat-%d", i), Partitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	t.Logf("metric: CreateTopic on 1 voter: p50 %v, max %v", percentile(lat, 0.5), percentile(lat, 1))

	// A snapshot, then more entries after it: a restart restores the
	// snapshot and replays the log tail.
	if err := nd.c.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if err := nd.c.DeleteTopic(ctx, "lat-0"); err != nil {
		t.Fatal(err)
	}
	if err := nd.c.CreatePartitions(ctx, "orders", 5, nil, 0); err != nil {
		t.Fatal(err)
	}
	before := stateOf(nd.c.Image())
	nd.close(t)
	if snaps, _ := filepath.Glob(filepath.Join(nd.cfg.Dir, "snapshots", "*")); len(snaps) == 0 {
		t.Fatal("no raft snapshot on disk")
	}

	nd.open(t)
	ctx = ctxTimeout(t, 20*time.Second)
	if err := nd.c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if nd.c.Fresh() {
		t.Fatal("a reopened quorum says it is fresh")
	}
	if after := stateOf(nd.c.Image()); !bytes.Equal(before, after) {
		t.Fatal("state changed across the restart")
	}
	b, _ := nd.c.Image().Broker(1)
	if b.Epoch != epoch || b.Rack != "r1" || nd.c.Image().Topic("orders").Configs["retention.ms"] != "2000" ||
		len(nd.c.Image().Topic("orders").Partitions) != 5 {
		t.Fatalf("after restart: broker %+v, topic %+v", b, nd.c.Image().Topic("orders"))
	}
	// A second node on the same directory fails instead of hanging.
	cfg := nd.cfg
	if !local {
		cfg.Listener = listen(t)
	}
	if c2, err := Open(cfg); err == nil {
		c2.Close()
		t.Fatal("second Open on one directory succeeded")
	}
}

func TestThreeVoters(t *testing.T) {
	nodes := newCluster(t, 3, nil)
	ctx := ctxTimeout(t, 40*time.Second)
	leader := waitLeader(t, nodes, 10*time.Second)
	for _, nd := range nodes {
		if err := nd.c.RegisterAndHeartbeat(ctx, BrokerInfo{ID: nd.cfg.NodeID, Addr: fmt.Sprintf("127.0.0.1:%d", 9090+nd.cfg.NodeID)}); err != nil {
			t.Fatal(err)
		}
	}
	waitImage(t, leader.c, 10*time.Second, "three live brokers", func(img *Image) bool {
		return len(liveBrokers(img)) == 3
	})

	// Writes from every node; each sees its own write when the call returns.
	for _, nd := range nodes {
		name := fmt.Sprintf("from-%d", nd.cfg.NodeID)
		if _, err := nd.c.CreateTopic(ctx, CreateTopicRequest{Name: name, Partitions: 3, ReplicationFactor: 3}); err != nil {
			t.Fatalf("node %d: %v", nd.cfg.NodeID, err)
		}
		if nd.c.Image().Topic(name) == nil {
			t.Fatalf("node %d does not see its write", nd.cfg.NodeID)
		}
	}
	var follower *testNode
	for _, nd := range nodes {
		if nd != leader {
			follower = nd
		}
	}
	for _, who := range []*testNode{leader, follower} {
		var lat []time.Duration
		for i := range 10 {
			start := time.Now()
			if _, err := who.c.CreateTopic(ctx, CreateTopicRequest{Name: fmt.Sprintf("lat-%d-%d", who.cfg.NodeID, i),
				Partitions: 1, ReplicationFactor: 3}); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		role := "leader"
		if who == follower {
			role = "follower (forwarded)"
		}
		t.Logf("metric: CreateTopic on 3 voters from the %s: p50 %v, max %v", role, percentile(lat, 0.5), percentile(lat, 1))
	}
	if _, err := follower.c.CreateTopic(ctx, CreateTopicRequest{Name: "too-wide", Partitions: 1, ReplicationFactor: 4}); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Fatalf("forwarded error: %v", err)
	}
	for _, nd := range nodes {
		if err := nd.c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := topicsState(leader.c.Image())
	for _, nd := range nodes {
		if !bytes.Equal(topicsState(nd.c.Image()), want) {
			t.Fatalf("node %d has other topics", nd.cfg.NodeID)
		}
	}

	// Crash the leader (no leadership transfer).
	old := leader
	old.c.transferOnClose = false
	start := time.Now()
	old.close(t)
	leader = waitLeader(t, nodes, 10*time.Second)
	t.Logf("metric: new raft leader %v after the old one crashed (election timeout %v)", time.Since(start), old.cfg.ElectionTimeout)
	if !bytes.Equal(topicsState(leader.c.Image()), want) {
		t.Fatal("state lost with the old leader")
	}
	// Writes continue from both remaining nodes (RF 2: the dead node's
	// broker may be fenced by now).
	for _, nd := range nodes {
		if nd.c == nil {
			continue
		}
		if _, err := nd.c.CreateTopic(ctx, CreateTopicRequest{Name: fmt.Sprintf("after-%d", nd.cfg.NodeID), Partitions: 2, ReplicationFactor: 2}); err != nil {
			t.Fatalf("node %d after failover: %v", nd.cfg.NodeID, err)
		}
	}

	// The old node rejoins on the same directory and address and catches up.
	old.open(t)
	if err := old.c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := leader.c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.c.WaitApplied(ctx, leader.c.Image().Index); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(topicsState(old.c.Image()), topicsState(leader.c.Image())) {
		t.Fatal("rejoined node did not catch up")
	}
	if old.c.LeaderID() != leader.cfg.NodeID {
		t.Fatalf("rejoined node sees leader %d, not %d", old.c.LeaderID(), leader.cfg.NodeID)
	}

	// A clean Close of the leader hands leadership over first.
	start = time.Now()
	gone := leader
	gone.close(t)
	leader = waitLeader(t, nodes, 10*time.Second)
	t.Logf("metric: new raft leader %v after a clean Close of the old one (leadership transfer)", time.Since(start))
	if _, err := leader.c.CreateTopic(ctx, CreateTopicRequest{Name: "after-transfer", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	_ = gone
}

func TestFencing(t *testing.T) {
	const session = 800 * time.Millisecond
	nodes := newCluster(t, 1, func(cfg *Config) { cfg.BrokerSessionTimeout = session })
	c := nodes[0].c
	ctx := ctxTimeout(t, 30*time.Second)
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	loops := map[int32]context.CancelFunc{}
	for id := int32(1); id <= 3; id++ {
		lctx, cancel := context.WithCancel(ctx)
		loops[id] = cancel
		if err := c.RegisterAndHeartbeat(lctx, BrokerInfo{ID: id, Addr: fmt.Sprintf("127.0.0.1:%d", 9090+id)}); err != nil {
			t.Fatal(err)
		}
	}
	waitImage(t, c, 5*time.Second, "three live brokers", func(img *Image) bool { return len(liveBrokers(img)) == 3 })
	mk := func(name string, configs map[string]string, as ...[]int32) {
		t.Helper()
		if _, err := c.CreateTopic(ctx, CreateTopicRequest{Name: name, Partitions: -1, ReplicationFactor: -1, Assignments: as, Configs: configs}); err != nil {
			t.Fatal(err)
		}
	}
	mk("t", nil, []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2})
	mk("solo", nil, []int32{1})
	mk("clean", nil, []int32{1, 2})
	mk("dirty", map[string]string{configUncleanLeaderElection: "true"}, []int32{1, 2})
	// Broker 2 fell behind on clean and dirty: their ISR is the leader alone.
	b1, _ := c.Image().Broker(1)
	for _, name := range []string{"clean", "dirty"} {
		p, _ := c.Image().Partition(name, 0)
		if _, err := c.AlterPartition(ctx, AlterPartitionRequest{Topic: name, BrokerID: 1, BrokerEpoch: b1.Epoch,
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int32{1}}); err != nil {
			t.Fatal(err)
		}
	}

	// Broker 1 goes silent.
	loops[1]()
	start := time.Now()
	waitImage(t, c, session+5*time.Second, "broker 1 fenced", func(img *Image) bool {
		b, _ := img.Broker(1)
		return b.Fenced
	})
	fencedAfter := time.Since(start)
	t.Logf("metric: broker fenced %v after its last heartbeat loop stopped (session %v)", fencedAfter, session)
	if fencedAfter < session-2*nodes[0].cfg.BrokerHeartbeatInterval {
		t.Fatalf("fenced after %v, before the %v session expired", fencedAfter, session)
	}
	img := c.Image()
	check := func(img *Image, name string, i int32, leader int32, isr []int32, leaderEpoch int32) {
		t.Helper()
		p, _ := img.Partition(name, i)
		if p.Leader != leader || !slices.Equal(p.ISR, isr) || p.LeaderEpoch != leaderEpoch {
			t.Fatalf("%s-%d: leader %d ISR %v leader epoch %d; want %d %v %d", name, i, p.Leader, p.ISR, p.LeaderEpoch, leader, isr, leaderEpoch)
		}
	}
	check(img, "t", 0, 2, []int32{2, 3}, 1) // led by 1: moved to the next ISR member
	check(img, "t", 1, 2, []int32{2, 3}, 0) // followed by 1: ISR shrank only
	check(img, "t", 2, 3, []int32{3, 2}, 0)
	check(img, "solo", 0, -1, []int32{1}, 1)  // no other replica
	check(img, "clean", 0, -1, []int32{1}, 1) // 2 is live but not in the ISR: unclean is off
	check(img, "dirty", 0, 2, []int32{2}, 1)  // unclean on: 2 leads
	// The others still heartbeat: nobody else is fenced.
	if len(liveBrokers(img)) != 2 {
		t.Fatalf("live brokers %v", liveBrokers(img))
	}

	// Broker 1 heartbeats again with its epoch: unfenced, and the
	// partitions whose ISR it is regain it as leader.
	b1, _ = img.Broker(1)
	if err := c.heartbeat(ctx, 1, b1.Epoch); err != nil {
		t.Fatal(err)
	}
	img = c.Image()
	if b, _ := img.Broker(1); b.Fenced {
		t.Fatal("heartbeat did not unfence")
	}
	check(img, "solo", 0, 1, []int32{1}, 2)
	check(img, "clean", 0, 1, []int32{1}, 2)
	check(img, "t", 0, 2, []int32{2, 3}, 1) // no automatic move back (rebalance is off here)
	if err := c.heartbeat(ctx, 1, b1.Epoch-1); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("stale heartbeat: %v", err)
	}
	if err := c.heartbeat(ctx, 9, 1); !errors.Is(err, ErrBrokerIDNotRegistered) {
		t.Fatalf("unknown broker heartbeat: %v", err)
	}

	// Broker 1 keeps heartbeating from now on: on a loaded machine the
	// session (800 ms) can pass before the election below, which then
	// finds 1 fenced again (a race-step run did).
	hbCtx, hbStop := context.WithCancel(ctx)
	loops[1] = hbStop
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-tick.C:
				_ = c.heartbeat(hbCtx, 1, b1.Epoch)
			}
		}
	}()

	// The leader of t-0 takes 1 back into the ISR; a preferred election
	// then gives 1 its leadership back.
	b2, _ := img.Broker(2)
	p, _ := img.Partition("t", 0)
	np, err := c.AlterPartition(ctx, AlterPartitionRequest{Topic: "t", BrokerID: 2, BrokerEpoch: b2.Epoch,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int32{2, 3, 1}})
	if err != nil || !slices.Equal(np.ISR, []int32{1, 2, 3}) || np.PartitionEpoch != p.PartitionEpoch+1 {
		t.Fatalf("AlterPartition: %v %+v", err, np)
	}
	// The same request again carries a stale partition epoch.
	if _, err := c.AlterPartition(ctx, AlterPartitionRequest{Topic: "t", BrokerID: 2, BrokerEpoch: b2.Epoch,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int32{2, 3, 1}}); !errors.Is(err, ErrInvalidUpdateVersion) {
		t.Fatalf("replayed AlterPartition: %v", err)
	}
	res, err := c.ElectPreferredLeaders(ctx, []TopicPartition{{"t", 0}, {"t", 1}})
	if err != nil || res[TopicPartition{"t", 0}] != nil || !errors.Is(res[TopicPartition{"t", 1}], ErrElectionNotNeeded) {
		t.Fatalf("elect: %v %v", err, res)
	}
	check(c.Image(), "t", 0, 1, []int32{1, 2, 3}, 2)
	for _, cancel := range loops {
		cancel()
	}
}

func TestAutomaticPreferredLeaderRebalance(t *testing.T) {
	nodes := newCluster(t, 1, func(cfg *Config) {
		cfg.BrokerSessionTimeout = time.Minute
		cfg.LeaderRebalanceInterval = 200 * time.Millisecond
	})
	c := nodes[0].c
	ctx := ctxTimeout(t, 20*time.Second)
	var epochs []int64
	for id := int32(1); id <= 2; id++ {
		e, err := c.RegisterBroker(ctx, BrokerInfo{ID: id, Addr: "h:1"})
		if err != nil {
			t.Fatal(err)
		}
		epochs = append(epochs, e)
	}
	if _, err := c.CreateTopic(ctx, CreateTopicRequest{Name: "t", Partitions: -1, ReplicationFactor: -1, Assignments: [][]int32{{1, 2}}}); err != nil {
		t.Fatal(err)
	}
	// Registering broker 1 again fences its old incarnation: 2 leads.
	if _, err := c.RegisterBroker(ctx, BrokerInfo{ID: 1, Addr: "h:1"}); err != nil {
		t.Fatal(err)
	}
	p, _ := c.Image().Partition("t", 0)
	if p.Leader != 2 {
		t.Fatalf("leader %d after re-registration", p.Leader)
	}
	if _, err := c.AlterPartition(ctx, AlterPartitionRequest{Topic: "t", BrokerID: 2, BrokerEpoch: epochs[1],
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	waitImage(t, c, 5*time.Second, "leadership back on the preferred replica", func(img *Image) bool {
		p, _ := img.Partition("t", 0)
		return p.Leader == 1
	})
}

func TestControllerPortRejectsGarbage(t *testing.T) {
	nodes := newCluster(t, 1, nil)
	c := nodes[0].c
	addr := nodes[0].cfg.Voters[0].Addr
	ctx := ctxTimeout(t, 20*time.Second)
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		return conn
	}
	// A well-framed request with an undecodable command: INVALID_REQUEST.
	conn := dial()
	conn.Write([]byte{rpcMagic})
	writeFrame(conn, []byte{0, 0, 1, 0, 9, 9, 9})
	body, err := readFrame(conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeResponse(body); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("garbage command answered with %v", err)
	}
	// Fence and unfence are the leader's own decisions.
	writeFrame(conn, encodeRequest(time.Second, (&command{typ: cmdFenceBroker, brokerID: 1, epoch: 1}).encode()))
	if body, err = readFrame(conn); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeResponse(body); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("forwarded fence answered with %v", err)
	}
	// An oversized frame closes the connection without reading it.
	conn.Write([]byte{0xff, 0xff, 0xff, 0xff})
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection still open after an oversized frame")
	}
	conn.Close()
	// Raft's side gets garbage too: raft drops the connection.
	conn = dial()
	conn.Write([]byte{0, 0xc1, 0xc1, 0xc1})
	conn.Read(make([]byte, 1))
	conn.Close()
	// A silent connection is not a problem either, and the node still works.
	silent := dial()
	defer silent.Close()
	if _, err := c.CreateTopic(ctx, CreateTopicRequest{Name: "still-fine", Partitions: 1, ReplicationFactor: 1}); !errors.Is(err, ErrInvalidReplicationFactor) {
		t.Fatalf("after garbage: %v", err)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestParseVotersAndConfig(t *testing.T) {
	vs, err := ParseVoters("1@127.0.0.1:9093, 2@host-b:9093,3@[::1]:9093")
	if err != nil || len(vs) != 3 || vs[1] != (Voter{2, "host-b:9093"}) || vs[2].Addr != "[::1]:9093" {
		t.Fatalf("%v %v", vs, err)
	}
	for _, bad := range []string{"", "1", "x@h:1", "1@h", "1@h:1,1@h:2", "-1@h:1"} {
		if _, err := ParseVoters(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	for name, cfg := range map[string]Config{
		"no dir":       {NodeID: 1, Voters: vs},
		"not a voter":  {NodeID: 9, Voters: vs, Dir: "x"},
		"no voters":    {NodeID: 1, Dir: "x"},
		"hb > session": {NodeID: 1, Voters: vs, Dir: "x", BrokerHeartbeatInterval: time.Minute},
		"no address":   {NodeID: 1, Voters: []Voter{{ID: 1}, {ID: 2, Addr: "h:1"}}, Dir: "x"},
	} {
		if _, err := Open(cfg); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}

func TestMain(m *testing.M) {
	os.Exit(m.Run())
}

// TestControlledShutdown: a broker that asks is fenced at once (its
// leaderships move), a heartbeat of that incarnation still in flight does
// not unfence it, and its next incarnation registers as usual.
func TestControlledShutdown(t *testing.T) {
	nodes := newCluster(t, 1, func(cfg *Config) {
		cfg.BrokerSessionTimeout = time.Minute
		cfg.Listener.Close()
		cfg.Listener, cfg.Voters, cfg.ElectionTimeout = nil, LocalQuorum(1), 0
	})
	c := nodes[0].c
	ctx := ctxTimeout(t, 20*time.Second)
	if _, err := c.RegisterBroker(ctx, BrokerInfo{ID: 1, Addr: "h:1"}); err != nil {
		t.Fatal(err)
	}
	e2, err := c.RegisterBroker(ctx, BrokerInfo{ID: 2, Addr: "h:2"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, CreateTopicRequest{Name: "t", Assignments: [][]int32{{2, 1}}, Partitions: -1, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ControlledShutdown(ctx, 2, e2-1); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("controlled shutdown of an older incarnation: %v", err)
	}
	index, err := c.ControlledShutdown(ctx, 2, e2)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitApplied(ctx, index); err != nil {
		t.Fatal(err)
	}
	if b, _ := c.Image().Broker(2); !b.Fenced {
		t.Fatal("broker 2 not fenced after its controlled shutdown")
	}
	wantPartition(t, "t-0", c.Image().Topic("t").Partitions[0], 1, []int32{1}, 1, 1)
	if err := c.heartbeat(ctx, 2, e2); err != nil {
		t.Fatal(err)
	}
	if b, _ := c.Image().Broker(2); !b.Fenced {
		t.Fatal("a heartbeat of the stopped incarnation unfenced it")
	}
	e2b, err := c.RegisterBroker(ctx, BrokerInfo{ID: 2, Addr: "h:2"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := c.Image().Broker(2); b.Fenced || b.Epoch != e2b {
		t.Fatalf("broker 2 after registering again: %+v", b)
	}
}
