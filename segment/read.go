package segment

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"ringlog/segment/batch"
)

// Region is a byte range of a segment file, to be sent as is (sendfile),
// or, when Mem is set, those bytes in memory (a direct-written segment's
// recent batches, tail.go): File is nil then. Mem is never written to.
type Region struct {
	File *os.File
	Pos  int64
	Len  int64
	Mem  []byte
}

// ReadAt reads the region's bytes into buf (len(buf) == Len).
func (rg Region) ReadAt(buf []byte) error {
	if rg.Mem != nil {
		copy(buf, rg.Mem)
		return nil
	}
	if _, err := rg.File.ReadAt(buf, rg.Pos); err != nil {
		return fmt.Errorf("segment: read %s at %d: %w", rg.File.Name(), rg.Pos, err)
	}
	return nil
}

// ReadResult is the answer to Read. It pins the segments it refers to:
// the files stay open (even if retention deletes them meanwhile) until
// Release. Release must be called exactly once.
type ReadResult struct {
	Regions []Region
	// Bytes is the sum of the regions' lengths.
	Bytes int64
	set   *segSet
	// pinned are the tail-cache buffers the Mem regions lie in.
	pinned []*stageBuf
}

// Release unpins the segments and the Mem regions' buffers.
func (r *ReadResult) Release() {
	for _, b := range r.pinned {
		b.release()
	}
	r.pinned = nil
	if r.set != nil {
		r.set.release()
		r.set = nil
	}
}

var headerReaders = sync.Pool{New: func() any { return newHeaderReader(nil) }}

func getHeaderReader(f *os.File) *headerReader {
	r := headerReaders.Get().(*headerReader)
	r.f, r.bufPos, r.bufLen = f, -1, 0
	return r
}

func putHeaderReader(r *headerReader) {
	r.f, r.cache = nil, nil
	headerReaders.Put(r)
}

// segmentFor returns the index of the segment that holds offset: the last
// one whose base is at most offset (0 when offset is below every base).
func segmentFor(segs []*segment, offset int64) int {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > offset }) - 1
	return max(i, 0)
}

// Read returns the file regions holding the batches from the one that
// contains offset, up to maxBytes, never including a batch that reaches
// upper (the high watermark; pass LEO() for everything written). As in
// Kafka, the regions start at a batch boundary (so the first batch may hold
// offsets below the one asked for) and may end inside a batch when maxBytes
// cuts it: clients drop a partial trailing batch. With minOne the first
// batch is returned whole even when it is larger than maxBytes (KIP-74).
//
// An offset below LogStartOffset or above LEO is ErrOutOfRange. Any
// goroutine may call Read.
func (l *Log) Read(offset, maxBytes, upper int64, minOne bool) (*ReadResult, error) {
	set := l.acquire()
	if set == nil {
		return nil, ErrClosed
	}
	start, leo := l.logStart.Load(), l.leo.Load()
	if offset < start || offset > leo {
		set.release()
		return nil, fmt.Errorf("%w: offset %d, log start %d, log end %d", ErrOutOfRange, offset, start, leo)
	}
	upper = min(upper, leo)
	res := &ReadResult{set: set}
	if offset >= upper || maxBytes <= 0 && !minOne {
		return res, nil
	}
	segs := set.segs
	remaining := maxBytes
	for i := segmentFor(segs, offset); i < len(segs); i++ {
		s := segs[i]
		size, next := s.sizeNext()
		if next <= offset {
			continue // offset lies in a gap after this segment's last batch
		}
		if s.base >= upper {
			break
		}
		r := getHeaderReader(s.log)
		r.cache = s.cache.p.Load()
		pos, h, err := s.find(r, offset, size)
		end := size
		if err == nil && upper < next {
			// Stop before the batch holding upper.
			end, _, err = s.find(r, upper, size)
		}
		putHeaderReader(r)
		if err != nil {
			res.Release()
			return nil, err
		}
		if pos >= end {
			break
		}
		n := end - pos
		if n > remaining {
			n = remaining
			if minOne && len(res.Regions) == 0 {
				n = min(max(n, int64(h.Size())), end-pos)
			}
		}
		if n <= 0 {
			break
		}
		s.regions(res, pos, n)
		res.Bytes += n
		remaining -= n
		if pos+n < end || remaining <= 0 || end < size {
			break
		}
		offset = next
	}
	return res, nil
}

// ReadBatches is Read followed by reading the regions into memory, for
// callers that do not send files (tests, the embedded API, compaction).
// Only whole batches are returned.
func (l *Log) ReadBatches(offset, maxBytes, upper int64) ([]byte, error) {
	res, err := l.Read(offset, maxBytes, upper, true)
	if err != nil {
		return nil, err
	}
	defer res.Release()
	buf := make([]byte, 0, res.Bytes)
	for _, rg := range res.Regions {
		n := len(buf)
		buf = buf[:n+int(rg.Len)]
		if err := rg.ReadAt(buf[n:]); err != nil {
			return nil, err
		}
	}
	// Drop a partial trailing batch. A header that cannot be framed ends
	// the data as the cut does, without an error, as it always has here:
	// the batches were validated when they were appended.
	whole, _ := batch.WholePrefix(buf)
	return buf[:whole], nil
}

// maxDecompressedBytes bounds the memory a timestamp lookup may spend on
// one compressed batch.
const maxDecompressedBytes = 64 << 20

// ErrNotFound means no record has a timestamp at or after the one asked.
var ErrNotFound = errors.New("segment: no record at or after that timestamp")

// OffsetForTimestamp returns the offset and timestamp of the first record
// whose timestamp is at least ts (ListOffsets by time), or ErrNotFound.
// Only records below upper are considered. Any goroutine may call it.
func (l *Log) OffsetForTimestamp(ts int64, upper int64) (int64, int64, error) {
	set := l.acquire()
	if set == nil {
		return 0, 0, ErrClosed
	}
	defer set.release()
	start := l.logStart.Load()
	upper = min(upper, l.leo.Load())
	for _, s := range set.segs {
		if s.maxTs.Load() < ts {
			continue
		}
		size, next := s.sizeNext()
		if next <= start || s.base >= upper {
			continue
		}
		_, from := s.times.lookupBefore(ts)
		from = max(from, start)
		off, rts, found, err := l.searchTimestamp(s, from, size, ts, start, upper)
		if err != nil || found {
			return off, rts, err
		}
	}
	return -1, -1, ErrNotFound
}

// searchTimestamp walks the batches of s from the one holding from and
// looks inside the first batches whose max timestamp reaches ts.
func (l *Log) searchTimestamp(s *segment, from, size, ts, start, upper int64) (int64, int64, bool, error) {
	r := getHeaderReader(s.log)
	defer putHeaderReader(r)
	pos, _, err := s.find(r, from, size)
	if err != nil {
		return 0, 0, false, err
	}
	var buf []byte
	for pos < size {
		h, err := r.header(pos, size)
		if err != nil {
			return 0, 0, false, err
		}
		if h.BaseOffset >= upper {
			break
		}
		if h.MaxTimestamp >= ts && h.LastOffset() >= start {
			if cap(buf) < h.Size() {
				buf = make([]byte, h.Size())
			}
			b := buf[:h.Size()]
			if _, err := s.log.ReadAt(b, pos); err != nil {
				return 0, 0, false, fmt.Errorf("segment: read %s at %d: %w", s.log.Name(), pos, err)
			}
			var off, rts int64 = -1, -1
			err := batch.Records(h, b, maxDecompressedBytes, func(rec *batch.Record) error {
				o := h.BaseOffset + int64(rec.OffsetDelta)
				t := h.BaseTimestamp + rec.TimestampDelta
				if h.LogAppendTime() {
					t = h.MaxTimestamp
				}
				if t >= ts && o >= start && o < upper {
					off, rts = o, t
					return errStop
				}
				return nil
			})
			if err != nil && !errors.Is(err, errStop) {
				return 0, 0, false, fmt.Errorf("segment: records of batch at %d: %w", h.BaseOffset, err)
			}
			if off >= 0 {
				return off, rts, true, nil
			}
		}
		pos += int64(h.Size())
	}
	return 0, 0, false, nil
}

var errStop = errors.New("stop")

// MaxTimestamp returns the largest batch timestamp in the log and the last
// offset of the batch carrying it (ListOffsets MAX_TIMESTAMP, KIP-734), or
// (-1, -1) for an empty log (owner only).
func (l *Log) MaxTimestamp() (int64, int64) {
	ts, off := int64(-1), int64(-1)
	start := l.logStart.Load()
	for _, s := range l.segs {
		if m := s.maxTs.Load(); m > ts && s.offsetOfMaxTs >= start {
			ts, off = m, s.offsetOfMaxTs
		}
	}
	return ts, off
}

// ScanHeaders calls fn with the header of every batch that holds an offset
// in [from, to), in order, reading headers only (producer state is rebuilt
// this way). An error from fn stops the scan and is returned. Any
// goroutine may call it.
func (l *Log) ScanHeaders(from, to int64, fn func(h batch.Header) error) error {
	return l.scanBatches(from, to, false, func(h batch.Header, _ *batch.Marker) error { return fn(h) })
}

// maxMarkerBatch bounds what ScanMarkers reads of a control batch: a
// transaction marker is one record of ten bytes.
const maxMarkerBatch = 4096

// ScanMarkers is ScanHeaders that also decodes the transaction marker of
// each control batch (m is nil for other batches, and for a control batch
// that holds no marker): producer and transaction state are rebuilt this
// way, reading the few bytes of a marker and the headers of the rest.
func (l *Log) ScanMarkers(from, to int64, fn func(h batch.Header, m *batch.Marker) error) error {
	return l.scanBatches(from, to, true, fn)
}

func (l *Log) scanBatches(from, to int64, markers bool, fn func(h batch.Header, m *batch.Marker) error) error {
	set := l.acquire()
	if set == nil {
		return ErrClosed
	}
	defer set.release()
	to = min(to, l.leo.Load())
	from = max(from, l.logStart.Load())
	for i := segmentFor(set.segs, from); i < len(set.segs) && from < to; i++ {
		s := set.segs[i]
		size, next := s.sizeNext()
		if next <= from {
			continue
		}
		r := getHeaderReader(s.log)
		pos, _, err := s.find(r, from, size)
		for err == nil && pos < size {
			var h batch.Header
			h, err = r.header(pos, size)
			if err != nil {
				break
			}
			if h.BaseOffset >= to {
				pos = size
				break
			}
			var m *batch.Marker
			if markers && h.Control() && h.Size() <= maxMarkerBatch {
				b := make([]byte, h.Size())
				if _, err = s.log.ReadAt(b, pos); err != nil {
					err = fmt.Errorf("segment: read %s at %d: %w", s.log.Name(), pos, err)
					break
				}
				if mk, perr := batch.ParseMarker(h, b); perr == nil {
					m = &mk
				}
			}
			if err = fn(h, m); err != nil {
				break
			}
			pos += int64(h.Size())
		}
		putHeaderReader(r)
		if err != nil {
			return err
		}
		from = next
	}
	return nil
}

// ActiveBase is the base offset of the active segment (owner only): it
// changes when the log rolls.
func (l *Log) ActiveBase() int64 { return l.active.base }

// ActiveSize is the active segment's committed size: its batches' bytes.
// Its file may be longer (blocks reserved for direct writes, zeros), so
// a copy of the file up to it copies exactly the batches (owner only).
func (l *Log) ActiveSize() int64 { return l.active.size() }
