package segment

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"ringlog/segment/batch"

	"ringlog/internal/fsutil"
)

// File name suffixes of a segment, and the suffix given to files of a
// segment that has been dropped but may still be read by someone.
const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	deletedSuffix   = ".deleted"
)

// segmentName is Kafka's name for a segment: the base offset in 20 digits.
func segmentName(base int64) string { return fmt.Sprintf("%020d", base) }

// parseSegmentName returns the base offset of a file named like a segment.
func parseSegmentName(name, suffix string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, suffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(stem, 10, 64)
	if err != nil || base < 0 {
		return 0, false
	}
	return base, true
}

// segment is one .log file with its two indexes. The log's owner goroutine
// appends; readers on other goroutines use tail() and the indexes' published
// counts, and hold a reference (through a segSet) while they read.
type segment struct {
	dir     string
	base    int64
	log     *os.File
	offsets *offsetIndex
	times   *timeIndex
	// txn is the aborted-transactions index (txnindex.go).
	txn txnIndex
	// direct is the direct-write state while the segment is active and
	// written with O_DIRECT (direct.go); nil otherwise. Owned by the writer.
	direct *segDirect
	// noReadahead is set while the kernel's readahead is off on log
	// (direct writes: adviseRandom): Read then asks for each region it
	// returns to be read in ahead, in one piece (willNeed).
	noReadahead atomic.Bool
	// cache is the tail cache of a direct-written active segment
	// (tail.go): its latest batches in memory, for readers.
	cache tailCache

	// tail packs the committed size (low 32 bits) and the next offset
	// relative to base (high 32 bits) so that a reader sees both from the
	// same append. Segments never exceed 4 GiB nor 2^32 offsets: roll()
	// happens first.
	tail atomic.Uint64
	// maxTs is the largest batch max timestamp in the segment, -1 if none.
	maxTs atomic.Int64

	// Owned by the writer.
	written         int64 // bytes written or in flight
	bytesSinceIndex int64
	offsetOfMaxTs   int64
	// segment.ms counts from the first batch's max timestamp (rollTs), or
	// from createdMs when that batch had none, as in Kafka.
	rollTs    int64
	createdMs int64

	refs     atomic.Int32
	dropped  atomic.Bool // no longer in the log; close at the last release
	isClosed atomic.Bool
}

func (s *segment) path(suffix string) string {
	return filepath.Join(s.dir, segmentName(s.base)+suffix)
}

// openSegment opens (creating when absent) the files of the segment based
// at base. Index mappings are sized for indexBytes so that the segment can
// become active without remapping; the files grow as entries arrive.
func openSegment(dir string, base int64, indexBytes int64) (*segment, error) {
	s := &segment{dir: dir, base: base, rollTs: -1}
	s.maxTs.Store(-1)
	var err error
	s.log, err = os.OpenFile(s.path(logSuffix), os.O_RDWR|os.O_CREATE, fsutil.FilePerm)
	if err != nil {
		return nil, err
	}
	s.offsets, err = openOffsetIndex(s.path(indexSuffix), base, indexBytes)
	if err != nil {
		s.close()
		return nil, err
	}
	s.times, err = openTimeIndex(s.path(timeIndexSuffix), base, indexBytes)
	if err != nil {
		s.close()
		return nil, err
	}
	// The transaction index exists for every segment (empty when nothing
	// was aborted in it), so that a missing one is known to be lost.
	s.txn.path = s.path(txnIndexSuffix)
	if s.txn.stale, err = s.txn.create(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// close releases the files; it runs once even when the writer and the
// last reader race to it.
func (s *segment) close() error {
	if !s.isClosed.CompareAndSwap(false, true) {
		return nil
	}
	// Its chunks leave the budget they were counted in (a log closed
	// without its clean shutdown, which drops them first).
	s.cache.drop()
	var errs []error
	if s.offsets != nil {
		errs = append(errs, s.offsets.close())
	}
	if s.times != nil {
		errs = append(errs, s.times.close())
	}
	if s.direct != nil {
		errs = append(errs, s.direct.f.Close())
	}
	if s.log != nil {
		errs = append(errs, s.log.Close())
	}
	return errors.Join(errs...)
}

// size is the committed size: bytes readers may read.
func (s *segment) size() int64 { return int64(s.tail.Load() & math.MaxUint32) }

// next is the offset after the last committed batch (base when empty).
func (s *segment) next() int64 { return s.base + int64(s.tail.Load()>>32) }

func (s *segment) sizeNext() (int64, int64) {
	t := s.tail.Load()
	return int64(t & math.MaxUint32), s.base + int64(t>>32)
}

func (s *segment) publish(size, next int64) {
	s.tail.Store(uint64(next-s.base)<<32 | uint64(size))
}

// fileSize is the size of the .log file on disk.
func (s *segment) fileSize() (int64, error) {
	st, err := s.log.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (s *segment) ref() { s.refs.Add(1) }
func (s *segment) unref() {
	if s.refs.Add(-1) == 0 && s.dropped.Load() {
		s.close()
	}
}

// headerReader reads batch headers from a segment file through a small
// read-ahead window, so that walking consecutive headers costs one pread
// per window rather than one per batch.
type headerReader struct {
	f      *os.File
	buf    []byte
	bufPos int64 // file position of buf[0]
	bufLen int
	// cache, when set, is the segment's tail cache as the reader found
	// it: headers it holds are read from it, not the file (tail.go).
	cache *tailChunks
}

const headerWindow = 8 << 10

func newHeaderReader(f *os.File) *headerReader {
	return &headerReader{f: f, buf: make([]byte, headerWindow), bufPos: -1}
}

// header returns the batch header at pos; end is the committed size, past
// which nothing is read. A header that does not fit before end, or is not
// a valid magic-2 header, is an error.
func (r *headerReader) header(pos, end int64) (batch.Header, error) {
	if pos+batch.HeaderSize > end {
		return batch.Header{}, fmt.Errorf("%w: %s: batch header at %d runs past %d", ErrCorrupt, r.f.Name(), pos, end)
	}
	h, ok := r.cache.header(pos)
	if !ok {
		if r.bufPos < 0 || pos < r.bufPos || pos+batch.HeaderSize > r.bufPos+int64(r.bufLen) {
			n := int(min(int64(len(r.buf)), end-pos))
			m, err := r.f.ReadAt(r.buf[:n], pos)
			if err != nil && !(errors.Is(err, io.EOF) && m >= batch.HeaderSize) {
				return batch.Header{}, fmt.Errorf("segment: read %s at %d: %w", r.f.Name(), pos, err)
			}
			r.bufPos, r.bufLen = pos, m
		}
		off := int(pos - r.bufPos)
		var err error
		if h, err = batch.ParseHeader(r.buf[off : off+batch.HeaderSize]); err != nil {
			return h, fmt.Errorf("%w: %s at %d: %w", ErrCorrupt, r.f.Name(), pos, err)
		}
	}
	if pos+int64(h.Size()) > end {
		return h, fmt.Errorf("%w: %s: batch at %d of %d bytes runs past %d", ErrCorrupt, r.f.Name(), pos, h.Size(), end)
	}
	return h, nil
}

// find walks batches from the index position for target and returns the
// position of the first batch whose last offset is at least target, with
// its header. When no such batch is below end, it returns (end, zero, nil).
func (s *segment) find(r *headerReader, target int64, end int64) (int64, batch.Header, error) {
	_, pos := s.offsets.lookup(target)
	if pos > end {
		// Only a damaged index points past the data; fall back to a scan.
		pos = 0
	}
	for pos < end {
		h, err := r.header(pos, end)
		if err != nil {
			return 0, h, err
		}
		if h.LastOffset() >= target {
			return pos, h, nil
		}
		pos += int64(h.Size())
	}
	return end, batch.Header{}, nil
}
