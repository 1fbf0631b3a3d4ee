package kafka

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/ioring"
	"ringlog/netpoll"
)

// testBroker is a real broker on 127.0.0.1: engine, protocol, network.
type testBroker struct {
	t      testing.TB
	Addr   string
	Engine *engine.Engine
	Server *Server
	Net    *netpoll.Server
	Groups *group.Coordinator
	dir    string
	opts   brokerOpts
}

type brokerOpts struct {
	// Portable uses the portable I/O path and the standard net package.
	Portable bool
	// Dir reuses a data directory (restarts); empty means a new one.
	Dir string
	// Engine, Kafka and Groups adjust the configurations before start.
	Engine func(*engine.Config)
	Kafka  func(*Config)
	Groups func(*group.Config)
}

// startBroker starts a broker and stops it at the end of the test.
func startBroker(t testing.TB, opts brokerOpts) *testBroker {
	t.Helper()
	b := &testBroker{t: t, opts: opts, dir: opts.Dir}
	if b.dir == "" {
		b.dir = t.TempDir()
	}
	b.start()
	t.Cleanup(b.Stop)
	return b
}

func (b *testBroker) start() {
	t := b.t
	ecfg := engine.Config{Dir: b.dir, Shards: 2, IO: ioring.ModeAuto}
	if b.opts.Portable {
		ecfg.IO = ioring.ModePortable
	}
	if b.opts.Engine != nil {
		b.opts.Engine(&ecfg)
	}
	e, err := engine.Open(ecfg)
	if err != nil {
		t.Fatal(err)
	}
	// Kafka's group defaults but for the initial rebalance delay, which
	// would add 3 s to every test's first rebalance.
	gcfg := group.DefaultConfig()
	gcfg.InitialRebalanceDelay = 0
	// 4 partitions of __consumer_offsets rather than 50: a broker starts
	// in a tenth of the time, and the tests start hundreds.
	gcfg.OffsetsTopicPartitions = 4
	if b.opts.Groups != nil {
		b.opts.Groups(&gcfg)
	}
	groups, err := group.Start(e, gcfg)
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	// Bind first to learn the port, then build the server that tells
	// clients that port. The server is installed complete: setting its port
	// after it serves would race with the handlers reading it.
	kcfg := Config{NodeID: ecfg.NodeID, AdvertisedHost: "127.0.0.1", AutoCreateTopics: true, Groups: groups}
	if b.opts.Kafka != nil {
		b.opts.Kafka(&kcfg)
	}
	addr := "127.0.0.1:0"
	if b.Addr != "" {
		addr = b.Addr // a restart keeps the port
	}
	h := &lateHandler{}
	ns, err := netpoll.Listen(netpoll.Config{Addr: addr, Portable: b.opts.Portable}, h)
	if err != nil {
		groups.Close()
		e.Close()
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ns.Addr().String())
	p, _ := strconv.Atoi(port)
	kcfg.AdvertisedPort = int32(p)
	srv := NewServer(kcfg, e)
	h.srv.Store(srv)
	b.Addr, b.Engine, b.Server, b.Net, b.Groups = ns.Addr().String(), e, srv, ns, groups
	// Tests that send raw requests want exact codes: let __consumer_offsets
	// replay before they start (clients would retry
	// COORDINATOR_LOAD_IN_PROGRESS; engine/group tests that code).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := groups.WaitLoaded(ctx); err != nil {
		t.Fatalf("group coordinator: %v", err)
	}
}

// Stop closes the network (answering what is in flight) and the engine.
func (b *testBroker) Stop() {
	if b.Net == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Long-polling fetches would hold the graceful close for max_wait_ms,
	// and parked JoinGroup requests for a rebalance timeout.
	b.Server.StopLongPolls()
	b.Groups.Close()
	if err := b.Net.Close(ctx); err != nil {
		b.t.Errorf("close network: %v", err)
	}
	if err := b.Engine.Close(); err != nil {
		b.t.Errorf("close engine: %v", err)
	}
	b.Net, b.Engine = nil, nil
}

// Restart stops and starts the broker on the same port and data.
func (b *testBroker) Restart() {
	b.Stop()
	b.start()
}

// client returns a kgo client for the broker, closed at the end of the test.
func (b *testBroker) client(opts ...kgo.Opt) *kgo.Client {
	b.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr)}, opts...)...)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(cl.Close)
	return cl
}

func (b *testBroker) admin() *kadm.Client {
	return kadm.NewClient(b.client())
}

// userTopics leaves out the internal topics (__consumer_offsets, which the
// group coordinator creates on every broker).
func userTopics(ts []engine.TopicInfo) []engine.TopicInfo {
	var out []engine.TopicInfo
	for _, t := range ts {
		if t.Name != group.OffsetsTopic {
			out = append(out, t)
		}
	}
	return out
}

// lateHandler serves with a Server installed once the listener's port is
// known.
type lateHandler struct{ srv atomic.Pointer[Server] }

func (h *lateHandler) Serve(c *netpoll.Conn, seq uint64, frame []byte) {
	if s := h.srv.Load(); s != nil {
		s.Serve(c, seq, frame)
		return
	}
	c.Close()
}

func (h *lateHandler) Closed(c *netpoll.Conn) {
	if s := h.srv.Load(); s != nil {
		s.Closed(c)
	}
}
