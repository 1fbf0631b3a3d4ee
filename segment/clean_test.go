package segment

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"ringlog/segment/batch"
)

// keyedRec is one record as a test wrote it or read it back.
type keyedRec struct {
	offset int64
	key    string
	value  []byte // nil: a tombstone
	ts     int64
}

func (r keyedRec) String() string {
	if r.value == nil {
		return fmt.Sprintf("%d:%s=<tombstone>@%d", r.offset, r.key, r.ts)
	}
	return fmt.Sprintf("%d:%s=%x@%d", r.offset, r.key, r.value, r.ts)
}

// keyedLog writes batches of keyed records (overwrites and tombstones) to
// a log and remembers every record by offset, with each batch's codec.
type keyedLog struct {
	t      testing.TB
	l      *Log
	r      *rand.Rand
	clk    *clock
	keys   int
	codecs []batch.Codec
	recs   []keyedRec
	codec  map[int64]batch.Codec // batch base offset -> codec
	pid    int64
	seq    int32
}

func newKeyedLog(t testing.TB, dir string, cfg Config, codecs []batch.Codec, seed uint64) *keyedLog {
	clk := newClock()
	k := &keyedLog{t: t, clk: clk, keys: 60, codecs: codecs, codec: map[int64]batch.Codec{}, pid: -1,
		r: rand.New(rand.NewPCG(seed, 7))}
	k.l = openLog(t, dir, cfg, Options{Now: clk.Now})
	return k
}

// write appends n batches of 1 to 8 records, one in ten a tombstone.
func (k *keyedLog) write(n int) {
	k.t.Helper()
	for range n {
		cnt := 1 + k.r.IntN(8)
		recs := make([]batch.Record, cnt)
		ts := k.clk.now.UnixMilli()
		for j := range recs {
			key := fmt.Appendf(nil, "key-%03d", k.r.IntN(k.keys))
			var v []byte
			if k.r.IntN(10) != 0 {
				v = make([]byte, 10+k.r.IntN(120))
				for i := range v {
					v[i] = byte(k.r.IntN(8))
				}
			}
			recs[j] = batch.Record{OffsetDelta: int32(j), TimestampDelta: int64(j), Key: key, Value: v}
		}
		h := batch.Header{LastOffsetDelta: int32(cnt - 1), BaseTimestamp: ts, MaxTimestamp: ts + int64(cnt-1),
			ProducerID: k.pid, ProducerEpoch: -1, BaseSequence: -1}
		if k.pid >= 0 {
			h.ProducerEpoch, h.BaseSequence = 0, k.seq
			k.seq += int32(cnt)
		}
		c := k.codecs[k.r.IntN(len(k.codecs))]
		b, err := batch.Build(nil, h, c, recs)
		if err != nil {
			k.t.Fatal(err)
		}
		res, err := k.l.Append([][]byte{b}, AppendOptions{})
		if err != nil {
			k.t.Fatal(err)
		}
		k.codec[res.BaseOffset] = c
		for j, r := range recs {
			k.recs = append(k.recs, keyedRec{offset: res.BaseOffset + int64(j), key: string(r.Key), value: r.Value, ts: ts + int64(j)})
		}
		k.clk.advance(time.Millisecond)
	}
}

// roll starts a new active segment, so that everything written so far is
// cleanable.
func (k *keyedLog) roll() {
	k.t.Helper()
	forceRoll(k.t, k.l)
}

func forceRoll(t testing.TB, l *Log) {
	t.Helper()
	if l.active.written == 0 {
		return
	}
	rt, err := l.roll(l.nextOffset, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.run(rt.Ops, rt); err != nil {
		t.Fatal(err)
	}
}

// compacted is what a clean of everything below end keeps: the latest
// record of each key below end (tombstones included unless dropTombstones),
// and every record from end on.
func compacted(recs []keyedRec, end int64, dropTombstones bool) []keyedRec {
	latest := map[string]int64{}
	for _, r := range recs {
		if r.offset < end {
			latest[r.key] = r.offset
		}
	}
	var out []keyedRec
	for _, r := range recs {
		if r.offset >= end || (latest[r.key] == r.offset && !(dropTombstones && r.value == nil)) {
			out = append(out, r)
		}
	}
	return out
}

// readRecords reads the whole log back, checking every batch (valid as a
// stored batch, records readable, offsets going forward), and returns the
// records and the batch headers.
func readRecords(t testing.TB, l *Log) ([]keyedRec, []batch.Header) {
	t.Helper()
	buf := readAll(t, l)
	var out []keyedRec
	var hs []batch.Header
	next := int64(-1)
	for len(buf) > 0 {
		h, err := batch.ParseHeader(buf)
		if err != nil {
			t.Fatal(err)
		}
		b := buf[:h.Size()]
		buf = buf[h.Size():]
		if _, err := batch.Validate(b, batch.Stored); err != nil {
			t.Fatalf("batch at %d: %v", h.BaseOffset, err)
		}
		if h.BaseOffset < next {
			t.Fatalf("batch at %d after one ending at %d", h.BaseOffset, next)
		}
		next = h.NextOffset()
		hs = append(hs, h)
		err = batch.Records(h, b, 1<<26, func(r *batch.Record) error {
			ts := h.BaseTimestamp + r.TimestampDelta
			if h.LogAppendTime() {
				ts = h.MaxTimestamp
			}
			var v []byte
			if r.Value != nil {
				v = slices.Clone(r.Value)
				if v == nil {
					v = []byte{}
				}
			}
			rec := keyedRec{offset: h.BaseOffset + int64(r.OffsetDelta), key: string(r.Key), value: v, ts: ts}
			if n := len(out); n > 0 && rec.offset <= out[n-1].offset {
				return fmt.Errorf("record %d after %d", rec.offset, out[n-1].offset)
			}
			out = append(out, rec)
			return nil
		})
		if err != nil {
			t.Fatalf("records of batch at %d: %v", h.BaseOffset, err)
		}
	}
	return out, hs
}

func sameRecords(t testing.TB, got, want []keyedRec, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.offset != w.offset || g.key != w.key || !bytes.Equal(g.value, w.value) || (g.value == nil) != (w.value == nil) || g.ts != w.ts {
			t.Fatalf("%s: record %d is %v, want %v", what, i, g, w)
		}
	}
}

func compactConfig() Config {
	c := smallConfig()
	c.SegmentBytes = 16 << 10
	c.Cleanup = CleanupCompact
	c.DeleteRetentionMs = int64(time.Hour / time.Millisecond)
	return c
}

var allCodecs = []batch.Codec{batch.None, batch.Gzip, batch.Snappy, batch.LZ4, batch.Zstd}

func TestCleanKeepsLatestPerKey(t *testing.T) {
	cases := map[string][]batch.Codec{"mixed": allCodecs}
	for _, c := range allCodecs {
		cases[c.String()] = []batch.Codec{c}
	}
	for name, codecs := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := compactConfig()
			k := newKeyedLog(t, dir, cfg, codecs, 1)
			k.keys = 200
			k.write(400)
			k.roll()
			k.write(5) // the active segment: never cleaned
			l := k.l
			end := l.ActiveBase()
			leo, sizeBefore, segsBefore := l.LEO(), l.Size(), l.Segments()
			pre, preHdrs := readRecords(t, l)
			sameRecords(t, pre, k.recs, "before the clean")

			st, err := l.CleanNow(l.LEO(), CleanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if st.MapEnd != end || st.RecordsRemoved == 0 || st.SegmentsIn == 0 {
				t.Fatalf("stats %+v, active base %d", st, end)
			}
			if l.LEO() != leo {
				t.Fatalf("LEO %d, was %d", l.LEO(), leo)
			}
			want := compacted(k.recs, end, false)
			got, hdrs := readRecords(t, l)
			sameRecords(t, got, want, "after the clean")
			if l.Size() >= sizeBefore || l.Segments() > segsBefore {
				t.Fatalf("size %d -> %d, segments %d -> %d", sizeBefore, l.Size(), segsBefore, l.Segments())
			}
			// Batches keep their offsets and codec; only bare headers
			// (emptied batches) are uncompressed.
			orig := map[int64]batch.Header{}
			for _, h := range preHdrs {
				orig[h.BaseOffset] = h
			}
			for _, h := range hdrs {
				o, ok := orig[h.BaseOffset]
				if !ok || o.LastOffsetDelta != h.LastOffsetDelta || o.MaxTimestamp != h.MaxTimestamp {
					t.Fatalf("batch %+v does not match an original batch (%v, %+v)", h, ok, o)
				}
				if h.NumRecords > 0 && h.Codec() != k.codec[h.BaseOffset] {
					t.Fatalf("batch at %d has codec %v, written with %v", h.BaseOffset, h.Codec(), k.codec[h.BaseOffset])
				}
			}
			checkReadsEverywhere(t, l, hdrs)

			// A second clean with nothing new changes nothing, and the
			// tombstones stay until delete.retention.ms has passed since the
			// first clean gave them a horizon.
			if _, err := l.CleanNow(l.LEO(), CleanOptions{}); err != nil {
				t.Fatal(err)
			}
			got, _ = readRecords(t, l)
			sameRecords(t, got, want, "after a second clean")
			if n := l.Segments(); n > 3 {
				// Segments shrunk by the first clean are merged by the next.
				t.Fatalf("%d segments after the second clean", n)
			}
			k.clk.advance(time.Duration(cfg.DeleteRetentionMs)*time.Millisecond - time.Millisecond)
			if st, _ := l.CleanStatus(l.LEO()); st.Due {
				t.Fatalf("due before the horizon: %+v", st)
			}
			k.clk.advance(2 * time.Millisecond)
			if st, _ := l.CleanStatus(l.LEO()); !st.Due || st.Reason != "delete horizon" {
				t.Fatalf("not due after the horizon: %+v", st)
			}
			st, err = l.CleanNow(l.LEO(), CleanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want = compacted(k.recs, end, true)
			if st.TombstonesRemoved == 0 {
				t.Fatalf("no tombstone removed: %+v", st)
			}
			got, hdrs = readRecords(t, l)
			sameRecords(t, got, want, "after the delete horizon")
			checkReadsEverywhere(t, l, hdrs)

			// Reopened, cleanly or after a crash: the same.
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, dir, cfg, Options{Now: k.clk.Now})
			got, _ = readRecords(t, l)
			sameRecords(t, got, want, "after a clean reopen")
			crash(l)
			l = openLog(t, dir, cfg, Options{Now: k.clk.Now})
			got, hdrs = readRecords(t, l)
			sameRecords(t, got, want, "after a crash")
			checkReadsEverywhere(t, l, hdrs)
			if l.LEO() != leo {
				t.Fatalf("LEO %d after reopen, was %d", l.LEO(), leo)
			}
			l.Close()
		})
	}
}

// checkReadsEverywhere reads at every offset of the log: the first batch
// returned is the first batch that ends at or after the offset, also when
// the offset was removed by the clean.
func checkReadsEverywhere(t testing.TB, l *Log, hdrs []batch.Header) {
	t.Helper()
	i := 0
	for off := l.LogStartOffset(); off < l.LEO(); off++ {
		for hdrs[i].LastOffset() < off {
			i++
		}
		b, err := l.ReadBatches(off, 1, l.LEO())
		if err != nil {
			t.Fatal(err)
		}
		h, err := batch.ParseHeader(b)
		if err != nil || h.BaseOffset != hdrs[i].BaseOffset {
			t.Fatalf("read at %d: batch at %d (%v), want the one at %d", off, h.BaseOffset, err, hdrs[i].BaseOffset)
		}
	}
}

func TestCleanReaderKeepsOldBytes(t *testing.T) {
	k := newKeyedLog(t, t.TempDir(), compactConfig(), []batch.Codec{batch.Zstd, batch.None}, 2)
	k.write(300)
	k.roll()
	l := k.l
	res, err := l.Read(l.LogStartOffset(), 1<<30, l.LEO(), true)
	if err != nil {
		t.Fatal(err)
	}
	readRegions := func() []byte {
		var out []byte
		for _, rg := range res.Regions {
			b := make([]byte, rg.Len)
			if err := rg.ReadAt(b); err != nil {
				t.Fatal(err)
			}
			out = append(out, b...)
		}
		return out
	}
	before := readRegions()
	if _, err := l.CleanNow(l.LEO(), CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	if l.Size() >= int64(len(before)) {
		t.Fatalf("the clean removed nothing")
	}
	sameBytes(t, readRegions(), before, "regions held across the swap")
	res.Release()
	got, _ := readRecords(t, l)
	sameRecords(t, got, compacted(k.recs, l.ActiveBase(), false), "after the clean")
	l.Close()
}

func TestCleanKeepsLastBatchOfProducer(t *testing.T) {
	k := newKeyedLog(t, t.TempDir(), compactConfig(), []batch.Codec{batch.LZ4}, 3)
	k.keys = 5
	k.pid = 42
	k.write(30)
	pidEnd := k.recs[len(k.recs)-1].offset
	k.pid = -1
	k.write(300) // overwrites every key of producer 42
	k.roll()
	l := k.l
	if _, err := l.CleanNow(l.LEO(), CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	got, hdrs := readRecords(t, l)
	sameRecords(t, got, compacted(k.recs, l.ActiveBase(), false), "after the clean")
	var kept []batch.Header
	for _, h := range hdrs {
		if h.ProducerID == 42 {
			kept = append(kept, h)
		}
	}
	if len(kept) != 1 || kept[0].LastOffset() != pidEnd || kept[0].NumRecords != 0 || kept[0].ProducerEpoch != 0 ||
		int64(kept[0].BaseSequence)+int64(kept[0].LastOffsetDelta) != int64(k.seq-1) {
		t.Fatalf("producer 42's batches after the clean: %+v (last offset %d, last sequence %d)", kept, pidEnd, k.seq-1)
	}
	l.Close()
}

func TestCleanMapFullGoesOnNextTime(t *testing.T) {
	k := newKeyedLog(t, t.TempDir(), compactConfig(), allCodecs, 4)
	k.write(300)
	k.roll()
	l := k.l
	end := l.ActiveBase()
	var passes int
	for passes = 1; ; passes++ {
		st, err := l.CleanNow(l.LEO(), CleanOptions{MaxKeys: 25})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := readRecords(t, l)
		// Each pass compacts what it mapped; later records stay.
		sameRecords(t, compacted(got, st.MapEnd, false), got, fmt.Sprintf("pass %d", passes))
		if st.MapEnd == end {
			break
		}
		if passes > 100 {
			t.Fatal("no progress")
		}
	}
	if passes < 3 {
		t.Fatalf("%d passes: the map never filled", passes)
	}
	got, _ := readRecords(t, l)
	sameRecords(t, got, compacted(k.recs, end, false), "after all passes")
	l.Close()
}

func TestCleanPolicies(t *testing.T) {
	for _, p := range []CleanupPolicy{CleanupDelete, CleanupCompact, CleanupCompactDelete} {
		t.Run(p.String(), func(t *testing.T) {
			cfg := compactConfig()
			cfg.Cleanup = p
			cfg.RetentionMs = 1000
			k := newKeyedLog(t, t.TempDir(), cfg, []batch.Codec{batch.None}, 5)
			k.write(200)
			k.roll()
			l := k.l
			size := l.Size()
			st, err := l.CleanNow(l.LEO(), CleanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if (st.SegmentsIn > 0) != p.Compacts() || (l.Size() < size) != p.Compacts() {
				t.Fatalf("policy %v: clean %+v, size %d -> %d", p, st, size, l.Size())
			}
			k.clk.advance(time.Hour)
			n, err := l.EnforceRetention(l.LEO())
			if err != nil {
				t.Fatal(err)
			}
			if (n > 0) != p.Deletes() {
				t.Fatalf("policy %v: retention deleted %d segments", p, n)
			}
			l.Close()
		})
	}
}

func TestCleanStatus(t *testing.T) {
	cfg := compactConfig()
	cfg.MaxCompactionLagMs = int64(time.Hour / time.Millisecond)
	k := newKeyedLog(t, t.TempDir(), cfg, []batch.Codec{batch.None}, 6)
	l := k.l
	if st, _ := l.CleanStatus(l.LEO()); st.Due || st.DirtyBytes != 0 {
		t.Fatalf("empty log: %+v", st)
	}
	k.write(200)
	k.roll()
	st, _ := l.CleanStatus(l.LEO())
	if !st.Due || st.Ratio != 1 || st.CleanBytes != 0 || st.CleanableEnd != l.ActiveBase() {
		t.Fatalf("all dirty: %+v", st)
	}
	// The upper bound (the LSO) bounds the cleanable end, at the base of
	// the segment holding it: a bound inside a segment once left a log
	// due for ever, its cleans mapping nothing (TestCleanerStopsAtLSO).
	if st, _ := l.CleanStatus(10); st.CleanableEnd != 0 || st.Due {
		t.Fatalf("below an upper bound of 10: %+v", st)
	}
	if st, _ := l.CleanStatus(l.segs[1].base + 1); st.CleanableEnd != l.segs[1].base {
		t.Fatalf("below an upper bound inside the second segment: %+v", st)
	}
	if _, err := l.CleanNow(l.LEO(), CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, _ := l.CleanStatus(l.LEO()); st.Due || st.DirtyBytes != 0 || st.FirstDirty != l.ActiveBase() {
		t.Fatalf("after the clean: %+v", st)
	}
	k.write(3)
	k.roll()
	st, _ = l.CleanStatus(l.LEO())
	if st.Due || st.DirtyBytes == 0 || st.Ratio >= 0.5 {
		t.Fatalf("a little dirty: %+v", st)
	}
	k.clk.advance(time.Hour + time.Second)
	if st, _ := l.CleanStatus(l.LEO()); !st.Due || st.Reason != "max.compaction.lag.ms" {
		t.Fatalf("past max.compaction.lag.ms: %+v", st)
	}
	// min.compaction.lag.ms holds young segments back.
	cfg.MinCompactionLagMs = int64(time.Minute / time.Millisecond)
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	k.write(3)
	k.roll()
	if st, _ := l.CleanStatus(l.LEO()); st.CleanableEnd >= l.ActiveBase() {
		t.Fatalf("young segment cleanable: %+v", st)
	}
	// The cleaner checkpoint survives a reopen.
	fd := st.FirstDirty
	l.Close()
	l = openLog(t, l.Dir(), cfg, Options{Now: k.clk.Now})
	if st, _ := l.CleanStatus(l.LEO()); st.FirstDirty != fd {
		t.Fatalf("first dirty offset %d after reopen, was %d", st.FirstDirty, fd)
	}
	l.Close()
}

func TestCleanStaleAfterTruncation(t *testing.T) {
	k := newKeyedLog(t, t.TempDir(), compactConfig(), []batch.Codec{batch.Snappy}, 7)
	k.write(300)
	k.roll()
	l := k.l
	p, err := l.PlanClean(l.LEO(), nil)
	if err != nil || p == nil {
		t.Fatal(p, err)
	}
	r, err := l.Clean(p, CleanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cut := k.recs[len(k.recs)/3].offset
	if err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	if _, err := l.InstallClean(r); !errors.Is(err, ErrCleanStale) {
		t.Fatalf("install after truncation: %v", err)
	}
	noCleanFiles(t, l.Dir())
	got, _ := readRecords(t, l)
	var want []keyedRec
	for _, rec := range k.recs {
		if rec.offset < l.LEO() {
			want = append(want, rec)
		}
	}
	sameRecords(t, got, want, "after the stale clean")
	if st, _ := l.CleanStatus(l.LEO()); st.FirstDirty > l.LEO() {
		t.Fatalf("first dirty %d past the LEO %d", st.FirstDirty, l.LEO())
	}
	// The next clean works.
	k.recs = want
	forceRoll(t, l)
	if _, err := l.CleanNow(l.LEO(), CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	got, _ = readRecords(t, l)
	sameRecords(t, got, compacted(want, l.ActiveBase(), false), "after the next clean")
	l.Close()
}

func TestCleanWithRetentionMeanwhile(t *testing.T) {
	cfg := compactConfig()
	cfg.Cleanup = CleanupCompactDelete
	cfg.RetentionBytes = 40 << 10
	k := newKeyedLog(t, t.TempDir(), cfg, []batch.Codec{batch.Gzip}, 8)
	k.write(400)
	k.roll()
	l := k.l
	p, err := l.PlanClean(l.LEO(), nil)
	if err != nil || p == nil {
		t.Fatal(p, err)
	}
	r, err := l.Clean(p, CleanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := l.EnforceRetention(l.LEO())
	if err != nil || n == 0 {
		t.Fatalf("retention: %d, %v", n, err)
	}
	st, err := l.InstallClean(r)
	if err != nil {
		t.Fatal(err)
	}
	if st.SegmentsIn == 0 {
		t.Fatal("no group was left to install")
	}
	noCleanFiles(t, l.Dir())
	start := l.LogStartOffset()
	var live []keyedRec
	for _, rec := range k.recs {
		if rec.offset >= start {
			live = append(live, rec)
		}
	}
	got, _ := readRecords(t, l)
	sameRecords(t, got, compacted(live, l.ActiveBase(), false), "after retention and the clean")
	l.Close()
}

// TestCleanConcurrently runs a clean on another goroutine while the owner
// appends and readers read, as a shard and the engine's cleaner do.
func TestCleanConcurrently(t *testing.T) {
	k := newKeyedLog(t, t.TempDir(), compactConfig(), allCodecs, 9)
	k.write(300)
	k.roll()
	l := k.l
	end := l.ActiveBase()
	p, err := l.PlanClean(l.LEO(), nil)
	if err != nil || p == nil {
		t.Fatal(p, err)
	}
	if again, _ := l.PlanClean(l.LEO(), nil); again != nil {
		t.Fatal("a second plan while one is out")
	}
	type result struct {
		r   *CleanResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := l.Clean(p, CleanOptions{})
		done <- result{r, err}
	}()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				b, err := l.ReadBatches(l.LogStartOffset(), 1<<30, l.LEO())
				if err != nil {
					t.Error(err)
					return
				}
				if err := splitBatchesErr(b); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var res result
	for appended := 0; ; appended++ {
		select {
		case res = <-done:
		default:
			k.write(1)
			continue
		}
		break
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	k.write(5)
	if _, err := l.InstallClean(res.r); err != nil {
		t.Fatal(err)
	}
	k.write(5)
	close(stop)
	wg.Wait()
	got, _ := readRecords(t, l)
	sameRecords(t, got, compacted(k.recs, end, false), "after the concurrent clean")
	l.Close()
}

func TestCleanAbortLeavesNothing(t *testing.T) {
	k := newKeyedLog(t, t.TempDir(), compactConfig(), []batch.Codec{batch.None}, 10)
	k.write(300)
	k.roll()
	l := k.l
	p, _ := l.PlanClean(l.LEO(), nil)
	stop := make(chan struct{})
	n := 0
	_, err := l.Clean(p, CleanOptions{Stop: stop, Throttle: func(int64) {
		if n++; n == 200 {
			close(stop)
		}
	}})
	if !errors.Is(err, ErrCleanAborted) {
		t.Fatalf("aborted clean: %v", err)
	}
	noCleanFiles(t, l.Dir())
	got, _ := readRecords(t, l)
	sameRecords(t, got, k.recs, "after the aborted clean")
	// The log is free for the next clean.
	if _, err := l.CleanNow(l.LEO(), CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	got, _ = readRecords(t, l)
	sameRecords(t, got, compacted(k.recs, l.ActiveBase(), false), "after the next clean")
	l.Close()
}

// noCleanFiles fails if a clean left files behind.
func noCleanFiles(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), cleanedSuffix) || strings.HasSuffix(e.Name(), swapSuffix) {
			t.Fatalf("%s left in %s", e.Name(), dir)
		}
	}
}

func TestCleanConfigValidate(t *testing.T) {
	for _, bad := range []func(c *Config){
		func(c *Config) { c.MinCleanableDirtyRatio = 1.5 },
		func(c *Config) { c.DeleteRetentionMs = -1 },
		func(c *Config) { c.Cleanup = 9 },
		func(c *Config) { c.Cleanup = CleanupCompact; c.MinCompactionLagMs = 10; c.MaxCompactionLagMs = 5 },
	} {
		c := DefaultConfig()
		bad(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v accepted", c)
		}
	}
	c := DefaultConfig()
	c.Cleanup, c.SegmentMs, c.MaxCompactionLagMs = CleanupCompact, 1000, 100
	if c.rollMs() != 100 {
		t.Errorf("compacted log rolls after %d ms, want max.compaction.lag.ms", c.rollMs())
	}

}
