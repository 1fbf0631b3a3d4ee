package segment

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"ringlog/ioring"
	"ringlog/segment/batch"
)

func TestAppendAndReadBack(t *testing.T) {
	forEachIO(t, func(t *testing.T, x ioring.IO) {
		clk := newClock()
		l := openLog(t, t.TempDir(), smallConfig(), Options{IO: x, Now: clk.Now})
		defer l.Close()
		var want []byte
		next := int64(0)
		for i := range 300 {
			var round [][]byte
			for j := range 1 + i%4 {
				round = append(round, mkBatch(t, 1+j, 50+i%200, clk.now.UnixMilli(), i*7+j))
			}
			res, err := l.Append(round, AppendOptions{LeaderEpoch: 3})
			if err != nil {
				t.Fatal(err)
			}
			if res.BaseOffset != next {
				t.Fatalf("round %d: base offset %d, want %d", i, res.BaseOffset, next)
			}
			for _, b := range round {
				want = append(want, stamped(t, b, next, 3)...)
				h, _ := batch.ParseHeader(b)
				next += int64(h.LastOffsetDelta) + 1
			}
			clk.advance(time.Millisecond)
		}
		if l.LEO() != next {
			t.Fatalf("LEO %d, want %d", l.LEO(), next)
		}
		if l.Segments() < 3 {
			t.Fatalf("%d segments: expected rolls at 64 KiB", l.Segments())
		}
		sameBytes(t, readAll(t, l), want, "full read")
		// Every offset reads back from the batch that holds it.
		for off := int64(0); off < next; off += 7 {
			b, err := l.ReadBatches(off, 1, l.LEO())
			if err != nil {
				t.Fatal(err)
			}
			hs := splitBatches(t, b)
			if len(hs) != 1 || hs[0].BaseOffset > off || hs[0].LastOffset() < off {
				t.Fatalf("offset %d: got batches %v", off, hs)
			}
		}
		if got := l.Epochs(); !slices.Equal(got, []EpochEntry{{3, 0}}) {
			t.Fatalf("epochs %v", got)
		}
	})
}

func TestSegmentFilesAndIndexes(t *testing.T) {
	dir := t.TempDir()
	cfg := smallConfig()
	l := openLog(t, dir, cfg, Options{})
	for i := range 800 {
		if _, err := l.Append([][]byte{mkBatch(t, 2, 150, int64(1000+i), i)}, AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	segs := l.segs
	for i, s := range segs {
		name := filepath.Base(s.path(logSuffix))
		if len(name) != 24 || name != segmentName(s.base)+".log" {
			t.Fatalf("segment name %q", name)
		}
		st, _ := os.Stat(s.path(indexSuffix))
		tst, _ := os.Stat(s.path(timeIndexSuffix))
		if i < len(segs)-1 {
			// Rolled segments are trimmed to their entries.
			if st.Size() != int64(s.offsets.count.Load())*8 || tst.Size() != int64(s.times.count.Load())*12 {
				t.Fatalf("segment %d: index sizes %d/%d for %d/%d entries", i, st.Size(), tst.Size(), s.offsets.count.Load(), s.times.count.Load())
			}
			if s.size() > cfg.SegmentBytes {
				t.Fatalf("segment %d is %d bytes, over segment.bytes", i, s.size())
			}
			// Sparse: an entry once more than an interval of bytes has gone
			// by, so entries are between one and two intervals apart.
			bsize := int64(len(mkBatch(t, 2, 150, 0, 0)))
			n := int64(s.offsets.count.Load())
			if n < s.size()/(cfg.IndexIntervalBytes+bsize)-1 || n > s.size()/cfg.IndexIntervalBytes {
				t.Fatalf("segment %d: %d entries for %d bytes", i, s.offsets.count.Load(), s.size())
			}
		} else if st.Size() != cfg.SegmentIndexBytes/8*8 || tst.Size() != cfg.SegmentIndexBytes/12*12 {
			// The active segment's indexes are preallocated.
			t.Fatalf("active index sizes %d/%d", st.Size(), tst.Size())
		}
		offs, times := indexEntries(s)
		for j := 1; j < len(offs); j++ {
			if offs[j][0] <= offs[j-1][0] || offs[j][1] <= offs[j-1][1] {
				t.Fatalf("offset index not increasing: %v", offs)
			}
		}
		for j := 1; j < len(times); j++ {
			if times[j][0] <= times[j-1][0] {
				t.Fatalf("time index not increasing: %v", times)
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// After a clean close the active indexes are trimmed too.
	last := filepath.Join(dir, segmentName(segs[len(segs)-1].base)+indexSuffix)
	if st, _ := os.Stat(last); st.Size()%8 != 0 || st.Size() >= cfg.SegmentIndexBytes {
		t.Fatalf("active index not trimmed on close: %d bytes", st.Size())
	}
}

func TestRollBySegmentMs(t *testing.T) {
	clk := newClock()
	cfg := DefaultConfig()
	cfg.SegmentMs = 1000
	l := openLog(t, t.TempDir(), cfg, Options{Now: clk.Now})
	defer l.Close()
	now := func() int64 { return clk.now.UnixMilli() }
	l.Append([][]byte{mkBatch(t, 1, 10, now(), 1)}, AppendOptions{})
	clk.advance(500 * time.Millisecond)
	l.Append([][]byte{mkBatch(t, 1, 10, now(), 2)}, AppendOptions{})
	if l.Segments() != 1 {
		t.Fatalf("rolled before segment.ms")
	}
	clk.advance(600 * time.Millisecond)
	l.Append([][]byte{mkBatch(t, 1, 10, now(), 3)}, AppendOptions{})
	if l.Segments() != 2 || l.active.base != 2 {
		t.Fatalf("want a roll at offset 2 after segment.ms, have %d segments, active at %d", l.Segments(), l.active.base)
	}
}

func TestReadLimits(t *testing.T) {
	l := openLog(t, t.TempDir(), smallConfig(), Options{})
	defer l.Close()
	var sizes []int
	for i := range 20 {
		b := mkBatch(t, 5, 100, 1, i) // offsets 5i .. 5i+4
		sizes = append(sizes, len(b))
		l.Append([][]byte{b}, AppendOptions{})
	}
	// The high watermark bound: nothing of the batch holding offset 50.
	b, err := l.ReadBatches(0, 1<<20, 50)
	if err != nil {
		t.Fatal(err)
	}
	if hs := splitBatches(t, b); len(hs) != 10 || hs[9].LastOffset() != 49 {
		t.Fatalf("read below HW 50: %d batches", len(hs))
	}
	// An upper bound inside a batch excludes that batch.
	b, _ = l.ReadBatches(0, 1<<20, 52)
	if hs := splitBatches(t, b); len(hs) != 10 {
		t.Fatalf("read below 52: %d batches", len(hs))
	}
	// maxBytes cuts inside a batch; minOne returns at least one whole batch.
	res, err := l.Read(12, 10, l.LEO(), false)
	if err != nil || res.Bytes != 10 {
		t.Fatalf("Read(maxBytes 10) = %v, %v", res, err)
	}
	res.Release()
	res, _ = l.Read(12, 10, l.LEO(), true)
	if res.Bytes != int64(sizes[2]) || res.Regions[0].Pos != int64(sizes[0]+sizes[1]) {
		t.Fatalf("minOne read: %d bytes at %d", res.Bytes, res.Regions[0].Pos)
	}
	res.Release()
	// At the LEO: empty. Beyond it, or below the log start: out of range.
	res, err = l.Read(l.LEO(), 100, l.LEO(), true)
	if err != nil || res.Bytes != 0 {
		t.Fatalf("read at LEO: %v %v", res, err)
	}
	res.Release()
	if _, err := l.Read(l.LEO()+1, 100, l.LEO(), true); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("read past LEO: %v", err)
	}
	if _, err := l.DeleteRecordsBefore(30); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(29, 100, l.LEO(), true); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("read below log start: %v", err)
	}
}

func TestOffsetForTimestamp(t *testing.T) {
	for _, codec := range []batch.Codec{batch.None, batch.Zstd, batch.Gzip, batch.LZ4, batch.Snappy} {
		t.Run(codec.String(), func(t *testing.T) {
			l := openLog(t, t.TempDir(), smallConfig(), Options{})
			defer l.Close()
			// Batch i holds 10 records stamped 1000*i + 10*j.
			for i := range 100 {
				recs := make([]batch.Record, 10)
				for j := range recs {
					recs[j] = batch.Record{OffsetDelta: int32(j), TimestampDelta: int64(10 * j), Value: make([]byte, 100)}
				}
				h := batch.Header{LastOffsetDelta: 9, BaseTimestamp: int64(1000 * i), MaxTimestamp: int64(1000*i + 90), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
				b, err := batch.Build(nil, h, codec, recs)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := l.Append([][]byte{b}, AppendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range []struct{ ts, off, at int64 }{
				{0, 0, 0}, {5, 1, 10}, {10, 1, 10}, {995, 10, 1000}, {45_055, 456, 45_060}, {99_090, 999, 99_090},
			} {
				off, at, err := l.OffsetForTimestamp(c.ts, l.LEO())
				if err != nil || off != c.off || at != c.at {
					t.Fatalf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d", c.ts, off, at, err, c.off, c.at)
				}
			}
			if _, _, err := l.OffsetForTimestamp(99_091, l.LEO()); !errors.Is(err, ErrNotFound) {
				t.Fatalf("past the last timestamp: %v", err)
			}
			// Bounded by upper (the high watermark).
			if _, _, err := l.OffsetForTimestamp(50_000, 500); !errors.Is(err, ErrNotFound) {
				t.Fatalf("beyond upper: %v", err)
			}
			if ts, off := l.MaxTimestamp(); ts != 99_090 || off != 999 {
				t.Fatalf("MaxTimestamp = %d, %d", ts, off)
			}
		})
	}
}

func TestLogAppendTime(t *testing.T) {
	clk := newClock()
	l := openLog(t, t.TempDir(), DefaultConfig(), Options{Now: clk.Now})
	defer l.Close()
	b := mkBatch(t, 3, 10, 5, 1)
	res, err := l.Append([][]byte{b}, AppendOptions{LogAppendTime: true})
	if err != nil || res.LogAppendTime != clk.now.UnixMilli() {
		t.Fatalf("append: %v %v", res, err)
	}
	h, err := batch.Validate(readAll(t, l), batch.Stored)
	if err != nil || !h.LogAppendTime() || h.MaxTimestamp != clk.now.UnixMilli() {
		t.Fatalf("stored batch %+v, %v", h, err)
	}
	if off, ts, err := l.OffsetForTimestamp(clk.now.UnixMilli(), l.LEO()); err != nil || off != 0 || ts != clk.now.UnixMilli() {
		t.Fatalf("by time: %d %d %v", off, ts, err)
	}
}

func TestAppendRejectsBadBatches(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxMessageBytes = 2000
	l := openLog(t, t.TempDir(), cfg, Options{})
	defer l.Close()
	l.Append([][]byte{mkBatch(t, 1, 10, 1, 1)}, AppendOptions{})
	good := mkBatch(t, 1, 10, 1, 2)
	bad := mkBatch(t, 2, 10, 1, 3)
	bad[len(bad)-1] ^= 1
	cases := map[string]struct {
		batches [][]byte
		want    error
	}{
		"crc":       {[][]byte{good, bad}, ErrInvalidBatch},
		"too large": {[][]byte{mkBatch(t, 1, 3000, 1, 4)}, ErrBatchTooBig},
		"empty":     {nil, ErrEmpty},
		"truncated": {[][]byte{good[:len(good)-1]}, ErrInvalidBatch},
	}
	for name, c := range cases {
		if _, err := l.Append(c.batches, AppendOptions{}); !errors.Is(err, c.want) {
			t.Fatalf("%s: err %v, want %v", name, err, c.want)
		}
	}
	if l.LEO() != 1 {
		t.Fatalf("rejected appends moved the LEO to %d", l.LEO())
	}
	// A replica append must not go back.
	old := mkBatch(t, 1, 10, 1, 5) // base offset 0 < LEO 1
	if _, err := l.Append([][]byte{old}, AppendOptions{Replica: true}); !errors.Is(err, ErrOffsetOrder) {
		t.Fatalf("replica batch below LEO: %v", err)
	}
	if _, err := l.Append([][]byte{good}, AppendOptions{}); err != nil {
		t.Fatalf("good append after rejections: %v", err)
	}
}

func TestReplicaAppendKeepsOffsetsAndEpochs(t *testing.T) {
	leader := openLog(t, t.TempDir(), smallConfig(), Options{})
	defer leader.Close()
	for i := range 30 {
		leader.Append([][]byte{mkBatch(t, 2, 30, 1, i)}, AppendOptions{LeaderEpoch: int32(i / 10)})
	}
	follower := openLog(t, t.TempDir(), smallConfig(), Options{})
	defer follower.Close()
	data := readAll(t, leader)
	var batches [][]byte
	for _, h := range splitBatches(t, data) {
		_ = h
	}
	for len(data) > 0 {
		h, _ := batch.ParseHeader(data)
		batches = append(batches, data[:h.Size()])
		data = data[h.Size():]
	}
	if _, err := follower.Append(batches, AppendOptions{Replica: true}); err != nil {
		t.Fatal(err)
	}
	sameBytes(t, readAll(t, follower), readAll(t, leader), "follower log")
	if !slices.Equal(follower.Epochs(), leader.Epochs()) || len(leader.Epochs()) != 3 {
		t.Fatalf("epochs: follower %v leader %v", follower.Epochs(), leader.Epochs())
	}
}

func TestEndOffsetForEpoch(t *testing.T) {
	c := epochCache{dir: t.TempDir()}
	for _, e := range []EpochEntry{{1, 0}, {3, 100}, {4, 150}, {7, 300}} {
		c.assign(e.Epoch, e.StartOffset)
	}
	leo := int64(400)
	for _, tc := range []struct {
		req      int32
		epoch    int32
		endOffst int64
	}{
		{UndefinedEpoch, UndefinedEpoch, UndefinedOffset},
		{7, 7, 400}, // the latest epoch ends at the LEO
		{4, 4, 300}, // ends where epoch 7 starts
		{5, 4, 300}, // unknown epoch between: the largest below it
		{2, 1, 100}, // walks back to epoch 1 (KIP-279)
		{0, 0, 0},   // older than all: the first start offset
		{9, UndefinedEpoch, UndefinedOffset},
	} {
		e, o := c.endOffsetFor(tc.req, leo)
		if e != tc.epoch || o != tc.endOffst {
			t.Fatalf("endOffsetFor(%d) = %d, %d; want %d, %d", tc.req, e, o, tc.epoch, tc.endOffst)
		}
	}
	if err := c.persist(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(c.dir, epochFile))
	if string(b) != "0\n4\n1 0\n3 100\n4 150\n7 300\n" {
		t.Fatalf("checkpoint file:\n%s", b)
	}
	got, err := parseEpochFile(b)
	if err != nil || !slices.Equal(got, c.entries) {
		t.Fatalf("parse: %v %v", got, err)
	}
	c.truncateFromEnd(150)
	c.truncateFromStart(120)
	if !slices.Equal(c.entries, []EpochEntry{{3, 120}}) {
		t.Fatalf("after truncations: %v", c.entries)
	}
	for _, bad := range []string{"", "1\n0\n", "0\n2\n1 0\n", "0\n1\nx 0\n", "0\n2\n3 10\n2 20\n", "0\n-1\n"} {
		if _, err := parseEpochFile([]byte(bad)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("parse %q: %v", bad, err)
		}
	}
}

func TestTruncateTo(t *testing.T) {
	forEachIO(t, func(t *testing.T, x ioring.IO) {
		l := openLog(t, t.TempDir(), smallConfig(), Options{IO: x})
		defer l.Close()
		var prefix []byte
		for i := range 200 {
			b := mkBatch(t, 3, 200, int64(i*10), i)
			l.Append([][]byte{b}, AppendOptions{LeaderEpoch: int32(i / 50)})
			if i < 70 {
				prefix = append(prefix, stamped(t, b, int64(i*3), int32(i/50))...)
			}
		}
		segs := l.Segments()
		// Offset 211 lies in batch 70 (offsets 210-212): it goes whole.
		if err := l.TruncateTo(211); err != nil {
			t.Fatal(err)
		}
		if l.LEO() != 210 {
			t.Fatalf("LEO %d after truncate to 211, want 210", l.LEO())
		}
		if l.Segments() >= segs {
			t.Fatalf("later segments not dropped: %d -> %d", segs, l.Segments())
		}
		sameBytes(t, readAll(t, l), prefix, "log after truncation")
		if got := l.Epochs(); !slices.Equal(got, []EpochEntry{{0, 0}, {1, 150}}) {
			t.Fatalf("epochs after truncation: %v", got)
		}
		// Appends continue at the new LEO, in the re-activated segment.
		res, err := l.Append([][]byte{mkBatch(t, 1, 10, 5000, 9)}, AppendOptions{LeaderEpoch: 5})
		if err != nil || res.BaseOffset != 210 {
			t.Fatalf("append after truncation: %v %v", res, err)
		}
		if e, o := l.EndOffsetForEpoch(1); e != 1 || o != 210 {
			t.Fatalf("end of epoch 1: %d %d", e, o)
		}
		// Below the log start: the log restarts there.
		l.DeleteRecordsBefore(60)
		if err := l.TruncateTo(30); err != nil {
			t.Fatal(err)
		}
		if l.LEO() != 30 || l.LogStartOffset() != 30 || l.Segments() != 1 || l.Size() != 0 {
			t.Fatalf("after truncating below the start: LEO %d start %d segs %d", l.LEO(), l.LogStartOffset(), l.Segments())
		}
	})
}

func TestDeleteRecordsAndRetention(t *testing.T) {
	clk := newClock()
	dir := t.TempDir()
	cfg := smallConfig()
	l := openLog(t, dir, cfg, Options{Now: clk.Now})
	for i := range 300 {
		l.Append([][]byte{mkBatch(t, 2, 400, clk.now.UnixMilli(), i)}, AppendOptions{})
		clk.advance(time.Second)
	}
	segs := l.Segments()
	if _, err := l.DeleteRecordsBefore(l.LEO() + 1); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("delete past LEO: %v", err)
	}
	start, err := l.DeleteRecordsBefore(201)
	if err != nil || start != 201 || l.LogStartOffset() != 201 {
		t.Fatalf("DeleteRecordsBefore: %d %v", start, err)
	}
	if l.Segments() >= segs {
		t.Fatal("no segment deleted below the new log start")
	}
	b, _ := l.ReadBatches(201, 1, l.LEO())
	if hs := splitBatches(t, b); hs[0].BaseOffset != 200 {
		t.Fatalf("read at the log start returns batch %d", hs[0].BaseOffset)
	}

	// Size retention keeps at most retention.bytes, never beyond upper.
	cfg.RetentionBytes = 100 << 10
	l.SetConfig(cfg)
	if n, _ := l.EnforceRetention(0); n != 0 {
		t.Fatalf("retention deleted %d segments above upper 0", n)
	}
	// As in Kafka, whole segments go while the log stays above the limit
	// without them: it ends less than one segment over.
	n, err := l.EnforceRetention(l.LEO())
	if err != nil || n == 0 || l.Size()-l.segs[0].size() >= cfg.RetentionBytes {
		t.Fatalf("size retention: deleted %d, size %d, err %v", n, l.Size(), err)
	}
	// Time retention: everything is older than an hour; the active segment
	// is rolled and deleted too, and the log restarts empty at the LEO.
	cfg.RetentionBytes, cfg.RetentionMs = -1, 3600_000
	l.SetConfig(cfg)
	clk.advance(2 * time.Hour)
	leo := l.LEO()
	if _, err := l.EnforceRetention(l.LEO()); err != nil {
		t.Fatal(err)
	}
	if l.Segments() != 1 || l.Size() != 0 || l.LogStartOffset() != leo || l.LEO() != leo {
		t.Fatalf("after time retention: %d segments, %d bytes, start %d, LEO %d", l.Segments(), l.Size(), l.LogStartOffset(), l.LEO())
	}
	ents, _ := os.ReadDir(dir)
	logs := 0
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".log" {
			logs++
		}
	}
	if logs != 1 {
		t.Fatalf("%d .log files left on disk", logs)
	}
	l.Close()
	// The log start offset survives a restart.
	l = openLog(t, dir, cfg, Options{Now: clk.Now})
	defer l.Close()
	if l.LogStartOffset() != leo || l.LEO() != leo {
		t.Fatalf("after restart: start %d LEO %d, want %d", l.LogStartOffset(), l.LEO(), leo)
	}
}

func TestFlushPolicies(t *testing.T) {
	clk := newClock()
	cfg := DefaultConfig()
	cfg.Flush, cfg.FlushMessages, cfg.FlushMs = FlushInterval, 10, 1000
	l := openLog(t, t.TempDir(), cfg, Options{Now: clk.Now})
	defer l.Close()
	synced := func(n int) bool {
		t.Helper()
		res, err := l.Append([][]byte{mkBatch(t, n, 10, 1, n)}, AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Synced
	}
	if synced(4) || synced(4) || !synced(4) || synced(1) {
		t.Fatal("flush.messages=10 should sync the append that reaches 12 messages only")
	}
	if l.PrepareFlush(false) != nil {
		t.Fatal("flush due before flush.ms")
	}
	clk.advance(2 * time.Second)
	tk := l.PrepareFlush(false)
	if tk == nil || len(tk.Ops) != 1 || tk.Ops[0].Kind != ioring.OpSync {
		t.Fatalf("flush task after flush.ms: %+v", tk)
	}
	if err := l.run(tk.Ops, tk); err != nil || tk.Err != nil || l.unflushedMsgs != 0 {
		t.Fatalf("flush: %v %v, %d unflushed", err, tk.Err, l.unflushedMsgs)
	}
	cfg.Flush = FlushAlways
	l.SetConfig(cfg)
	if !synced(1) {
		t.Fatal("flush policy always did not sync")
	}
	cfg.Flush = FlushNever
	l.SetConfig(cfg)
	if synced(100) {
		t.Fatal("flush policy never synced")
	}
}

func TestCleanShutdownSkipsRecovery(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, smallConfig(), Options{})
	for i := range 150 {
		l.Append([][]byte{mkBatch(t, 2, 300, int64(i), i)}, AppendOptions{LeaderEpoch: 2})
	}
	want, leo := readAll(t, l), l.LEO()
	var wantIdx [][2][][2]int64
	for _, s := range l.segs {
		o, ti := indexEntries(s)
		wantIdx = append(wantIdx, [2][][2]int64{o, ti})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, smallConfig(), Options{})
	if r := l.Recovery(); !r.Clean || r.SegmentsScanned != 0 || r.BatchesScanned != 0 {
		t.Fatalf("recovery after clean shutdown: %+v", r)
	}
	if l.LEO() != leo {
		t.Fatalf("LEO %d, want %d", l.LEO(), leo)
	}
	sameBytes(t, readAll(t, l), want, "log after clean restart")
	for i, s := range l.segs {
		o, ti := indexEntries(s)
		if !slices.Equal(o, wantIdx[i][0]) || !slices.Equal(ti, wantIdx[i][1]) {
			t.Fatalf("segment %d: indexes differ after restart", i)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, cleanMarkerFile)); !os.IsNotExist(err) {
		t.Fatal("clean-shutdown marker still present after open")
	}
	// A crash now must lead to a scan of the active segment only.
	l.Append([][]byte{mkBatch(t, 1, 10, 1, 1)}, AppendOptions{LeaderEpoch: 2})
	crash(l)
	l = openLog(t, dir, smallConfig(), Options{})
	defer l.Close()
	if r := l.Recovery(); r.Clean || r.SegmentsScanned != 1 || r.TruncatedBytes != 0 {
		t.Fatalf("recovery after crash: %+v", r)
	}
	if l.LEO() != leo+1 {
		t.Fatalf("LEO %d after crash, want %d", l.LEO(), leo+1)
	}
}

func TestRecoveryPointAdvancesOnRoll(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, smallConfig(), Options{})
	for i := range 300 {
		l.Append([][]byte{mkBatch(t, 1, 500, 1, i)}, AppendOptions{})
	}
	if l.recoveryPoint != l.active.base || len(l.rollFlushes) != 0 {
		t.Fatalf("recovery point %d, active base %d, %d syncs pending", l.recoveryPoint, l.active.base, len(l.rollFlushes))
	}
	c, ok, err := readLogCheckpoint(dir)
	if err != nil || !ok || c.recoveryPoint != l.active.base {
		t.Fatalf("checkpoint %+v %v %v", c, ok, err)
	}
	crash(l)
	l = openLog(t, dir, smallConfig(), Options{})
	defer l.Close()
	if r := l.Recovery(); r.SegmentsScanned != 1 {
		t.Fatalf("scanned %d segments, want only the active one", r.SegmentsScanned)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, mut := range []func(*Config){
		func(c *Config) { c.SegmentBytes = 0 },
		func(c *Config) { c.SegmentBytes = math.MaxInt32 + 1 },
		func(c *Config) { c.SegmentIndexBytes = 3 },
		func(c *Config) { c.FlushMessages = 0 },
		func(c *Config) { c.Flush = 9 },
	} {
		c := DefaultConfig()
		mut(&c)
		if _, err := Open(t.TempDir(), c, Options{}); !errors.Is(err, ErrConfig) {
			t.Fatalf("config %+v accepted: %v", c, err)
		}
	}
	for _, s := range []string{"always", "interval", "never"} {
		if p, err := ParseFlushPolicy(s); err != nil || p.String() != s {
			t.Fatalf("ParseFlushPolicy(%q) = %v %v", s, p, err)
		}
	}
	if _, err := ParseFlushPolicy("sometimes"); err == nil {
		t.Fatal("unknown flush policy accepted")
	}
}

func TestScanHeaders(t *testing.T) {
	l := openLog(t, t.TempDir(), smallConfig(), Options{})
	defer l.Close()
	for i := range 300 {
		l.Append([][]byte{mkBatch(t, 3, 300, 1, i)}, AppendOptions{})
	}
	l.DeleteRecordsBefore(31)
	var got []int64
	err := l.ScanHeaders(100, 700, func(h batch.Header) error {
		got = append(got, h.BaseOffset)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 201 || got[0] != 99 || got[200] != 699 {
		t.Fatalf("scanned %d headers from %v to %v", len(got), got[0], got[len(got)-1])
	}
	got = got[:0]
	l.ScanHeaders(0, 40, func(h batch.Header) error { got = append(got, h.BaseOffset); return nil })
	if !slices.Equal(got, []int64{30, 33, 36, 39}) {
		t.Fatalf("scan from below the log start: %v", got)
	}
	stop := errors.New("stop")
	if err := l.ScanHeaders(0, 900, func(batch.Header) error { return stop }); err != stop {
		t.Fatalf("fn's error: %v", err)
	}
}
