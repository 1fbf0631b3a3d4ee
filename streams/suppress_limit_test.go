package streams

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// limitRef is the reference of a count suppressed UntilTimeLimit: Kafka's
// KTableSuppressProcessor over the whole input, written from its
// definition (a non-resetting buffer ordered by buffer time then key
// bytes; the due keys emitted first, then, over a bound, the oldest).
func limitRef(recs []*kgo.Record, limit int64, buf BufferConfig) (out []joined, full bool) {
	type entry struct {
		at, ts, size int64
		val          int64
	}
	counts := map[string]int64{}
	buffer := map[string]entry{}
	var bytes, streamTime int64
	over := func() bool {
		return buf.MaxRecords > 0 && int64(len(buffer)) > buf.MaxRecords || buf.MaxBytes > 0 && bytes > buf.MaxBytes
	}
	oldest := func() string {
		keys := make([]string, 0, len(buffer))
		for k := range buffer {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			a, b := buffer[keys[i]], buffer[keys[j]]
			return a.at < b.at || a.at == b.at && keys[i] < keys[j]
		})
		return keys[0]
	}
	emit := func(k string) {
		e := buffer[k]
		delete(buffer, k)
		bytes -= e.size
		out = append(out, joined{0, k, string(binary.BigEndian.AppendUint64(nil, uint64(e.val))), e.ts})
	}
	for _, r := range recs {
		k, ts := string(r.Key), r.Timestamp.UnixMilli()
		streamTime = max(streamTime, ts)
		counts[k]++
		size := int64(len(k)) + 8 + 8 + 1 + 8 // key, buffer time, timestamp, flags, new value
		if counts[k] > 1 {
			size += 4 + 8 // the old value
		}
		e, ok := buffer[k]
		if !ok {
			e.at = ts
		}
		bytes += size - e.size
		e.ts, e.size, e.val = ts, size, counts[k]
		buffer[k] = e
		for len(buffer) > 0 && buffer[oldest()].at <= streamTime-limit {
			emit(oldest())
		}
		for over() {
			if buf.Full == ShutDownWhenFull {
				return out, true
			}
			emit(oldest())
		}
	}
	return out, false
}

// TestSuppressUntilTimeLimit: a count suppressed UntilTimeLimit(3 s),
// over 200 records of 6 keys with timestamps out of order, through three
// buffers: unbounded, at most 3 records and at most 100 bytes emitting
// early; the output of each (one partition, in order: key, latest count,
// its timestamp) equals the reference. A fourth, at most 3 records and
// ShutDownWhenFull, stops the application with ErrBufferFull where the
// reference goes over its bound, after emitting what the reference does.
func TestSuppressUntilTimeLimit(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "tl-in", 1, nil)
		bufs := []BufferConfig{{}, {MaxRecords: 3, Full: EmitEarlyWhenFull}, {MaxBytes: 100, Full: EmitEarlyWhenFull}}
		for i := range bufs {
			createTopic(t, addr, fmt.Sprintf("tl-out-%d", i), 1, nil)
		}
		createTopic(t, addr, "tl-out-shut", 1, nil)
		rng := rand.New(rand.NewSource(7))
		base := int64(1_700_000_000_000)
		var recs []*kgo.Record
		for i := range 200 {
			ts := base + int64(i)*300 + rng.Int63n(2000) - 1000
			recs = append(recs, &kgo.Record{Topic: "tl-in", Key: []byte(fmt.Sprintf("k%d", rng.Intn(6))), Value: []byte("x"),
				Timestamp: time.UnixMilli(ts)})
		}
		const limit = 3 * time.Second
		b := NewBuilder()
		counts := Count(GroupByKey(Source(b, []string{"tl-in"}, String, String)), Named("tl-counts"))
		for i, buf := range bufs {
			SuppressTable(counts, UntilTimeLimit(limit, buf), Named(fmt.Sprintf("tl-%d", i))).ToStream().To(fmt.Sprintf("tl-out-%d", i))
		}
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := newClient(t, addr).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		a := startApp(t, topo, Config{ApplicationID: "tl", Brokers: []string{addr}, StateDir: t.TempDir()})
		waitProcessed(t, a, int64(len(recs)))
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		for i, buf := range bufs {
			want, full := limitRef(recs, limit.Milliseconds(), buf)
			if full || len(want) < 20 {
				t.Fatalf("reference %+v: %d emitted, full %v", buf, len(want), full)
			}
			checkJoined(t, fmt.Sprintf("buffer %+v", buf), readAll(t, addr, fmt.Sprintf("tl-out-%d", i)), want)
		}
		// The reference emits differently with each bound, or the
		// bounds would not be tested.
		r0, _ := limitRef(recs, limit.Milliseconds(), bufs[0])
		for _, buf := range bufs[1:] {
			if r, _ := limitRef(recs, limit.Milliseconds(), buf); len(r) <= len(r0) {
				t.Errorf("buffer %+v emits %d records, no more than unbounded (%d)", buf, len(r), len(r0))
			}
		}

		shut := BufferConfig{MaxRecords: 3}
		want, full := limitRef(recs, limit.Milliseconds(), shut)
		if !full {
			t.Fatal("the reference's buffer of 3 records never fills")
		}
		b = NewBuilder()
		SuppressTable(Count(GroupByKey(Source(b, []string{"tl-in"}, String, String)), Named("tl-counts")),
			UntilTimeLimit(limit, shut), Named("tl-shut")).ToStream().To("tl-out-shut")
		if topo, err = b.Build(); err != nil {
			t.Fatal(err)
		}
		a = startApp(t, topo, Config{ApplicationID: "tl-shut", Brokers: []string{addr}, StateDir: t.TempDir()})
		done := make(chan error, 1)
		go func() { done <- a.Wait() }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrBufferFull) {
				t.Fatalf("Wait() = %v, want ErrBufferFull", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the application did not stop on its full buffer")
		}
		// At least once, what was emitted before the failure is not
		// committed: the output holds what the reference emits before,
		// or nothing if nothing was flushed.
		if got := readAll(t, addr, "tl-out-shut"); len(got) > 0 {
			checkJoined(t, "before the buffer filled", got, want)
		}
	})
}

// TestSuppressUntilTimeLimitAfterKill: exactly once, the time-limited
// buffers (unbounded, and 3 records emitting early) come back from their
// changelogs after the instance is killed mid-run and started again with
// its state directory wiped, and with them each key's buffer time (the
// in-memory index is read again from the restored store). A
// read_committed consumer of the outputs sees what the reference emits
// over the whole input, as if the application had never stopped. (Stream
// time comes back from the committed offsets too, but this input, nearly
// in order, does not depend on it: TestStreamTimeAcrossRestart does.)
func TestSuppressUntilTimeLimitAfterKill(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "tk-in", 1, nil)
		bufs := []BufferConfig{{}, {MaxRecords: 3, Full: EmitEarlyWhenFull}}
		for i := range bufs {
			createTopic(t, addr, fmt.Sprintf("tk-out-%d", i), 1, nil)
		}
		rng := rand.New(rand.NewSource(11))
		base := int64(1_700_000_000_000)
		var recs []*kgo.Record
		for i := range 160 {
			ts := base + int64(i)*300 + rng.Int63n(2000) - 1000
			recs = append(recs, &kgo.Record{Topic: "tk-in", Key: []byte(fmt.Sprintf("k%d", rng.Intn(6))), Value: []byte("x"),
				Timestamp: time.UnixMilli(ts)})
		}
		const limit = 3 * time.Second
		b := NewBuilder()
		counts := Count(GroupByKey(Source(b, []string{"tk-in"}, String, String)), Named("tk-counts"))
		for i, buf := range bufs {
			SuppressTable(counts, UntilTimeLimit(limit, buf), Named(fmt.Sprintf("tk-%d", i))).ToStream().To(fmt.Sprintf("tk-out-%d", i))
		}
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		prod := newClient(t, addr)
		half := len(recs) / 2
		if err := prod.ProduceSync(context.Background(), recs[:half]...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		state := t.TempDir()
		cfg := Config{ApplicationID: "tk", Brokers: []string{addr}, StateDir: state, Guarantee: ExactlyOnce, InstanceID: "one"}
		a := startApp(t, topo, cfg)
		waitProcessed(t, a, int64(half))
		time.Sleep(300 * time.Millisecond) // some commits, perhaps not the last
		a.kill()
		if err := removeAll(state); err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(context.Background(), recs[half:]...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		a = startApp(t, topo, cfg)
		// Caught up when the whole input is committed (with the outputs,
		// in one transaction): the task's counters could not say so after
		// an aborted transaction, which replays what they counted.
		adm := kadm.NewClient(newClient(t, addr))
		deadline := time.Now().Add(15 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			offs, err := adm.FetchOffsets(ctx, "tk")
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if o, _ := offs.Lookup("tk-in", 0); o.At == int64(len(recs)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the restarted instance did not catch up: %+v", a.Stats().Tasks)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		for i, buf := range bufs {
			want, _ := limitRef(recs, limit.Milliseconds(), buf)
			checkJoined(t, fmt.Sprintf("buffer %+v", buf), readAll(t, addr, fmt.Sprintf("tk-out-%d", i)), want)
		}
	})
}

// TestSuppressUntilTimeLimitAfterAbort: exactly once, a transaction
// aborted after the buffer emitted a key brings the key back into the
// store, so the in-memory index (buffer times, the smallest one) must be
// read again. k@0 s is buffered and committed; j@5 s makes k due
// (5 - 3 >= 0) and emits it, in a transaction that is aborted; the
// replay of j@5 s must emit k again (the committed output holds it
// once). With a stale index (smallest buffer time 5 s) nothing would be
// due and k never emitted.
func TestSuppressUntilTimeLimitAfterAbort(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "ta-in", 1, nil)
		createTopic(t, addr, "ta-out", 1, nil)
		b := NewBuilder()
		SuppressTable(Count(GroupByKey(Source(b, []string{"ta-in"}, String, String)), Named("ta-counts")),
			UntilTimeLimit(3*time.Second, BufferConfig{}), Named("ta")).ToStream().To("ta-out")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		a := startApp(t, topo, Config{ApplicationID: "ta", Brokers: []string{addr}, StateDir: t.TempDir(),
			Guarantee: ExactlyOnce, CommitInterval: time.Minute})
		base := int64(1_700_000_000_000)
		rec := func(k string, at int64) *kgo.Record {
			return &kgo.Record{Topic: "ta-in", Key: []byte(k), Value: []byte("x"), Timestamp: time.UnixMilli(base + at)}
		}
		end := func(commit kgo.TransactionEndTry) {
			a.mu.Lock()
			defer a.mu.Unlock()
			if !a.inTxn {
				t.Fatal("no transaction open")
			}
			if err := a.endTxnLocked(context.Background(), commit); err != nil {
				t.Fatal(err)
			}
		}
		cl := newClient(t, addr)
		producePhased(t, cl, a, []*kgo.Record{rec("k", 0)})
		end(kgo.TryCommit)
		if err := cl.ProduceSync(context.Background(), rec("j", 5000)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		waitProcessed(t, a, 2)
		end(kgo.TryAbort)
		waitProcessed(t, a, 3) // j again
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		checkJoined(t, "after abort", readAll(t, addr, "ta-out"),
			[]joined{{0, "k", string(binary.BigEndian.AppendUint64(nil, 1)), base}})
	})
}

// TestSuppressWindowClosesBounded: UntilWindowCloses with a strict
// bound (Kafka's untilWindowCloses(maxRecords(3).shutDownWhenFull()), and
// the same in bytes: 33 bytes an entry here, so 100 holds 3) keeps
// running while its buffer holds 3 windows, counting a window emitted
// as gone, and stops the application with ErrBufferFull at the fourth.
func TestSuppressWindowClosesBounded(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		for i, buf := range []BufferConfig{{MaxRecords: 3}, {MaxBytes: 100}} {
			in, out := fmt.Sprintf("wb-in-%d", i), fmt.Sprintf("wb-out-%d", i)
			createTopic(t, addr, in, 1, nil)
			createTopic(t, addr, out, 1, nil)
			b := NewBuilder()
			wc := WindowedCount(WindowedBy(GroupByKey(Source(b, []string{in}, String, String)),
				TimeWindows{Size: time.Second, Grace: 10 * time.Second}), Named("wb-counts"))
			Suppress(wc, UntilWindowCloses(buf), Named("wb")).ToStream().To(out)
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			a := startApp(t, topo, Config{ApplicationID: fmt.Sprintf("wb-%d", i), Brokers: []string{addr}, StateDir: t.TempDir()})
			base := int64(1_700_000_000_000) / 1000 * 1000
			rec := func(k string, at int64) *kgo.Record {
				return &kgo.Record{Topic: in, Key: []byte(k), Value: []byte("x"), Timestamp: time.UnixMilli(base + at)}
			}
			// a's window [0, 1) is final at 11 s: c@12 s emits it, so
			// d@12.5 s makes three windows buffered (b, c, d), e the fourth.
			producePhased(t, newClient(t, addr), a, []*kgo.Record{rec("a", 0), rec("a", 500), rec("b", 5000), rec("c", 12000), rec("d", 12500)})
			select {
			case <-a.done:
				t.Fatalf("%+v: stopped with 3 windows buffered: %v", buf, a.Wait())
			case <-time.After(200 * time.Millisecond):
			}
			if err := newClient(t, addr).ProduceSync(context.Background(), rec("e", 12600)).FirstErr(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-a.done:
				if err := a.Wait(); !errors.Is(err, ErrBufferFull) {
					t.Fatalf("%+v: Wait() = %v, want ErrBufferFull", buf, err)
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("%+v: the application did not stop on its full buffer", buf)
			}
		}
		b := NewBuilder()
		wc := WindowedCount(WindowedBy(GroupByKey(Source(b, []string{"x"}, String, String)), TimeWindows{Size: time.Second}))
		Suppress(wc, UntilWindowCloses(BufferConfig{MaxRecords: 3, Full: EmitEarlyWhenFull}))
		if _, err := b.Build(); !errors.Is(err, ErrTopology) {
			t.Errorf("UntilWindowCloses emitting early: Build() = %v, want ErrTopology", err)
		}
	})
}
