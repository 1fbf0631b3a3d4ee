package segment

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"ringlog/segment/batch"
)

// crashFixture is a log abandoned without a clean shutdown, with what is
// needed to judge a recovery of it.
type crashFixture struct {
	dir       string
	cfg       Config
	activeLog string  // path of the active segment's .log
	activeAt  int     // index in all of the first batch of the active segment
	all       []byte  // every batch, in order, as the log held them
	ends      []int64 // end position of each batch within its segment file
	starts    []int   // start of each batch in all
	nexts     []int64 // next offset after each batch
	liveIdx   [2][][2]int64
	refIdx    map[int][2][][2]int64 // index entries of a pristine prefix of k batches
}

func newCrashFixture(t *testing.T) *crashFixture {
	dir := t.TempDir()
	cfg := smallConfig()
	l := openLog(t, dir, cfg, Options{})
	r := rand.New(rand.NewPCG(1, 2))
	codecs := []batch.Codec{batch.None, batch.None, batch.Zstd, batch.LZ4, batch.Gzip, batch.Snappy}
	inActive := 0
	for i := 0; l.Segments() < 3 || inActive < 40; i++ {
		n := 1 + r.IntN(8)
		recs := make([]batch.Record, n)
		for j := range recs {
			v := make([]byte, 20+r.IntN(300))
			for k := range v {
				v[k] = byte(r.IntN(4)) // compressible but not trivially
			}
			recs[j] = batch.Record{OffsetDelta: int32(j), TimestampDelta: int64(j), Key: []byte{byte(i), byte(j)}, Value: v}
		}
		h := batch.Header{LastOffsetDelta: int32(n - 1), BaseTimestamp: int64(1000 + i), MaxTimestamp: int64(1000 + i + n - 1), ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		b, err := batch.Build(nil, h, codecs[r.IntN(len(codecs))], recs)
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Append([][]byte{b}, AppendOptions{LeaderEpoch: int32(i / 60)})
		if err != nil {
			t.Fatal(err)
		}
		inActive++
		if res.BaseOffset == l.active.base {
			inActive = 1
		}
	}
	f := &crashFixture{dir: dir, cfg: cfg, activeLog: l.active.path(logSuffix), refIdx: map[int][2][][2]int64{}}
	f.all = readAll(t, l)
	pos := map[*segment]int64{}
	seg := 0
	for off := 0; off < len(f.all); {
		h, _ := batch.ParseHeader(f.all[off:])
		for h.BaseOffset >= l.segs[seg].next() {
			seg++
		}
		s := l.segs[seg]
		pos[s] += int64(h.Size())
		if s == l.active && f.activeAt == 0 {
			f.activeAt = len(f.starts)
		}
		f.starts = append(f.starts, off)
		f.ends = append(f.ends, pos[s])
		f.nexts = append(f.nexts, h.NextOffset())
		off += h.Size()
	}
	if l.Segments() < 3 || len(f.starts)-f.activeAt < 20 {
		t.Fatalf("fixture: %d segments, %d batches in the active one", l.Segments(), len(f.starts)-f.activeAt)
	}
	o, ti := indexEntries(l.active)
	f.liveIdx = [2][][2]int64{o, ti}
	crash(l)
	return f
}

// expectedLEO is the LEO after recovery keeps the first k batches.
func (f *crashFixture) expectedLEO(k int) int64 {
	if k == 0 {
		return 0
	}
	return f.nexts[k-1]
}

// reference returns the active segment's index entries after a recovery of
// a log cut cleanly after k batches: the "fresh rebuild".
func (f *crashFixture) reference(t *testing.T, k int) [2][][2]int64 {
	if r, ok := f.refIdx[k]; ok {
		return r
	}
	dir := filepath.Join(t.TempDir(), "ref")
	copyDir(t, f.dir, dir)
	cut := int64(0)
	if k > f.activeAt {
		cut = f.ends[k-1]
	}
	if err := os.Truncate(filepath.Join(dir, filepath.Base(f.activeLog)), cut); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, dir, f.cfg, Options{})
	o, ti := indexEntries(l.active)
	crash(l)
	f.refIdx[k] = [2][][2]int64{o, ti}
	return f.refIdx[k]
}

// check opens the mutated copy in dir and verifies that exactly the first
// k batches survived, with indexes equal to a fresh rebuild's.
func (f *crashFixture) check(t *testing.T, dir string, k int, repair bool, what string) {
	t.Helper()
	l, err := Open(dir, f.cfg, Options{RepairCorrupt: repair})
	if err != nil {
		t.Fatalf("%s: open: %v", what, err)
	}
	defer crash(l)
	if l.LEO() != f.expectedLEO(k) {
		t.Fatalf("%s: LEO %d, want %d (%d batches kept)", what, l.LEO(), f.expectedLEO(k), k)
	}
	want := f.all
	if k < len(f.starts) {
		want = f.all[:f.starts[k]]
	}
	got := readAll(t, l)
	splitBatches(t, got) // every batch read back is valid
	sameBytes(t, got, want, what)
	o, ti := indexEntries(l.active)
	ref := f.reference(t, k)
	if !slices.Equal(o, ref[0]) || !slices.Equal(ti, ref[1]) {
		t.Fatalf("%s: rebuilt indexes differ from a fresh rebuild:\n%v %v\n%v %v", what, o, ti, ref[0], ref[1])
	}
	// What the live log indexed for the kept batches is what recovery
	// rebuilt.
	var live [][2]int64
	for _, e := range f.liveIdx[0] {
		if e[0] < l.LEO() {
			live = append(live, e)
		}
	}
	if !slices.Equal(o, live) {
		t.Fatalf("%s: recovered offset index %v, the live log had %v", what, o, live)
	}
}

func TestCrashRecovery(t *testing.T) {
	f := newCrashFixture(t)
	trials := 1000
	if testing.Short() {
		trials = 100
	}
	r := rand.New(rand.NewPCG(3, 4))
	work := filepath.Join(t.TempDir(), "trial")
	active := filepath.Join(work, filepath.Base(f.activeLog))
	prepare := func() {
		os.RemoveAll(work)
		copyDir(t, f.dir, work)
	}
	size := f.ends[len(f.ends)-1]
	// keptBefore is the number of batches wholly before position p of the
	// active segment.
	keptBefore := func(p int64) int {
		k := f.activeAt
		for k < len(f.ends) && f.ends[k] <= p {
			k++
		}
		return k
	}

	t.Run("truncate", func(t *testing.T) {
		for range trials {
			prepare()
			p := r.Int64N(size + 1)
			if err := os.Truncate(active, p); err != nil {
				t.Fatal(err)
			}
			f.check(t, work, keptBefore(p), false, "truncate")
		}
	})
	t.Run("zeroed tail", func(t *testing.T) {
		for range trials {
			prepare()
			p := r.Int64N(size)
			fh, err := os.OpenFile(active, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fh.WriteAt(make([]byte, size-p), p)
			fh.Close()
			f.check(t, work, keptBefore(p), false, "zeroed tail")
		}
	})
	t.Run("hole", func(t *testing.T) {
		// Pages of an unsynced tail persisted out of order: one page that
		// never reached the disk (zeros) with valid batches after it. The
		// log is cut at the batch the hole breaks, as a torn tail is.
		if size < 3*pageSize {
			t.Fatalf("the active segment is %d bytes: too small for a hole between batches", size)
		}
		for range trials / 10 {
			prepare()
			page := (1 + r.Int64N(size/pageSize-1)) * pageSize
			if page+pageSize >= size {
				page -= pageSize
			}
			fh, err := os.OpenFile(active, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fh.WriteAt(make([]byte, pageSize), page)
			fh.Close()
			f.check(t, work, keptBefore(page), false, "hole")
		}
	})
	t.Run("bit flip", func(t *testing.T) {
		for range trials {
			prepare()
			j := f.activeAt + r.IntN(len(f.starts)-f.activeAt)
			start := int64(0)
			if j > f.activeAt {
				start = f.ends[j-1]
			}
			// baseOffset and partitionLeaderEpoch are outside the CRC in
			// Kafka's format: flips there cannot be detected, so they are
			// not tried. Everything else of the batch is covered.
			var rel int64
			for {
				rel = r.Int64N(f.ends[j] - start)
				if rel >= 8 && (rel < 12 || rel >= 16) {
					break
				}
			}
			fh, err := os.OpenFile(active, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			b := []byte{0}
			fh.ReadAt(b, start+rel)
			b[0] ^= 1 << r.IntN(8)
			fh.WriteAt(b, start+rel)
			fh.Close()
			if j == len(f.starts)-1 {
				// The last batch: indistinguishable from a torn write.
				f.check(t, work, j, false, "flip in the last batch")
				continue
			}
			_, err = Open(work, f.cfg, Options{})
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("flip at %d in batch %d of %d: open = %v, want ErrCorrupt", rel, j, len(f.starts), err)
			}
			f.check(t, work, j, true, "flip repaired")
		}
	})
}

// TestTornTailBeforeValidSegment: an invalid batch at the end of a rolled
// segment, while the next segment holds valid data, is corruption.
func TestTornTailBeforeValidSegment(t *testing.T) {
	f := newCrashFixture(t)
	work := filepath.Join(t.TempDir(), "w")
	copyDir(t, f.dir, work)
	// No checkpoint: every segment is scanned.
	os.Remove(filepath.Join(work, checkpointFile))
	first := filepath.Join(work, segmentName(0)+logSuffix)
	st, _ := os.Stat(first)
	if err := os.Truncate(first, st.Size()-5); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(work, f.cfg, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open = %v, want ErrCorrupt", err)
	}
	l, err := Open(work, f.cfg, Options{RepairCorrupt: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if r := l.Recovery(); r.SegmentsDropped < 2 || l.Segments() != 1 {
		t.Fatalf("repair: %+v, %d segments", r, l.Segments())
	}
	splitBatches(t, readAll(t, l))
}

// TestStrayFilesOnOpen: leftovers of interrupted operations are removed.
func TestStrayFilesOnOpen(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, smallConfig(), Options{})
	l.Append([][]byte{mkBatch(t, 1, 10, 1, 1)}, AppendOptions{})
	l.Close()
	for _, n := range []string{"00000000000000000099.index", "00000000000000000099.timeindex", "x.tmp", "00000000000000000007.log.deleted"} {
		os.WriteFile(filepath.Join(dir, n), []byte("junk"), 0o644)
	}
	l = openLog(t, dir, smallConfig(), Options{})
	defer l.Close()
	for _, n := range []string{"00000000000000000099.index", "x.tmp", "00000000000000000007.log.deleted"} {
		if _, err := os.Stat(filepath.Join(dir, n)); !os.IsNotExist(err) {
			t.Fatalf("%s survived open", n)
		}
	}
	if l.LEO() != 1 {
		t.Fatalf("LEO %d", l.LEO())
	}
}

// TestRecoverBatchStartOnUnwrittenPage: the page holding the first k
// bytes of a batch was written back before the batch was appended (zeros
// there), the page after it later (the rest of the batch and valid
// batches after it). Recovery cuts the log at that batch, as at a hole of
// unwritten pages: the zeros hide its length (k >= 12), or its base
// offset's high bytes (k of 8 to 11: 0 where 1 is due; below 8, where
// the log starts at a base offset with no zero byte, the base offset's
// surviving low bytes are the due one's; a log starting at 0 has zeros
// there already, and nothing changes). The same bytes nonzero, zeros
// that do not reach a page boundary, or a base offset whose surviving
// bytes are not the due one's, are corruption and refuse the log.
func TestRecoverBatchStartOnUnwrittenPage(t *testing.T) {
	small := func(i, valueLen int) []byte {
		v := make([]byte, valueLen)
		for j := range v {
			v[j] = byte(i + j)
		}
		h := batch.Header{BaseTimestamp: 1000, MaxTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		b, err := batch.Build(nil, h, batch.None, []batch.Record{{Value: v}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// build writes a first batch of pageSize-k bytes, so that the second
	// starts k bytes before the first page boundary, and three more small
	// ones; it returns the log's directory and the second batch's start.
	build := func(t *testing.T, k, start int64) (string, int64) {
		dir := t.TempDir()
		l := openLog(t, dir, smallConfig(), Options{})
		if start > 0 {
			if err := l.TruncateFullyAndStartAt(start); err != nil {
				t.Fatal(err)
			}
		}
		want := pageSize - k
		n := int(want) - len(small(0, 0))
		first := small(0, n)
		for len(first) != int(want) { // the record's varints grow with n
			n -= len(first) - int(want)
			first = small(0, n)
		}
		for i, b := range [][]byte{first, small(1, 100), small(2, 100), small(3, 100)} {
			if _, err := l.Append([][]byte{b}, AppendOptions{LeaderEpoch: int32(i)}); err != nil {
				t.Fatal(err)
			}
		}
		crash(l)
		return dir, want
	}
	// The second batch's base offset when the log starts at high: no byte
	// of it is zero.
	const high = 0x0102030405060708 - 1
	overwrite := func(t *testing.T, dir string, at int64, b []byte) {
		t.Helper()
		logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
		if err != nil || len(logs) != 1 {
			t.Fatalf("the log's segments: %v %v", logs, err)
		}
		f, err := os.OpenFile(logs[0], os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(b, at); err != nil {
			t.Fatal(err)
		}
	}
	for _, start := range []int64{0, high} {
		for k := int64(1); k < minHole; k++ {
			dir, at := build(t, k, start)
			overwrite(t, dir, at, make([]byte, k))
			l, err := Open(dir, smallConfig(), Options{})
			if err != nil {
				t.Errorf("start %d, k=%d: %v", start, k, err)
				continue
			}
			want := start + 1 // the first batch only
			if k < 8 && start == 0 {
				want = 4
			}
			if l.LEO() != want {
				t.Errorf("start %d, k=%d: LEO %d, want %d (recovery: %+v)", start, k, l.LEO(), want, l.Recovery())
			}
			crash(l)
		}
	}
	// Zeros before the boundary, but a surviving byte that is not the due
	// base offset's.
	for _, k := range []int64{1, 4, 7} {
		dir, at := build(t, k, high)
		overwrite(t, dir, at, append(make([]byte, k), 0xee))
		if _, err := Open(dir, smallConfig(), Options{}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("k=%d, a surviving base offset byte changed: open = %v, want ErrCorrupt", k, err)
		}
	}
	for _, k := range []int64{8, 12} {
		dir, at := build(t, k, 0)
		junk := make([]byte, k)
		for i := range junk {
			junk[i] = 0xa5
		}
		overwrite(t, dir, at, junk)
		if _, err := Open(dir, smallConfig(), Options{}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("k=%d, nonzero bytes: open = %v, want ErrCorrupt", k, err)
		}
	}
	// The third batch's base offset zeroed: no page boundary near it.
	dir, at := build(t, 8, 0)
	overwrite(t, dir, at+int64(len(small(1, 100))), make([]byte, 8))
	if _, err := Open(dir, smallConfig(), Options{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a base offset zeroed away from a page boundary: open = %v, want ErrCorrupt", err)
	}
}
