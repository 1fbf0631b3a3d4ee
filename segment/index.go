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
type index struct {
	m         *mapFile
	base      int64
	entrySize int
	count     atomic.Int32 // entries readers may use
}

func openIndex(path string, base int64, entrySize int, capacity int64) (*index, error) {
	m, err := openMapFile(path, capacity)
	if err != nil {
		return nil, err
	}
	x := &index{m: m, base: base, entrySize: entrySize}
	// The file holds whole entries after a clean shutdown (it is trimmed on
	// close); a partial entry can only come from a torn file and is ignored.
	x.count.Store(int32(m.size / int64(entrySize)))
	return x, nil
}

// capacity is the number of entries the mapping can hold.
func (x *index) capacity() int { return len(x.m.mem) / x.entrySize }

func (x *index) full() bool { return int(x.count.Load()) >= x.capacity() }

func (x *index) at(i int) []byte {
	return x.m.mem[i*x.entrySize : (i+1)*x.entrySize]
}

// grow makes the file as large as the mapping so that entries can be
// appended (the active segment's index is preallocated, as in Kafka).
func (x *index) grow(limit int64) error {
	n := min(int64(x.capacity()), limit/int64(x.entrySize)) * int64(x.entrySize)
	n = max(n, int64(x.count.Load())*int64(x.entrySize))
	return x.m.resize(n)
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

func openOffsetIndex(path string, base int64, capacity int64) (*offsetIndex, error) {
	x, err := openIndex(path, base, offsetEntrySize, capacity)
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

// append adds an entry; the caller has checked full() and ordering.
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

func openTimeIndex(path string, base int64, capacity int64) (*timeIndex, error) {
	x, err := openIndex(path, base, timeEntrySize, capacity)
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
// timestamp; the caller has checked full().
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
