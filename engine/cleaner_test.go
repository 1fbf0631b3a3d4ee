package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"ringlog/internal/testkit"
	"ringlog/segment"
	"ringlog/segment/batch"
)

// keyedBatch builds a producer batch with one record per key; a nil value
// is a tombstone.
func keyedBatch(t testing.TB, c batch.Codec, keys []string, vals [][]byte) []byte {
	t.Helper()
	ts := time.Now().UnixMilli()
	recs := make([]batch.Record, len(keys))
	for i := range recs {
		recs[i] = batch.Record{OffsetDelta: int32(i), Key: []byte(keys[i]), Value: vals[i]}
	}
	h := batch.Header{LastOffsetDelta: int32(len(keys) - 1), BaseTimestamp: ts, MaxTimestamp: ts, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	b, err := batch.Build(nil, h, c, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type engineRec struct {
	key  string
	val  string
	tomb bool
}

// readRecords reads every record of tp below its high watermark.
func readRecords(t testing.TB, e *Core, tp TP) map[int64]engineRec {
	t.Helper()
	out := map[int64]engineRec{}
	err := e.ReadAll(tp, func(b []byte) error {
		h, err := batch.Validate(b, batch.Stored)
		if err != nil {
			return err
		}
		return batch.Records(h, b, 1<<26, func(r *batch.Record) error {
			out[h.BaseOffset+int64(r.OffsetDelta)] = engineRec{string(r.Key), string(r.Value), r.Value == nil}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// keyedWriter appends keyed batches to tp and remembers every record.
type keyedWriter struct {
	t       testing.TB
	e       *Core
	tp      TP
	r       *rand.Rand
	written map[int64]engineRec
	latest  map[string]int64
}

func newKeyedWriter(t testing.TB, e *Core, tp TP, seed uint64) *keyedWriter {
	return &keyedWriter{t: t, e: e, tp: tp, r: rand.New(rand.NewPCG(seed, 1)), written: map[int64]engineRec{}, latest: map[string]int64{}}
}

// write appends one batch and returns how long the append took.
func (w *keyedWriter) write() time.Duration {
	n := 1 + w.r.IntN(10)
	keys := make([]string, n)
	vals := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%04d", w.r.IntN(500))
		if w.r.IntN(20) != 0 {
			vals[i] = []byte(strings.Repeat(string(rune('a'+w.r.IntN(26))), 20+w.r.IntN(200)))
		}
	}
	codecs := []batch.Codec{batch.None, batch.Zstd, batch.Snappy, batch.LZ4, batch.Gzip}
	start := time.Now()
	res, err := appendSync(w.e, w.tp, keyedBatch(w.t, codecs[w.r.IntN(len(codecs))], keys, vals))
	took := time.Since(start)
	if err != nil {
		w.t.Fatal(err)
	}
	for i, k := range keys {
		off := res.BaseOffset + int64(i)
		w.written[off] = engineRec{k, string(vals[i]), vals[i] == nil}
		w.latest[k] = off
	}
	return took
}

// check verifies what tp holds: only records as written, at their offsets,
// the latest record of every key among them, and at most one record per
// key below the log's first dirty offset.
func (w *keyedWriter) check(got map[int64]engineRec, firstDirty int64) {
	w.t.Helper()
	for off, r := range got {
		if want, ok := w.written[off]; !ok || want != r {
			w.t.Fatalf("offset %d holds %+v, written %+v", off, r, want)
		}
	}
	for k, off := range w.latest {
		if _, ok := got[off]; !ok {
			w.t.Fatalf("latest record of %s (offset %d) is gone", k, off)
		}
	}
	seen := map[string]int64{}
	for off, r := range got {
		if off >= firstDirty {
			continue
		}
		if prev, ok := seen[r.key]; ok {
			w.t.Fatalf("key %s at %d and %d, both below the first dirty offset %d", r.key, prev, off, firstDirty)
		}
		seen[r.key] = off
	}
}

func cleanStatus(t testing.TB, e *Core, tp TP) segment.CleanStatus {
	t.Helper()
	p, err := e.partition(tp)
	if err != nil {
		t.Fatal(err)
	}
	var st segment.CleanStatus
	err = p.shard.do(func() error {
		var err error
		st, err = p.log().CleanStatus(p.hw.Load())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestCleanerCompactsWhileAppending(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Shards: 2, Cleaner: CleanerConfig{Backoff: 20 * time.Millisecond, IOMaxBytesPerSecond: 2 << 20},
		Topic: smallSegments(32768)}
	e, err := OpenCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	compact := map[string]string{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.2"}
	if _, err := e.CreateTopic("compacted", 1, -1, compact, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateTopic("plain", 1, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	tp, tpPlain := TP{"compacted", 0}, TP{"plain", 0}
	w := newKeyedWriter(t, e, tp, 1)
	wPlain := newKeyedWriter(t, e, tpPlain, 2)

	// A compacted topic takes no record without a key.
	if _, err := appendSync(e, tp, mkBatch(t, 2, "nokey", time.Now().UnixMilli(), -1, 0, 0)); !errors.Is(err, segment.ErrInvalidBatch) {
		t.Fatalf("keyless record on a compacted topic: %v", err)
	}

	// Append until several cleans have run, counting the appends that
	// started and completed while a clean was running off the shard.
	var during int
	var slowest time.Duration
	for i := 0; e.CleanerStats().Cleans < 3 || during < 10; i++ {
		if i > 200000 {
			t.Fatalf("cleans %+v, %d appends during a clean", e.CleanerStats(), during)
		}
		cleans := e.CleanerStats().Cleans
		before := e.cleaner.running.Load()
		took := w.write()
		if before && e.cleaner.running.Load() && e.CleanerStats().Cleans == cleans {
			during++
			slowest = max(slowest, took)
		}
		if i%4 == 0 {
			wPlain.write()
		}
	}
	// Appends never wait for a clean: their latency is that of a write.
	if slowest > time.Second {
		t.Fatalf("an append during a clean took %v", slowest)
	}
	t.Logf("cleaner %+v; %d appends during cleans, the slowest %v", e.CleanerStats(), during, slowest)

	// The cleaner catches up once appends stop.
	testkit.WaitFor(t, 20*time.Second, "the cleaner to catch up", func() bool { return !cleanStatus(t, e, tp).Due })
	st := cleanStatus(t, e, tp)
	got := readRecords(t, e, tp)
	w.check(got, st.FirstDirty)
	if len(got) >= len(w.written)/2 {
		t.Fatalf("%d records of %d left", len(got), len(w.written))
	}
	// The delete-only topic is untouched.
	if n := len(readRecords(t, e, tpPlain)); n != len(wPlain.written) {
		t.Fatalf("delete-only topic: %d records of %d", n, len(wPlain.written))
	}

	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Cleaner.Disabled = true
	e, err = OpenCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	again := readRecords(t, e, tp)
	if len(again) != len(got) {
		t.Fatalf("%d records after reopen, %d before", len(again), len(got))
	}
	w.check(again, st.FirstDirty)
	if clean, recovered := e.OpenStats(); recovered != 0 || clean == 0 {
		t.Fatalf("reopen: %d clean, %d recovered", clean, recovered)
	}
}

func TestCleanerStopsOnClose(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Shards: 1, Cleaner: CleanerConfig{Disabled: true}, Topic: smallSegments(16384)}
	e, err := OpenCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateTopic("c", 1, -1, map[string]string{"cleanup.policy": "compact,delete"}, false); err != nil {
		t.Fatal(err)
	}
	tp := TP{"c", 0}
	w := newKeyedWriter(t, e, tp, 3)
	for range 600 {
		w.write()
	}
	before := readRecords(t, e, tp)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// A cleaner slow enough to be caught in the middle of its clean.
	cfg.Cleaner = CleanerConfig{Backoff: 10 * time.Millisecond, IOMaxBytesPerSecond: 64 << 10}
	e, err = OpenCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "a clean to start", e.cleaner.running.Load)
	var closed atomic.Bool
	start := time.Now()
	go func() {
		time.Sleep(5 * time.Second)
		if !closed.Load() {
			panic("Close waits for the clean")
		}
	}()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	closed.Store(true)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close took %v", took)
	}
	ents, err := os.ReadDir(dir + "/c-0")
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range ents {
		if strings.HasSuffix(en.Name(), ".cleaned") || strings.HasSuffix(en.Name(), ".swap") {
			t.Fatalf("%s left behind", en.Name())
		}
	}
	cfg.Cleaner.Disabled = true
	e, err = OpenCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	after := readRecords(t, e, tp)
	if len(after) != len(before) || e.CleanerStats().Cleans != 0 {
		t.Fatalf("%d records after an abandoned clean, %d before", len(after), len(before))
	}
}

func TestCleanerConfigNames(t *testing.T) {
	cfg, err := ParseTopicConfig(DefaultTopicConfig(), map[string]string{
		"cleanup.policy": "compact", "delete.retention.ms": "1000", "min.cleanable.dirty.ratio": "0.25",
		"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "60000",
	})
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Log
	if l.Cleanup != segment.CleanupCompact || l.DeleteRetentionMs != 1000 || l.MinCleanableDirtyRatio != 0.25 ||
		l.MinCompactionLagMs != 5 || l.MaxCompactionLagMs != 60000 {
		t.Fatalf("%+v", l)
	}
	got := map[string]string{}
	for _, en := range cfg.Entries(nil) {
		got[en.Name] = en.Value
	}
	if got["min.cleanable.dirty.ratio"] != "0.25" || got["delete.retention.ms"] != "1000" {
		t.Fatalf("entries %v", got)
	}
	def := map[string]string{}
	for _, en := range DefaultTopicConfig().Entries(nil) {
		def[en.Name] = en.Value
	}
	if def["min.cleanable.dirty.ratio"] != "0.5" || def["delete.retention.ms"] != "86400000" ||
		def["min.compaction.lag.ms"] != "0" || def["max.compaction.lag.ms"] != "9223372036854775807" {
		t.Fatalf("defaults %v", def)
	}
	for _, bad := range []map[string]string{
		{"min.cleanable.dirty.ratio": "1.5"},
		{"min.cleanable.dirty.ratio": "x"},
		{"max.compaction.lag.ms": "0"},
		{"cleanup.policy": "compact", "min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
	} {
		if _, err := ParseTopicConfig(DefaultTopicConfig(), bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%v accepted", bad)
		}
	}
}

// smallSegments is the default topic configuration with segments of n
// bytes: below segment.bytes' floor, which binds what clients and
// server.properties set, not a broker's configuration in Go.
func smallSegments(n int64) TopicConfig {
	c := DefaultTopicConfig()
	c.Log.SegmentBytes = n
	return c
}
