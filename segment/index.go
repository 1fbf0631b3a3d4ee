package segment

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"sync/atomic"
)

// Index files, as Kafka lays them out (big-endian, sparse):
//
//	.index      entry = relative offset u32 | position u32              (8 bytes)
//	.timeindex  entry = timestamp i64 | relative offset u32             (12 bytes)
//
// An offset index entry maps the last offset of a batch to the file
// position where that batch starts; one is written when more than
// index.interval.bytes of batches were appended since the previous entry.
// A time index entry records the largest timestamp seen so far in the
// segment and the last offset of the batch that carried it; entries are
// only added when the timestamp grows.
const (
	offsetEntrySize = 8
	timeEntrySize   = 12
)

// index is the part shared by both index kinds: a mapped file of fixed-size
// entries whose count is published with an atomic so that readers on other
// goroutines see only complete entries.
//
// The mapping covers maxEntries (segment.index.bytes) from the start, but
// the file only grows as entries arrive (reserve): a partition that holds
// little data holds little index. No page past the file's end is ever
// touched, so the mapping never raises SIGBUS: readers stay below count,
// and the writer stores entry count only after reserve made room for it.
type index struct {
	m          *mapFile
	base       int64
	entrySize  int
	maxEntries int          // segment.index.bytes / entrySize: full() beyond
	count      atomic.Int32 // entries readers may use
}

// indexGrowMin and indexGrowMax bound one growth of an index file: the
// first entry allocates one page, each growth after it doubles the file,
// up to 1 MiB at a time. A partition that gets one entry costs 4 KiB
// instead of segment.index.bytes (10 MiB by default), and a busy one grows
// its file a handful of times per segment.
const (
	indexGrowMin = 4 << 10
	indexGrowMax = 1 << 20
)

func openIndex(path string, base int64, entrySize int, maxBytes int64) (*index, error) {
	maxEntries := maxBytes / int64(entrySize)
	m, err := openMapFile(path, maxEntries*int64(entrySize))
	if err != nil {
		return nil, err
	}
	x := &index{m: m, base: base, entrySize: entrySize, maxEntries: int(maxEntries)}
	// The file holds whole entries after a clean shutdown (it is trimmed on
	// close); a partial entry can only come from a torn file and is ignored.
	// A file longer than maxEntries (segment.index.bytes was lowered) keeps
	// its entries and reports full, so the segment rolls.
	x.count.Store(int32(m.size / int64(entrySize)))
	return x, nil
}

// full reports that no entry may be added: the segment must roll.
func (x *index) full() bool { return int(x.count.Load()) >= x.maxEntries }

func (x *index) at(i int) []byte {
	return x.m.mem[i*x.entrySize : (i+1)*x.entrySize]
}

// reserve makes the file long enough for n more entries (fewer when
// maxEntries comes first), allocating its blocks with fallocate. It is
// called before entries are stored, while a failure can still be an
// error of the append (ENOSPC) rather than a signal.
func (x *index) reserve(n int) error {
	need := int64(min(int(x.count.Load())+n, x.maxEntries)) * int64(x.entrySize)
	size := x.m.size
	if need <= size {
		return nil
	}
	limit := int64(x.maxEntries) * int64(x.entrySize)
	target := max(need, size+min(max(size, indexGrowMin), indexGrowMax))
	page := int64(indexGrowMin)
	target = (target + page - 1) / page * page
	// Whole entries only: a file cut mid-entry would read as torn.
	target = target / int64(x.entrySize) * int64(x.entrySize)
	return x.m.resize(min(target, limit))
}

// grow makes the file as large as maxEntries at once (cleaned segments,
// whose entry count is bounded by the bytes they are written from).
func (x *index) grow() error {
	return x.reserve(x.maxEntries)
}

// trim cuts the file to its valid entries (on roll and close).
func (x *index) trim() error {
	return x.m.resize(int64(x.count.Load()) * int64(x.entrySize))
}

// setCount publishes a new number of valid entries. Entries past the count
// are zeroed so that a file that is not trimmed (a crash) holds no stale
// entries that could be mistaken for valid ones.
func (x *index) setCount(n int) {
	old := int(x.count.Load())
	x.count.Store(int32(n))
	if n < old {
		clear(x.m.mem[n*x.entrySize : old*x.entrySize])
	}
}

func (x *index) sync() error  { return x.m.sync() }
func (x *index) close() error { return x.m.close() }

// offsetIndex maps last offsets of batches to their positions.
type offsetIndex struct{ *index }

func openOffsetIndex(path string, base int64, maxBytes int64) (*offsetIndex, error) {
	x, err := openIndex(path, base, offsetEntrySize, maxBytes)
	if err != nil {
		return nil, err
	}
	return &offsetIndex{x}, nil
}

func (x *offsetIndex) entry(i int) (offset int64, pos int64) {
	e := x.at(i)
	return x.base + int64(binary.BigEndian.Uint32(e)), int64(binary.BigEndian.Uint32(e[4:]))
}

// last returns the last entry, or (base, 0) when there is none.
func (x *offsetIndex) last() (offset int64, pos int64) {
	n := int(x.count.Load())
	if n == 0 {
		return x.base, 0
	}
	return x.entry(n - 1)
}

// lookup returns the largest entry whose offset is at most target, or
// (base, 0) when there is none: the batch at that position ends at or
// before target, so a scan from there finds the batch holding target.
func (x *offsetIndex) lookup(target int64) (offset int64, pos int64) {
	rel := target - x.base
	if rel < 0 {
		return x.base, 0
	}
	rel = min(rel, math.MaxUint32)
	// A hand-written binary search over the mapped entries: this runs for
	// every fetch, and the closure-based sort.Search costs twice as much.
	mem := x.m.mem
	lo, hi := 0, int(x.count.Load())
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if int64(binary.BigEndian.Uint32(mem[mid*offsetEntrySize:])) <= rel {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return x.base, 0
	}
	return x.entry(lo - 1)
}

// append adds an entry; the caller has checked full() and ordering, and
// reserved room for it.
func (x *offsetIndex) append(offset int64, pos int64) error {
	n := int(x.count.Load())
	if n > 0 {
		if last, lastPos := x.entry(n - 1); offset <= last || pos <= lastPos {
			return fmt.Errorf("segment: index entry (%d, %d) not after (%d, %d)", offset, pos, last, lastPos)
		}
	}
	e := x.at(n)
	binary.BigEndian.PutUint32(e, uint32(offset-x.base))
	binary.BigEndian.PutUint32(e[4:], uint32(pos))
	x.count.Store(int32(n + 1))
	return nil
}

// truncateTo drops entries whose offset is at least offset.
func (x *offsetIndex) truncateTo(offset int64) {
	n := int(x.count.Load())
	i := sort.Search(n, func(i int) bool {
		o, _ := x.entry(i)
		return o >= offset
	})
	x.setCount(i)
}

// timeIndex maps growing timestamps to offsets.
type timeIndex struct{ *index }

func openTimeIndex(path string, base int64, maxBytes int64) (*timeIndex, error) {
	x, err := openIndex(path, base, timeEntrySize, maxBytes)
	if err != nil {
		return nil, err
	}
	return &timeIndex{x}, nil
}

func (x *timeIndex) entry(i int) (ts int64, offset int64) {
	e := x.at(i)
	return int64(binary.BigEndian.Uint64(e)), x.base + int64(binary.BigEndian.Uint32(e[8:]))
}

// last returns the last entry, or (-1, base) when there is none.
func (x *timeIndex) last() (ts int64, offset int64) {
	n := int(x.count.Load())
	if n == 0 {
		return -1, x.base
	}
	return x.entry(n - 1)
}

// lookupBefore returns the last entry whose timestamp is below ts, or
// (-1, base). Every record before that entry's offset has a smaller
// timestamp than ts, so the first record at or after ts is not before it.
func (x *timeIndex) lookupBefore(ts int64) (int64, int64) {
	n := int(x.count.Load())
	i := sort.Search(n, func(i int) bool {
		t, _ := x.entry(i)
		return t >= ts
	})
	if i == 0 {
		return -1, x.base
	}
	return x.entry(i - 1)
}

// maybeAppend adds (ts, offset) when ts is larger than the last entry's
// timestamp; the caller has checked full() and reserved room for it.
func (x *timeIndex) maybeAppend(ts int64, offset int64) {
	n := int(x.count.Load())
	if n > 0 {
		if lastTs, lastOff := x.entry(n - 1); ts <= lastTs || offset <= lastOff {
			return
		}
	}
	e := x.at(n)
	binary.BigEndian.PutUint64(e, uint64(ts))
	binary.BigEndian.PutUint32(e[8:], uint32(offset-x.base))
	x.count.Store(int32(n + 1))
}

// truncateTo drops entries whose offset is at least offset.
func (x *timeIndex) truncateTo(offset int64) {
	n := int(x.count.Load())
	i := sort.Search(n, func(i int) bool {
		_, o := x.entry(i)
		return o >= offset
	})
	x.setCount(i)
}
