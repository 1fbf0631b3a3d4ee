//go:build linux

package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"ringlog/internal/testkit"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/ioring"
	"ringlog/netpoll"
)

// TestUringShardsRingFailureStopsListener: connections on the shards'
// rings (-net uring-shards), and one shard's ring fails under them (closed
// on its thread, so that its io_uring_enter fails as a broken ring's
// would). As on netpoll's own loops (-net uring), the connections on it
// are closed, the listener stops and Failed reports it, so that the
// binary exits; the broker closes without waiting for that ring. Before,
// the shard logged the failure on every turn and its connections hung.
func TestUringShardsRingFailureStopsListener(t *testing.T) {
	if why := ioring.ProbeOwner(); why != "" {
		t.Fatalf("io_uring ring owners unavailable: %s", why)
	}
	cfg := testConfig(t, t.TempDir())
	cfg.IO, cfg.Network = ioring.ModeUring, netpoll.IOUringShards
	b := start(t, cfg)
	closeAtEnd := false // a broker whose loop hangs would hang its Close
	defer func() {
		if closeAtEnd {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := b.Close(ctx); err != nil {
				t.Errorf("close: %v", err)
			}
		}
	}()
	if got := b.Network().IO(); got != netpoll.IOUringShards {
		t.Fatalf("serving on %s, want %s", got, netpoll.IOUringShards)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("before")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// Idle connections, served once: spread over both shards' rings.
	var conns []net.Conn
	for range 6 {
		nc, err := net.Dial("tcp", b.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		apiVersionsV0(t, nc)
		conns = append(conns, nc)
	}
	failed := b.Failed()
	owners := b.Engine().RingOwners()
	if len(owners) != 2 {
		t.Fatalf("%d ring owners", len(owners))
	}
	o := owners[0]
	if err := o.Post(func() { _ = o.Ring().Close() }); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-failed:
		if !errors.Is(err, netpoll.ErrEngineStopped) {
			t.Fatalf("Failed: %v, want ErrEngineStopped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a shard's ring failed and the listener still looks alive")
	}
	closeAtEnd = true
	closed := 0
	for _, nc := range conns {
		_ = nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := nc.Read(make([]byte, 1))
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			closed++ // EOF or reset: closed by the broker, not idle
		}
	}
	if closed == 0 {
		t.Fatal("no connection was closed after the ring that served it failed")
	}
	if nc, err := net.DialTimeout("tcp", b.Addr(), time.Second); err == nil {
		nc.Close()
		t.Fatal("the listener still accepts after a shard's ring failed")
	}
}

// apiVersionsV0 sends ApiVersions v0 on nc and reads the answer whole.
func apiVersionsV0(t *testing.T, nc net.Conn) {
	t.Helper()
	// size, api key 18, version 0, correlation id 1, null client id
	req := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff}
	if _, err := nc.Write(req); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(nc, make([]byte, binary.BigEndian.Uint32(size[:]))); err != nil {
		t.Fatal(err)
	}
}

// TestUringShardsFlushAlwaysOneRing: connections on the shards' rings
// (-net uring-shards) and the flush policy always. Each shard holds one
// io_uring ring, which carries its connections, doorbells and disk I/O
// (before, a disk ring beside it: two per shard), and a kgo produce is
// acknowledged only after its fdatasync completed on the owner's ring
// (the owners count their syncs' completions before the round answers).
func TestUringShardsFlushAlwaysOneRing(t *testing.T) {
	if why := ioring.ProbeOwner(); why != "" {
		t.Fatalf("io_uring ring owners unavailable: %s", why)
	}
	before := testkit.IORings(t)
	cfg := testConfig(t, t.TempDir())
	cfg.Topic.Log.FlushMessages = 1 // flush policy always, as -flush always sets it
	b := startUringNet(t, cfg, netpoll.IOUringShards, netpoll.IOUringShards)
	owners := b.Engine().RingOwners()
	if len(owners) != cfg.Shards {
		t.Fatalf("%d ring owners for %d shards", len(owners), cfg.Shards)
	}
	if got := testkit.IORings(t) - before; got != len(owners) {
		t.Fatalf("a broker of %d shards on their rings holds %d io_uring rings, want one per shard", len(owners), got)
	}
	syncs := func() (n int64) {
		for _, o := range owners {
			n += o.Stats().DiskSyncs
		}
		return n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 20 {
		was := syncs()
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if now := syncs(); now <= was {
			t.Fatalf("produce %d acknowledged with %d syncs completed on the shards' rings, %d before it was sent", i, now, was)
		}
	}
	if got := testkit.IORings(t) - before; got != len(owners) {
		t.Fatalf("after producing, %d io_uring rings for %d shards", got, len(owners))
	}
}

// TestDefaultNetworkOnShardsRings: on the io_uring disk path the network
// path left empty, or asked as uring, puts the connections on the
// shards' rings (uring-shards), and a kgo client produces and reads
// back through them; uring-loops serves them on io_uring loops of
// netpoll's own (reported as uring).
func TestDefaultNetworkOnShardsRings(t *testing.T) {
	if why := ioring.ProbeOwner(); why != "" {
		t.Fatalf("io_uring ring owners unavailable: %s", why)
	}
	for _, tc := range []struct{ network, want string }{
		{"", netpoll.IOUringShards},
		{netpoll.IOUring, netpoll.IOUringShards},
		{netpoll.IOUringLoops, netpoll.IOUring},
	} {
		t.Run("net="+tc.network, func(t *testing.T) {
			b := startUringNet(t, testConfig(t, t.TempDir()), tc.network, tc.want)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation(),
				kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := cl.ProduceSync(ctx, kgo.StringRecord("a"), kgo.StringRecord("b")).FirstErr(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for len(got) < 2 && ctx.Err() == nil {
				cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			}
			if fmt.Sprint(got) != "[a b]" {
				t.Fatalf("read back %v, want [a b]", got)
			}
		})
	}
}

// startUringNet starts a broker of cfg on the io_uring disk path with the
// network path network, closed at the test's end, and fails the test
// unless it serves on want (netpoll's Server.IO).
func startUringNet(t *testing.T, cfg Config, network, want string) *Broker {
	t.Helper()
	cfg.IO, cfg.Network = ioring.ModeUring, network
	b := start(t, cfg)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if got := b.Network().IO(); got != want {
		t.Fatalf("serving on %s, want %s", got, want)
	}
	return b
}
