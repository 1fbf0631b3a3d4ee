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
	dir    string
	opts   brokerOpts
}

type brokerOpts struct {
	// Portable uses the portable I/O path and the standard net package.
	Portable bool
	// Dir reuses a data directory (restarts); empty means a new one.
	Dir string
	// Engine and Kafka adjust the configurations before start.
	Engine func(*engine.Config)
	Kafka  func(*Config)
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
	// Bind first to learn the port, then build the server that tells
	// clients that port. The server is installed complete: setting its port
	// after it serves would race with the handlers reading it.
	kcfg := Config{NodeID: ecfg.NodeID, AdvertisedHost: "127.0.0.1", AutoCreateTopics: true}
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
		e.Close()
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ns.Addr().String())
	p, _ := strconv.Atoi(port)
	kcfg.AdvertisedPort = int32(p)
	srv := NewServer(kcfg, e)
	h.srv.Store(srv)
	b.Addr, b.Engine, b.Server, b.Net = ns.Addr().String(), e, srv, ns
}

// Stop closes the network (answering what is in flight) and the engine.
func (b *testBroker) Stop() {
	if b.Net == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Long-polling fetches would hold the graceful close for max_wait_ms.
	b.Server.StopLongPolls()
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
