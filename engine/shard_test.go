package engine

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ringlog/internal/procs"
	"ringlog/ioring"
)

// TestShardCalls: do returns its function's error from the shard
// goroutine, start keeps calls on every shard in flight at once, and post
// runs its function without waiting for it.
func TestShardCalls(t *testing.T) {
	e := openEngine(t, t.TempDir(), ioring.ModePortable)
	defer e.Close()
	want := errors.New("from the shard")
	s := e.shards[0]
	if err := s.do(func() error { return want }); err != want {
		t.Fatalf("do: %v, want %v", err, want)
	}
	var calls []shardCall
	for i, s := range e.shards {
		calls = append(calls, s.start(func() error {
			if i == 1 {
				return want
			}
			return nil
		}))
	}
	if err := calls[0].wait(); err != nil {
		t.Fatalf("start on shard 0: %v", err)
	}
	if err := calls[1].wait(); err != want {
		t.Fatalf("start on shard 1: %v, want %v", err, want)
	}
	ran := make(chan struct{})
	if err := s.post(func() { close(ran) }); err != nil {
		t.Fatal(err)
	}
	<-ran
}

// TestShardCallsAfterStop: once the engine closed, every kind of call
// answers ErrClosed and its function does not run.
func TestShardCallsAfterStop(t *testing.T) {
	e := openEngine(t, t.TempDir(), ioring.ModePortable)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	s := e.shards[0]
	ran := false
	if err := s.post(func() { ran = true }); !errors.Is(err, ErrClosed) {
		t.Fatalf("post: %v", err)
	}
	if err := s.do(func() error { ran = true; return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("do: %v", err)
	}
	if err := s.start(func() error { ran = true; return nil }).wait(); !errors.Is(err, ErrClosed) {
		t.Fatalf("start: %v", err)
	}
	if ran {
		t.Fatal("a call ran on a stopped shard")
	}
}

// TestShardCallQueuedBehindStop: a call that entered the inbox but that
// the shard never took (it stopped first) answers ErrClosed instead of
// waiting forever, and a call waiting for room in a full inbox gives up
// when the shard stops. Neither shard here ever runs.
func TestShardCallQueuedBehindStop(t *testing.T) {
	s := &shard{inbox: make(chan shardMsg, 1), done: make(chan struct{})}
	queued := s.start(func() error { return nil }) // takes the only slot
	blocked := make(chan error, 1)
	go func() { blocked <- s.post(func() {}) }()
	select {
	case err := <-blocked:
		t.Fatalf("post into a full inbox returned %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(s.done)
	if err := queued.wait(); !errors.Is(err, ErrClosed) {
		t.Fatalf("queued call: %v", err)
	}
	if err := <-blocked; !errors.Is(err, ErrClosed) {
		t.Fatalf("blocked post: %v", err)
	}
}

// TestAppendRacingCloseIsAnswered: every Append made while the engine
// closes gets its done callback (written, or ErrClosed). One sent into the
// inbox after the shard stopped reading it was left there, its caller
// waiting forever (found by a race run of TestEmbedAfterClose).
func TestAppendRacingCloseIsAnswered(t *testing.T) {
	batch := mkBatch(t, 1, "v", 1, -1, -1, -1)
	for round := range 50 {
		e := openEngine(t, t.TempDir(), ioring.ModePortable)
		e.CreateTopic("t", 2, -1, nil, false)
		var sent, answered atomic.Int64
		var closed atomic.Bool
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Until an append is refused for the close: the last ones
				// race the shards' stop.
				for !closed.Load() {
					sent.Add(1)
					// Append rewrites the batch's header in place: each
					// call gets its own copy.
					e.Append(TP{"t", int32(g % 2)}, bytes.Clone(batch), AppendOptions{}, func(_ AppendResult, err error) {
						answered.Add(1)
						if errors.Is(err, ErrClosed) {
							closed.Store(true)
						}
					})
				}
			}()
		}
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		e.Close()
		closed.Store(true)
		wg.Wait()
		deadline := time.Now().Add(10 * time.Second)
		for answered.Load() != sent.Load() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d appends sent, %d answered", round, sent.Load(), answered.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// TestDefaultShardsIgnoreAddedProcs: the default shard count is the
// machine's CPUs (GOMAXPROCS without the Ps that uring loops of other
// brokers in the process added), not the raised GOMAXPROCS.
func TestDefaultShardsIgnoreAddedProcs(t *testing.T) {
	base := procs.Base()
	procs.Add()
	procs.Add()
	defer procs.Release()
	defer procs.Release()
	e, err := OpenCore(Config{Dir: t.TempDir(), IO: ioring.ModePortable})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if len(e.shards) != base {
		t.Fatalf("%d shards by default with 2 Ps added to %d, want %d", len(e.shards), base, base)
	}
}

// TestDirectShardsAddProcs: a shard whose appends are direct writes on
// the io_uring path waits in io_uring_enter for each round, and counts a
// P of its own while it runs (given back when the engine closes); with
// buffered writes, or on the portable path, it waits in a select and
// counts none.
func TestDirectShardsAddProcs(t *testing.T) {
	for _, c := range []struct {
		name   string
		io     ioring.Mode
		writes Writes
		want   int
	}{
		{"uring-direct", ioring.ModeUring, WritesDirect, 2},
		{"uring-buffered", ioring.ModeUring, WritesBuffered, 0},
		{"portable-direct", ioring.ModePortable, WritesDirect, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := procs.Added()
			e, err := OpenCore(Config{Dir: t.TempDir(), IO: c.io, Writes: c.writes, Shards: 2})
			if err != nil {
				t.Fatal(err)
			}
			// Two partitions, one on each shard (shardFor): each shard
			// opened one in its loop, after it counted its P or not.
			if _, err := e.CreateTopic("p", 2, 1, nil, false); err != nil {
				t.Fatal(err)
			}
			if got := procs.Added() - before; got != c.want {
				t.Errorf("%d Ps added by 2 shards, want %d", got, c.want)
			}
			e.Close()
			if got := procs.Added(); got != before {
				t.Errorf("%d Ps added after Close, want %d", got, before)
			}
		})
	}
}
