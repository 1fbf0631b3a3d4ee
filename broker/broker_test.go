package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/fsutil"
)

func testConfig(t *testing.T, dir string) Config {
	cfg := DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.Shards = "127.0.0.1:0", dir, 2
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Groups.OffsetsTopicPartitions = 2
	return cfg
}

func start(t *testing.T, cfg Config) *Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStartServeCloseRestart: a broker on a free port serves a real client,
// closes cleanly (every log marked), and a broker on the same directory
// finds the records again.
func TestStartServeCloseRestart(t *testing.T) {
	dir := t.TempDir()
	b := start(t, testConfig(t, dir))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	// The port is free again once Close returns.
	ln, err := net.Listen("tcp", b.Addr())
	if err != nil {
		t.Fatalf("port still held after Close: %v", err)
	}
	ln.Close()

	b = start(t, testConfig(t, dir))
	defer b.Close(ctx)
	if clean, recovered := b.Engine().OpenStats(); recovered != 0 || clean == 0 {
		t.Fatalf("restart after Close: %d logs clean, %d recovered", clean, recovered)
	}
	cl, err = kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for read := 0; read < 10; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		read += fs.NumRecords()
	}
}

// TestStartFailureUnwinds: a start that fails half way (the data directory
// is held by another broker) releases what it opened, and a start that
// cannot reach its quorum gives up when its context ends.
func TestStartFailureUnwinds(t *testing.T) {
	dir := t.TempDir()
	first := start(t, testConfig(t, dir))
	defer first.Close(context.Background())
	_, err := Start(context.Background(), testConfig(t, dir))
	if !errors.Is(err, fsutil.ErrDirLocked) {
		t.Fatalf("second broker on one directory: %v", err)
	}

	// A voter list whose other voters never answer: no quorum.
	cfg := testConfig(t, t.TempDir())
	ports := make([]string, 3)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = ln.Addr().String()
		ln.Close()
	}
	cfg.NodeID = 1
	cfg.Cluster.Voters = fmt.Sprintf("1@%s,2@%s,3@%s", ports[0], ports[1], ports[2])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	begin := time.Now()
	_, err = Start(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "metadata quorum") {
		t.Fatalf("start without a quorum: %v", err)
	}
	if waited := time.Since(begin); waited > 20*time.Second {
		t.Fatalf("start without a quorum returned after %v", waited)
	}
	// Everything it opened is closed: the data directory's lock and the
	// controller's port are free again.
	unlock, err := fsutil.LockDir(cfg.DataDir)
	if err != nil {
		t.Fatalf("directory not released by the failed start: %v", err)
	}
	unlock()
	ln, err := net.Listen("tcp", ports[0])
	if err != nil {
		t.Fatalf("controller port not released by the failed start: %v", err)
	}
	ln.Close()
}
