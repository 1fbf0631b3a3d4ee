package segment

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ringlog/ioring"
)

// logFileSize is the size on disk of the segment file based at base.
func logFileSize(t *testing.T, dir string, base int64) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, segmentName(base)+logSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestDirectWrites: with DirectWrites on a file system that offers direct
// I/O, appends go to the active segment with O_DIRECT: its blocks are
// reserved ahead (the file is larger than its data while it is active),
// batches of every size across block boundaries read back as written, a
// roll cuts the rolled segment to its data, a clean shutdown cuts the
// active one, and after a crash recovery cuts the reserved zeros and keeps
// every batch. Without the feature the file never runs ahead of its data.
func TestDirectWrites(t *testing.T) {
	for name, mode := range map[string]ioring.Mode{"portable": ioring.ModePortable, "uring": ioring.ModeUring} {
		t.Run(name, func(t *testing.T) {
			x, _, err := ioring.Open(mode, ioring.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			dir := t.TempDir()
			cfg := smallConfig()
			cfg.SegmentBytes = 256 << 10
			clk := newClock()
			opts := Options{IO: x, Now: clk.Now, DirectWrites: true}
			l := openLog(t, dir, cfg, opts)
			var want []byte
			var sizes []int64
			for i := range 120 {
				// 1 to 3 batches of 61 to 1,760 bytes: the segment's end falls
				// anywhere in a block.
				var round [][]byte
				for j := range 1 + i%3 {
					round = append(round, mkBatch(t, 1+j, 1+(i*37)%1700, clk.now.UnixMilli(), i*5+j))
				}
				res, err := l.Append(round, AppendOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, stampedAll(t, round, res.BaseOffset, 0)...)
				if why := l.DirectWritesOff(); why != "" {
					t.Fatalf("direct writes off on %s: %s", dir, why)
				}
				sizes = append(sizes, l.active.written)
				sameBytes(t, readAll(t, l), want, "read after append")
			}
			if l.Segments() < 2 {
				t.Fatalf("%d segments: the test wants a roll", l.Segments())
			}
			set := l.acquire()
			for _, s := range set.segs[:len(set.segs)-1] {
				if got := logFileSize(t, dir, s.base); got != s.size() {
					t.Errorf("rolled segment %d: file of %d bytes, data %d: the reserved blocks were not cut", s.base, got, s.size())
				}
			}
			a := set.segs[len(set.segs)-1]
			set.release()
			if got := logFileSize(t, dir, a.base); got <= a.size() {
				t.Errorf("active segment: file of %d bytes, data %d: no blocks reserved ahead (direct writes not used)", got, a.size())
			}

			// A crash: the reserved zeros are a torn tail to recovery.
			leo := l.LEO()
			crash(l)
			l = openLog(t, dir, cfg, opts)
			if l.LEO() != leo {
				t.Fatalf("after a crash: LEO %d, want %d", l.LEO(), leo)
			}
			if ri := l.Recovery(); ri.TruncatedBytes != 0 || ri.ZeroBytes == 0 {
				t.Errorf("recovery after the crash: %+v, want only zeros cut", ri)
			}
			sameBytes(t, readAll(t, l), want, "read after a crash")
			// Appends go on after recovery (the partial block read back).
			more := mkBatch(t, 2, 333, clk.now.UnixMilli(), 999)
			res, err := l.Append([][]byte{more}, AppendOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, stamped(t, more, res.BaseOffset, 0)...)
			sameBytes(t, readAll(t, l), want, "read after a crash and an append")

			// A clean shutdown cuts the active segment to its data, and the
			// next open trusts it without a scan.
			base := l.active.base
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if got, want := logFileSize(t, dir, base), int64(len(want))-sumBefore(t, dir, base); got != want {
				t.Errorf("after a clean shutdown: active file of %d bytes, want %d", got, want)
			}
			l = openLog(t, dir, cfg, opts)
			defer l.Close()
			if ri := l.Recovery(); !ri.Clean || ri.SegmentsScanned != 0 {
				t.Errorf("after a clean shutdown: recovery %+v", ri)
			}
			sameBytes(t, readAll(t, l), want, "read after a clean shutdown")
		})
	}
}

// sumBefore is the bytes of the segment files of dir based below base.
func sumBefore(t *testing.T, dir string, base int64) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if b, ok := parseSegmentName(e.Name(), logSuffix); ok && b < base {
			n += logFileSize(t, dir, b)
		}
	}
	return n
}

// TestDirectWritesFallBack: on a file system without direct I/O (tmpfs)
// the log says why and appends through the page cache.
func TestDirectWritesFallBack(t *testing.T) {
	dir, err := os.MkdirTemp("/dev/shm", "ringlog-direct-")
	if err != nil {
		t.Fatalf("a tmpfs directory for the test: %v", err)
	}
	defer os.RemoveAll(dir)
	l := openLog(t, dir, smallConfig(), Options{DirectWrites: true})
	defer l.Close()
	b := mkBatch(t, 3, 100, 1, 1)
	if _, err := l.Append([][]byte{b}, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if l.DirectWritesOff() == "" {
		t.Fatalf("direct writes on for a tmpfs directory")
	}
	t.Logf("falls back: %s", l.DirectWritesOff())
	sameBytes(t, readAll(t, l), b, "read back")
	if got := logFileSize(t, dir, 0); got != int64(len(b)) {
		t.Errorf("file of %d bytes, data %d", got, len(b))
	}
}

// TestDirectWritesTailCache: a direct-written active segment's latest
// batches are read from memory (Mem regions, the tail cache), its older
// ones and a rolled segment's from the file, with the same bytes either
// way; the cache holds at most tailCacheBytes; a truncation empties it
// (the positions past the cut are written again); the next appends start
// it over.
func TestDirectWritesTailCache(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 64 << 20
	l := openLog(t, t.TempDir(), cfg, Options{DirectWrites: true})
	defer l.Close()
	var want []byte
	var ends []int64 // LEO after each append
	for i := range 300 {
		b := mkBatch(t, 8, 1000+i%500, 1, i)
		res, err := l.Append([][]byte{b}, AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, stamped(t, b, res.BaseOffset, 0)...)
		ends = append(ends, l.LEO())
	}
	sameBytes(t, readAll(t, l), want, "read back")
	kinds := func(offset int64) (mem, file int64) {
		_, mem, file, err := readRegions(l, offset, l.LEO())
		if err != nil {
			t.Fatal(err)
		}
		return mem, file
	}
	// The last append is cached; the first is not (2.6 MB written, the
	// cache keeps 2 MiB at most).
	if mem, file := kinds(ends[len(ends)-2]); mem == 0 || file != 0 {
		t.Fatalf("the last append: %d bytes from memory, %d from the file", mem, file)
	}
	mem, file := kinds(0)
	if mem == 0 || file == 0 || mem > tailCacheBytes {
		t.Fatalf("the whole log: %d bytes from memory, %d from the file", mem, file)
	}
	// A truncation empties the cache; appends after it fill it again,
	// with the new batches at the old positions.
	cut := ends[200]
	if err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	if mem, _ := kinds(0); mem != 0 {
		t.Fatalf("%d bytes from memory after a truncation", mem)
	}
	want = want[:l.active.size()]
	for i := range 5 {
		b := mkBatch(t, 3, 700, 1, 1000+i)
		res, err := l.Append([][]byte{b}, AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, stamped(t, b, res.BaseOffset, 0)...)
	}
	if mem, _ := kinds(cut); mem == 0 {
		t.Fatal("nothing from memory after the appends that followed the truncation")
	}
	sameBytes(t, readAll(t, l), want, "read back after the truncation")
	// The cut of a roll or a clean shutdown drops the cache.
	a := l.active
	if err := a.trimDirect(); err != nil {
		t.Fatal(err)
	}
	if tc := a.cache.p.Load(); tc != nil {
		t.Fatalf("a segment cut to its data keeps %d cached chunks", len(tc.chunks))
	}
	sameBytes(t, readAll(t, l), want, "read back from the file")
}

// TestTailBudget: logs sharing a TailBudget hold in their tail caches no
// more than its bytes together, each its share; with more logs than the
// budget serves their appends are not cached and readers get the file;
// closing the logs gives everything back.
func TestTailBudget(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 64 << 20
	budget := &TailBudget{Bytes: 1 << 20}
	dir := t.TempDir()
	var logs []*Log
	fromMemory := func(l *Log) int64 {
		_, mem, _, err := readRegions(l, 0, l.LEO())
		if err != nil {
			t.Fatal(err)
		}
		return mem
	}
	appendTo := func(l *Log, n int) []byte {
		var want []byte
		for i := range n {
			b := mkBatch(t, 8, 1000, 1, i)
			res, err := l.Append([][]byte{b}, AppendOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, stamped(t, b, res.BaseOffset, 0)...)
		}
		return want
	}
	// Four logs of 1.2 MB each: a quarter of the budget each at most.
	var wants [][]byte
	for i := range 4 {
		l := openLog(t, filepath.Join(dir, fmt.Sprint("a", i)), cfg, Options{DirectWrites: true, TailBudget: budget})
		logs = append(logs, l)
		wants = append(wants, appendTo(l, 150))
	}
	if held := budget.Held(); held == 0 || held > budget.Bytes {
		t.Fatalf("4 logs hold %d bytes in their tail caches, budget %d", held, budget.Bytes)
	}
	for i, l := range logs {
		if mem := fromMemory(l); mem == 0 || mem > budget.Bytes/3 {
			t.Fatalf("log %d: %d bytes from memory, want some and at most about a quarter of %d", i, mem, budget.Bytes)
		}
		sameBytes(t, readAll(t, l), wants[i], "read back")
	}
	// 60 more: the shares shrink, the caches above theirs are trimmed,
	// and what all the logs serve from memory stays within the budget.
	for i := range 60 {
		l := openLog(t, filepath.Join(dir, fmt.Sprint("b", i)), cfg, Options{DirectWrites: true, TailBudget: budget})
		logs = append(logs, l)
		wants = append(wants, appendTo(l, 20))
	}
	if held := budget.Held(); held > budget.Bytes {
		t.Fatalf("64 logs hold %d bytes in their tail caches, budget %d", held, budget.Bytes)
	}
	var served int64
	for i, l := range logs {
		served += fromMemory(l)
		sameBytes(t, readAll(t, l), wants[i], "read back")
	}
	if served == 0 || served > budget.Bytes {
		t.Fatalf("64 logs serve %d bytes from memory, budget %d", served, budget.Bytes)
	}
	// A budget smaller than one append caches nothing.
	tiny := &TailBudget{Bytes: 4 << 10}
	l := openLog(t, filepath.Join(dir, "tiny"), cfg, Options{DirectWrites: true, TailBudget: tiny})
	logs = append(logs, l)
	want := appendTo(l, 5)
	if mem := fromMemory(l); mem != 0 || tiny.Held() != 0 {
		t.Fatalf("a 4 KiB budget: %d bytes from memory, %d held, with appends of 8 KB", mem, tiny.Held())
	}
	sameBytes(t, readAll(t, l), want, "read back from the file")
	for _, l := range logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if held, n := budget.Held(), budget.n.Load(); held != 0 || n != 0 {
		t.Fatalf("after every log closed the budget counts %d bytes in %d caches", held, n)
	}
}

// TestTailBudgetConcurrent: logs sharing a small budget, each appended to
// by its writer while a reader reads its end: one log's append trims the
// others' caches under their readers (a chunk pinned by a reader stays
// whole until released; the CRCs of every batch read say so), and the
// race detector watches the budget's counters and the caches' lists.
func TestTailBudgetConcurrent(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 64 << 20
	budget := &TailBudget{Bytes: 128 << 10}
	dir := t.TempDir()
	var wg sync.WaitGroup
	var fromMem atomic.Int64
	errs := make(chan error, 16)
	for i := range 4 {
		l := openLog(t, filepath.Join(dir, fmt.Sprint(i)), cfg, Options{DirectWrites: true, TailBudget: budget})
		var done atomic.Bool
		wg.Go(func() {
			defer done.Store(true)
			for j := range 200 {
				if _, err := l.Append([][]byte{mkBatch(t, 8, 1000, 1, j)}, AppendOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for reads := 0; !done.Load() || reads == 0; reads++ {
				// The bytes are copied while their regions are pinned: a
				// chunk trimmed and its buffer reused under a reader would
				// fail its CRC here.
				leo := l.LEO()
				b, mem, _, err := readRegions(l, max(0, leo-40), leo)
				if err == nil {
					err = splitBatchesErr(b)
				}
				if err != nil {
					errs <- fmt.Errorf("log %d at %d: %w", i, leo, err)
					return
				}
				fromMem.Add(mem)
			}
		})
		t.Cleanup(func() { l.Close() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if held := budget.Held(); held > budget.Bytes {
		t.Errorf("the caches hold %d bytes, budget %d", held, budget.Bytes)
	}
	if fromMem.Load() == 0 {
		t.Error("the readers got nothing from the tail caches: the budget's sharing went untested")
	}
}

// TestTailCacheSmallAppends: many small appends (one record each, as
// transaction markers and unbatched producers make) share copy buffers,
// and the cache's list, copied by every append, stays short; what it
// holds reads back right.
func TestTailCacheSmallAppends(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 64 << 20
	l := openLog(t, t.TempDir(), cfg, Options{DirectWrites: true})
	defer l.Close()
	var want []byte
	for i := range 3000 {
		b := mkBatch(t, 1, 10, 1, i)
		res, err := l.Append([][]byte{b}, AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, stamped(t, b, res.BaseOffset, 0)...)
	}
	tc := l.active.cache.p.Load()
	if tc == nil || len(tc.chunks) == 0 {
		t.Fatal("3000 small appends cached nothing")
	}
	if len(tc.chunks) > maxTailChunks {
		t.Fatalf("%d chunks listed after 3000 small appends, at most %d", len(tc.chunks), maxTailChunks)
	}
	var copies, covered int64
	for _, c := range tc.chunks {
		if c.buf == nil && len(c.data) > len(want)/3000 {
			copies++ // a copy buffer holding more than one append
		}
		covered += int64(len(c.data))
	}
	if copies == 0 {
		t.Fatal("no copy buffer holds more than one small append")
	}
	got, mem, _, err := readRegions(l, 0, l.LEO())
	if err != nil {
		t.Fatal(err)
	}
	if mem != covered {
		t.Fatalf("%d bytes from memory, the cache covers %d", mem, covered)
	}
	sameBytes(t, got, want, "read back, memory and file")
	sameBytes(t, readAll(t, l), want, "read back")
}

// readRegions reads [offset, upper) of l through Read and returns its
// bytes, copied while the regions were pinned, and how many of them came
// from memory (the tail cache) and from the file.
func readRegions(l *Log, offset, upper int64) (b []byte, mem, file int64, err error) {
	res, err := l.Read(offset, 1<<30, upper, true)
	if err != nil {
		return nil, 0, 0, err
	}
	defer res.Release()
	b = make([]byte, res.Bytes)
	at := 0
	for _, rg := range res.Regions {
		if err := rg.ReadAt(b[at : at+int(rg.Len)]); err != nil {
			return nil, 0, 0, err
		}
		at += int(rg.Len)
		if rg.Mem != nil {
			mem += rg.Len
		} else {
			file += rg.Len
		}
	}
	return b, mem, file, nil
}

// TestTailIdle: a log whose last append is TailIdle old gives its tail
// cache back (DropIdleTail): its budget's count falls to 0, its reads come
// from the file and stay whole, and the next append caches again. A
// younger one keeps it.
func TestTailIdle(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	budget := &TailBudget{Bytes: 1 << 20}
	cfg := smallConfig()
	cfg.SegmentBytes = 64 << 20
	l := openLog(t, t.TempDir(), cfg, Options{DirectWrites: true, TailBudget: budget, Now: clock})
	var want []byte
	appendSome := func() {
		for i := range 10 {
			b := mkBatch(t, 8, 1000, 1, i)
			res, err := l.Append([][]byte{b}, AppendOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, stamped(t, b, res.BaseOffset, 0)...)
		}
	}
	fromMemory := func() int64 {
		_, mem, _, err := readRegions(l, 0, l.LEO())
		if err != nil {
			t.Fatal(err)
		}
		return mem
	}
	appendSome()
	if budget.Held() == 0 || fromMemory() == 0 {
		t.Fatalf("nothing cached after appends: held %d", budget.Held())
	}
	now = now.Add(TailIdle - time.Second)
	l.DropIdleTail(TailIdle)
	if budget.Held() == 0 {
		t.Fatal("the cache was dropped before TailIdle")
	}
	now = now.Add(time.Second)
	l.DropIdleTail(TailIdle)
	if held, mem := budget.Held(), fromMemory(); held != 0 || mem != 0 {
		t.Fatalf("after TailIdle: held %d, %d bytes read from memory", held, mem)
	}
	sameBytes(t, readAll(t, l), want, "read back from the file")
	appendSome()
	if budget.Held() == 0 || fromMemory() == 0 {
		t.Fatal("nothing cached after the next appends")
	}
	sameBytes(t, readAll(t, l), want, "read back")
}
