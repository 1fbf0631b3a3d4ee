package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"ringlog/engine"
)

func openStore(t *testing.T, dir string, opts *engine.Options) *engine.Engine {
	t.Helper()
	e, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestEmbedProduceFetchReopen: records produced from several goroutines are
// fetched back with their offsets, keys, values, headers and timestamps,
// also after the engine is reopened, on both I/O paths and flush policies.
func TestEmbedProduceFetchReopen(t *testing.T) {
	for _, opts := range []engine.Options{{IO: engine.IOPortable}, {IO: engine.IOAuto, Flush: engine.FlushAlways}} {
		t.Run(fmt.Sprintf("%s-%d", opts.IO, opts.Flush), func(t *testing.T) {
			dir := t.TempDir()
			e := openStore(t, dir, &opts)
			if err := e.CreateTopic("notes", engine.TopicOptions{Partitions: 2}); err != nil {
				t.Fatal(err)
			}
			if err := e.CreateTopic("notes", engine.TopicOptions{}); !errors.Is(err, engine.ErrTopicExists) {
				t.Fatalf("create twice: %v", err)
			}
			tp := engine.TP{Topic: "notes", Partition: 1}
			stamp := time.UnixMilli(1_700_000_000_000)
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 25 {
						_, err := e.Produce(ctx(t), tp, engine.Record{Key: fmt.Appendf(nil, "g%d", g), Value: fmt.Appendf(nil, "%d-%d", g, i),
							Timestamp: stamp, Headers: []engine.Header{{Key: "h", Value: []byte("v")}}})
						if err != nil {
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			// A Produce of several records: consecutive offsets.
			first, err := e.Produce(ctx(t), tp, engine.Record{Value: []byte("a")}, engine.Record{Value: []byte("b")})
			if err != nil || first != 100 {
				t.Fatalf("produce of two: first offset %d, %v", first, err)
			}
			check := func(e *engine.Engine) {
				t.Helper()
				res, err := e.Fetch(ctx(t), tp, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Records) != 102 || res.Next != 102 || res.End != 102 {
					t.Fatalf("fetched %d records, next %d, end %d", len(res.Records), res.Next, res.End)
				}
				seen := map[string]bool{}
				for i, r := range res.Records {
					if r.Offset != int64(i) {
						t.Fatalf("record %d has offset %d", i, r.Offset)
					}
					seen[string(r.Value)] = true
					if i < 100 && (!r.Timestamp.Equal(stamp) || len(r.Headers) != 1 || r.Headers[0].Key != "h" || string(r.Key) != "g"+string(r.Value[:1])) {
						t.Fatalf("record %d: %+v", i, r)
					}
				}
				if len(seen) != 102 || string(res.Records[101].Value) != "b" {
					t.Fatalf("%d distinct values", len(seen))
				}
				// From inside, at most 3.
				res, err = e.Fetch(ctx(t), tp, 50, 3)
				if err != nil || len(res.Records) != 3 || res.Records[0].Offset != 50 || res.Next != 53 {
					t.Fatalf("fetch 3 from 50: %+v %v", res, err)
				}
				// At the end: nothing, no error; past it: out of range.
				if res, err := e.Fetch(ctx(t), tp, 102, 0); err != nil || len(res.Records) != 0 || res.Next != 102 {
					t.Fatalf("fetch at the end: %+v %v", res, err)
				}
				if _, err := e.Fetch(ctx(t), tp, 103, 0); !errors.Is(err, engine.ErrOffsetOutOfRange) {
					t.Fatalf("fetch past the end: %v", err)
				}
				if _, err := e.Fetch(ctx(t), engine.TP{Topic: "notes", Partition: 2}, 0, 0); !errors.Is(err, engine.ErrUnknownTopicOrPartition) {
					t.Fatalf("fetch of an unknown partition: %v", err)
				}
			}
			check(e)
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			e = openStore(t, dir, &opts)
			defer e.Close()
			check(e)
			if ts, err := e.Topics(); err != nil || len(ts) != 1 || ts[0] != (engine.Topic{Name: "notes", Partitions: 2}) {
				t.Fatalf("topics after reopen: %v %v", ts, err)
			}
		})
	}
}

// TestEmbedSubscription: a subscription hands out what exists, then waits
// for what is produced; it ends with its context, with Close, and when the
// engine closes; unknown partitions and offsets are refused at once.
func TestEmbedSubscription(t *testing.T) {
	e := openStore(t, t.TempDir(), nil)
	e.CreateTopic("t", engine.TopicOptions{})
	tp := engine.TP{Topic: "t"}
	e.Produce(ctx(t), tp, engine.Record{Value: []byte("0")})
	if _, err := e.Subscribe(engine.TP{Topic: "nope"}, 0); !errors.Is(err, engine.ErrUnknownTopicOrPartition) {
		t.Fatalf("subscribe to an unknown partition: %v", err)
	}
	if _, err := e.Subscribe(tp, 5); !errors.Is(err, engine.ErrOffsetOutOfRange) {
		t.Fatalf("subscribe past the end: %v", err)
	}
	s, err := e.Subscribe(tp, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Next(ctx(t)); err != nil || string(r.Value) != "0" {
		t.Fatalf("first: %+v %v", r, err)
	}
	// Nothing new: Next waits, and a produce wakes it.
	got := make(chan engine.Record)
	go func() {
		r, err := s.Next(ctx(t))
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	select {
	case r := <-got:
		t.Fatalf("Next returned %+v before anything was produced", r)
	case <-time.After(50 * time.Millisecond):
	}
	e.Produce(ctx(t), tp, engine.Record{Value: []byte("1")})
	if r := <-got; r.Offset != 1 || string(r.Value) != "1" {
		t.Fatalf("woken with %+v", r)
	}
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with a context that ends: %v", err)
	}
	s.Close()
	if _, err := s.Next(ctx(t)); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}

	// The engine's Close ends a subscription that waits.
	s, _ = e.Subscribe(tp, 2)
	ended := make(chan error, 1)
	go func() { _, err := s.Next(ctx(t)); ended <- err }()
	time.Sleep(20 * time.Millisecond)
	e.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, engine.ErrClosed) {
			t.Fatalf("a waiting Next when the engine closed: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the engine's Close did not end a waiting subscription")
	}
}

// TestEmbedAfterClose: after Close every method says ErrClosed; none
// panics, even racing Close.
func TestEmbedAfterClose(t *testing.T) {
	e := openStore(t, t.TempDir(), nil)
	e.CreateTopic("t", engine.TopicOptions{})
	tp := engine.TP{Topic: "t"}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				e.Produce(context.Background(), tp, engine.Record{Value: []byte("x")})
				e.Fetch(context.Background(), tp, 0, 10)
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	for name, err := range map[string]error{
		"CreateTopic": e.CreateTopic("u", engine.TopicOptions{}),
		"DeleteTopic": e.DeleteTopic("t"),
		"Produce":     second(e.Produce(context.Background(), tp, engine.Record{})),
		"Fetch":       second(e.Fetch(context.Background(), tp, 0, 1)),
		"Subscribe":   second(e.Subscribe(tp, 0)),
		"Topics":      second(e.Topics()),
		"Close":       e.Close(),
	} {
		if name == "Close" {
			if err != nil {
				t.Errorf("a second Close: %v", err)
			}
			continue
		}
		if !errors.Is(err, engine.ErrClosed) {
			t.Errorf("%s after Close: %v", name, err)
		}
	}
	if _, _, err := e.Offsets(tp); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Offsets after Close: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

// TestEmbedDirLocked: a second Open of a directory says ErrDirLocked.
func TestEmbedDirLocked(t *testing.T) {
	dir := t.TempDir()
	e := openStore(t, dir, nil)
	defer e.Close()
	if _, err := engine.Open(dir, nil); !errors.Is(err, engine.ErrDirLocked) {
		t.Fatalf("second Open: %v", err)
	}
}

// TestEmbedTopicOptions: the options become the topic's configs, which are
// checked as Kafka's are.
func TestEmbedTopicOptions(t *testing.T) {
	e := openStore(t, t.TempDir(), nil)
	defer e.Close()
	if err := e.CreateTopic("bad", engine.TopicOptions{Configs: map[string]string{"retention.mss": "1"}}); err == nil {
		t.Fatal("an unknown config was accepted")
	}
	if err := e.CreateTopic("k", engine.TopicOptions{Compact: true, SegmentBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	info, _ := e.Core().Topic("k")
	if info.Config.CleanupPolicy != "compact" || info.Config.Log.SegmentBytes != 1<<20 || info.Config.Log.RetentionMs != -1 {
		t.Fatalf("topic config: %+v", info.Config)
	}
}

// TestEmbedFetchLimit: a Fetch with a limit reads only a little, but
// still returns limit records where they exist, however large they are:
// one per batch of 4 KiB records, the first read (limit x 256 bytes)
// holds fewer and the read grows.
func TestEmbedFetchLimit(t *testing.T) {
	e := openStore(t, t.TempDir(), nil)
	defer e.Close()
	if err := e.CreateTopic("big", engine.TopicOptions{}); err != nil {
		t.Fatal(err)
	}
	tp := engine.TP{Topic: "big"}
	value := make([]byte, 4<<10)
	for range 40 {
		if _, err := e.Produce(ctx(t), tp, engine.Record{Value: value}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		from       int64
		limit, got int
	}{{0, 1, 1}, {0, 10, 10}, {5, 30, 30}, {30, 20, 10}, {0, 0, 40}} {
		res, err := e.Fetch(ctx(t), tp, c.from, c.limit)
		if err != nil || len(res.Records) != c.got || res.Next != c.from+int64(c.got) || len(res.Records[0].Value) != len(value) {
			t.Fatalf("fetch %d from %d: %d records, next %d, %v; want %d", c.limit, c.from, len(res.Records), res.Next, err, c.got)
		}
	}
}
