package segment

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"ringlog/internal/fsutil"
	"ringlog/segment/batch"
)

// load opens the segments in l.dir and brings the log to a consistent
// state; see Open.
func (l *Log) load() error {
	// An interrupted clean is settled first, so that what follows sees the
	// segments in force: the old ones, or the cleaned ones.
	swapped, err := l.recoverSwaps()
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	var bases []int64
	indexBases := map[int64][]string{}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		switch {
		case strings.HasSuffix(name, tmpSuffix) || strings.HasSuffix(name, deletedSuffix):
			// An interrupted checkpoint write or segment deletion.
			if err := removeStale(l.dir, name); err != nil {
				return err
			}
		default:
			if b, ok := parseSegmentName(name, logSuffix); ok {
				bases = append(bases, b)
			} else if b, ok := parseSegmentName(name, indexSuffix); ok {
				indexBases[b] = append(indexBases[b], name)
			} else if b, ok := parseSegmentName(name, timeIndexSuffix); ok {
				indexBases[b] = append(indexBases[b], name)
			} else if b, ok := parseSegmentName(name, txnIndexSuffix); ok {
				indexBases[b] = append(indexBases[b], name)
			}
		}
	}
	slices.Sort(bases)
	// Index files without their .log are leftovers of a deletion that was
	// cut short (the .log goes first).
	for b, names := range indexBases {
		if _, found := slices.BinarySearch(bases, b); !found {
			for _, n := range names {
				if err := removeStale(l.dir, n); err != nil {
					return err
				}
			}
		}
	}

	ckpt, hasCkpt, err := readLogCheckpoint(l.dir)
	if err != nil {
		return err
	}
	epochBytes, err := readSmallFile(l.dir + string(os.PathSeparator) + epochFile)
	if err != nil {
		return err
	}
	if epochBytes != nil {
		if l.epochs.entries, err = parseEpochFile(epochBytes); err != nil {
			return err
		}
	}
	_, statErr := os.Stat(l.dir + string(os.PathSeparator) + cleanMarkerFile)
	clean := statErr == nil
	l.recovery.Clean = clean

	if len(bases) == 0 {
		bases = []int64{ckpt.logStart}
	}
	segs := make([]*segment, 0, len(bases))
	for _, b := range bases {
		s, err := openSegment(l.dir, b, l.cfg.SegmentIndexBytes)
		if err != nil {
			l.segs = segs
			return err
		}
		segs = append(segs, s)
	}
	l.segs = segs // closed by Open's caller on error

	// Segments before the one holding the recovery point were synced
	// before the checkpoint was written: their indexes are trusted.
	scanFrom := len(segs)
	if !clean {
		scanFrom = 0
		if hasCkpt {
			for i, s := range segs {
				if s.base <= ckpt.recoveryPoint {
					scanFrom = i
				}
			}
		}
	}
	scanned := map[*segment]bool{}
	for i := 0; i < len(segs); i++ {
		s := segs[i]
		if i > 0 && s.base < segs[i-1].next() {
			return fmt.Errorf("%w: segment %d starts below the end %d of the one before", ErrCorrupt, s.base, segs[i-1].next())
		}
		if i < scanFrom && !swapped[s.base] {
			ok, err := l.loadTrusted(s)
			if err != nil {
				return err
			}
			if ok {
				continue
			}
		}
		scanned[s] = true
		l.recovery.SegmentsScanned++
		bad, reason, err := l.scan(s)
		if err != nil {
			return err
		}
		if bad < 0 {
			continue
		}
		// The first invalid batch: a torn tail if nothing valid follows,
		// or if what lies between is a hole of pages never written (an
		// unsynced tail the disk persisted out of order); corruption
		// otherwise.
		if where, at, found, err := validDataAfter(s, bad, segs[i+1:]); err != nil {
			return err
		} else if found && !l.opts.RepairCorrupt {
			hole, err := unwrittenPage(s.log, bad, at)
			if err == nil && hole < 0 {
				hole, err = unwrittenHeader(s.log, bad, s.next())
			}
			if err != nil {
				return err
			}
			if hole < 0 {
				return fmt.Errorf("%w: %s at %d: %s, yet a valid batch follows at %s", ErrCorrupt, s.path(logSuffix), bad, reason, where)
			}
			reason = fmt.Sprintf("%s; the valid batch at %s follows a hole of unwritten pages at %d: an unsynced tail persisted out of order", reason, where, hole)
		}
		size, err := s.fileSize()
		if err != nil {
			return err
		}
		zeros, err := allZero(s.log, bad, size)
		if err != nil {
			return err
		}
		// Synced: a cut left to the page cache could be undone by a power
		// loss, bringing back the invalid tail under later appends.
		if err := s.log.Truncate(bad); err != nil {
			return err
		}
		if err := s.log.Sync(); err != nil {
			return err
		}
		if zeros {
			l.recovery.ZeroBytes += size - bad
			reason += "; zeros from there to the end"
		} else {
			l.recovery.TruncatedBytes += size - bad
		}
		l.recovery.Reason = fmt.Sprintf("%s at %d: %s", s.path(logSuffix), bad, reason)
		for _, later := range segs[i+1:] {
			if n, err := later.fileSize(); err == nil {
				l.recovery.TruncatedBytes += n
			}
			if err := l.dropSegment(later); err != nil {
				return err
			}
			l.recovery.SegmentsDropped++
		}
		segs = segs[:i+1]
		l.segs = segs
		break
	}

	// Transaction indexes are trusted where the batch indexes are (below
	// the recovery point, or after a clean shutdown) and when they decode
	// for their segment; the others are stale, rebuilt by the owner from
	// the log (TxnIndexStale).
	for _, s := range segs {
		if scanned[s] || swapped[s.base] {
			s.txn.stale = true
			continue
		}
		if !s.txn.stale {
			if err := s.txn.load(s.base, s.next()); err != nil {
				return err
			}
		}
	}

	active := segs[len(segs)-1]
	for _, s := range segs[:len(segs)-1] {
		if scanned[s] {
			if err := s.offsets.trim(); err != nil {
				return err
			}
			if err := s.times.trim(); err != nil {
				return err
			}
		}
	}
	l.install(segs)
	leo := active.next()
	l.nextOffset = leo
	l.leo.Store(leo)

	logStart := segs[0].base
	if hasCkpt {
		logStart = max(logStart, ckpt.logStart)
	}
	if logStart > leo {
		// DeleteRecords had moved the start past what survived a crash:
		// start over there, so that offsets never go back for consumers.
		if err := l.truncateFullyAndStartAtLocked(logStart); err != nil {
			return err
		}
		leo = logStart
	}
	l.logStart.Store(logStart)

	epochsChanged := epochBytes == nil
	epochsChanged = l.epochs.truncateFromEnd(leo) || epochsChanged
	epochsChanged = l.epochs.truncateFromStart(logStart) || epochsChanged
	epochsChanged = l.epochs.changedOnLoad || epochsChanged
	l.epochs.changedOnLoad = false
	if epochsChanged {
		if err := l.epochs.persist(); err != nil {
			return err
		}
	}

	if !clean {
		// What recovery kept came from the page cache: sync it before the
		// checkpoint says it need not be scanned again.
		for s := range scanned {
			if s.isClosed.Load() {
				continue
			}
			if err := s.log.Sync(); err != nil {
				return err
			}
			// A scanned segment below the active one is trusted from now
			// on, its rebuilt indexes included: they must be on disk too.
			if s != active {
				if err := s.offsets.sync(); err != nil {
					return err
				}
				if err := s.times.sync(); err != nil {
					return err
				}
			}
		}
	}
	l.recoveryPoint = l.active.base
	if !clean || !hasCkpt {
		if err := l.writeCheckpoint(); err != nil {
			return err
		}
	}
	if clean {
		// From here on a crash must lead to a scan.
		if err := removeStale(l.dir, cleanMarkerFile); err != nil {
			return err
		}
		if err := fsutil.SyncDir(l.dir); err != nil {
			return err
		}
	}
	return nil
}

// loadTrusted sets up a segment from its indexes without validating every
// batch: the index files are sanity-checked and the batches after the last
// index entry are walked to find the segment's end. It returns false when
// the segment must be scanned instead.
func (l *Log) loadTrusted(s *segment) (bool, error) {
	size, err := s.fileSize()
	if err != nil {
		return false, err
	}
	if size > math.MaxUint32 {
		return false, fmt.Errorf("%w: %s is %d bytes", ErrCorrupt, s.path(logSuffix), size)
	}
	n := int(s.offsets.count.Load())
	if n == 0 && size > 2*l.cfg.IndexIntervalBytes+l.cfg.MaxMessageBytes {
		return false, nil // an index this empty is missing, not sparse
	}
	lastOff, lastPos := s.offsets.last()
	if n > 0 && (lastOff < s.base || lastPos >= size) {
		return false, nil
	}
	tsLast, tsOff := s.times.last()
	if s.times.count.Load() > 0 && (tsOff < s.base || tsLast < 0) {
		return false, nil
	}
	r := newHeaderReader(s.log)
	pos, next := lastPos, s.base
	maxTs, offMaxTs := tsLast, tsOff
	for pos < size {
		h, err := r.header(pos, size)
		if err != nil || h.BaseOffset < next || h.LastOffset()-s.base > math.MaxUint32 {
			return false, nil
		}
		if h.MaxTimestamp > maxTs {
			maxTs, offMaxTs = h.MaxTimestamp, h.LastOffset()
		}
		next = h.NextOffset()
		pos += int64(h.Size())
	}
	if n > 0 && next <= lastOff {
		return false, nil
	}
	if size > 0 {
		first, err := r.header(0, size)
		if err != nil {
			return false, nil
		}
		s.rollTs = first.MaxTimestamp
	}
	s.createdMs = l.opts.Now().UnixMilli()
	s.publish(size, next)
	s.written = size
	s.maxTs.Store(maxTs)
	s.offsetOfMaxTs = offMaxTs
	s.bytesSinceIndex = size - lastPos
	return true, nil
}

// scan validates every batch of s from the start, rebuilds its indexes and
// assigns leader epochs. It returns the position of the first invalid
// batch with the reason, or -1 when the whole file is valid.
func (l *Log) scan(s *segment) (int64, string, error) {
	size, err := s.fileSize()
	if err != nil {
		return 0, "", err
	}
	// The indexes are rebuilt from nothing, their files growing with the
	// entries (Open runs before any reader, so the files may shrink).
	s.offsets.setCount(0)
	s.times.setCount(0)
	if err := errors.Join(s.offsets.trim(), s.times.trim()); err != nil {
		return 0, "", err
	}
	s.maxTs.Store(-1)
	s.bytesSinceIndex, s.rollTs, s.createdMs = 0, -1, l.opts.Now().UnixMilli()
	sc := newBatchScanner(s.log, size)
	pos, next := int64(0), s.base
	bad, reason := int64(-1), ""
	for pos < size {
		b, why, err := sc.at(pos)
		if err != nil {
			return 0, "", err
		}
		if why != "" {
			bad, reason = pos, why
			break
		}
		h, verr := batch.Validate(b, batch.Stored)
		switch {
		case verr != nil:
			why = verr.Error()
		case h.BaseOffset < next:
			why = fmt.Sprintf("base offset %d below %d", h.BaseOffset, next)
		case h.LastOffset()-s.base > math.MaxUint32 || pos+int64(h.Size()) > math.MaxUint32:
			why = fmt.Sprintf("offset %d or position %d beyond the segment's range", h.LastOffset(), pos)
		}
		if why != "" {
			bad, reason = pos, why
			break
		}
		if err := s.reserveIndex(indexEntriesFor([]batch.Header{h}, s.bytesSinceIndex, l.cfg.IndexIntervalBytes)); err != nil {
			return 0, "", err
		}
		s.indexBatch(pos, h, l.cfg.IndexIntervalBytes)
		if l.epochs.assignIfNewer(h.PartitionLeaderEpoch, h.BaseOffset) {
			l.epochs.changedOnLoad = true
		}
		pos += int64(h.Size())
		next = h.NextOffset()
		l.recovery.BatchesScanned++
	}
	s.publish(pos, next)
	s.written = pos
	return bad, reason, nil
}

// indexBatch updates the segment's indexes and timestamps for a batch
// written at pos, following Kafka's LogSegment.append: an offset index
// entry (and a time index entry) is added when more than intervalBytes of
// batches were written since the previous entry.
func (s *segment) indexBatch(pos int64, h batch.Header, intervalBytes int64) {
	if h.MaxTimestamp > s.maxTs.Load() {
		s.maxTs.Store(h.MaxTimestamp)
		s.offsetOfMaxTs = h.LastOffset()
	}
	if s.bytesSinceIndex == 0 && pos == 0 {
		s.rollTs = h.MaxTimestamp
	}
	if s.bytesSinceIndex > intervalBytes {
		if !s.offsets.full() {
			// Ordering is guaranteed by the caller; an error here would be
			// an internal invariant violation that only loses an entry.
			_ = s.offsets.append(h.LastOffset(), pos)
		}
		if !s.times.full() && s.maxTs.Load() >= 0 {
			s.times.maybeAppend(s.maxTs.Load(), s.offsetOfMaxTs)
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += int64(h.Size())
}

// batchScanner reads whole batches sequentially through a large window.
type batchScanner struct {
	f      *os.File
	end    int64
	buf    []byte
	winPos int64
	winLen int
}

const scanWindow = 1 << 20

func newBatchScanner(f *os.File, end int64) *batchScanner {
	return &batchScanner{f: f, end: end, buf: make([]byte, min(scanWindow, max(end, batch.HeaderSize))), winPos: -1}
}

// window returns the file bytes [pos, pos+n), reading when they are not
// already in the window. n never exceeds end-pos.
func (sc *batchScanner) window(pos int64, n int) ([]byte, error) {
	if sc.winPos >= 0 && pos >= sc.winPos && pos+int64(n) <= sc.winPos+int64(sc.winLen) {
		off := int(pos - sc.winPos)
		return sc.buf[off : off+n], nil
	}
	if n > len(sc.buf) {
		// A batch larger than the window; its size is bounded by the file.
		sc.buf = make([]byte, n)
	}
	m := int(min(int64(len(sc.buf)), sc.end-pos))
	got, err := sc.f.ReadAt(sc.buf[:m], pos)
	if got < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("segment: read %s at %d: %w", sc.f.Name(), pos, err)
	}
	sc.winPos, sc.winLen = pos, got
	return sc.buf[:n], nil
}

// at returns the batch at pos. A batch that does not fit in the file is
// reported through why (a torn write looks like that), not as an error.
func (sc *batchScanner) at(pos int64) (b []byte, why string, err error) {
	if sc.end-pos < batch.LengthPrefix {
		return nil, fmt.Sprintf("%d trailing bytes, less than a batch length prefix", sc.end-pos), nil
	}
	p, err := sc.window(pos, batch.LengthPrefix)
	if err != nil {
		return nil, "", err
	}
	length := int64(int32(uint32(p[8])<<24 | uint32(p[9])<<16 | uint32(p[10])<<8 | uint32(p[11])))
	size := batch.LengthPrefix + length
	switch {
	case length < batch.HeaderSize-batch.LengthPrefix:
		return nil, fmt.Sprintf("batch length %d too small", length), nil
	case pos+size > sc.end:
		return nil, fmt.Sprintf("batch of %d bytes runs past the end of the file (%d)", size, sc.end), nil
	}
	b, err = sc.window(pos, int(size))
	return b, "", err
}

// validDataAfter looks for a valid batch after the invalid one at bad in s,
// then at the start of each later segment. Finding one means the invalid
// batch is corruption in the middle of the log or a hole in an unsynced
// tail, not a torn tail. at is where the invalid region of s ends: the
// valid batch's position in s, or s's size when it is in a later segment.
func validDataAfter(s *segment, bad int64, later []*segment) (where string, at int64, found bool, err error) {
	size, err := s.fileSize()
	if err != nil {
		return "", 0, false, err
	}
	if pos, ok, err := searchValidBatch(s.log, bad+1, size); err != nil || ok {
		return fmt.Sprintf("%s:%d", s.path(logSuffix), pos), pos, ok, err
	}
	for _, t := range later {
		n, err := t.fileSize()
		if err != nil {
			return "", 0, false, err
		}
		if pos, ok, err := searchValidBatch(t.log, 0, n); err != nil || ok {
			return fmt.Sprintf("%s:%d", t.path(logSuffix), pos), size, ok, err
		}
	}
	return "", 0, false, nil
}

// pageSize is the unit in which the page cache writes a file back.
const pageSize = 4096

// minHole is the least run of zero bytes that unwrittenPage takes for
// part of a page never written back: random damage holds 16 zero bytes
// at a given place once in 2^128.
const minHole = 16

// unwrittenPage returns where, in [from, to) of f, a run of at least
// minHole zero bytes ends at a page boundary or at to (the valid data
// after it): part of a page that was never written back, or written back
// before its last writes (the page cache writes a page whole, as it is at
// that moment). It returns -1 when there is none.
//
// Recovery scans only what may be unsynced (the segments from the recovery
// point on). A log is synced whole (fdatasync covers every page of the
// file), so a batch after a page that never reached the disk was never
// synced, and so never acknowledged under flush always or interval and
// never promised under never: cutting at the invalid batch before it loses
// nothing durable. Damage that is not such a hole still refuses the log.
func unwrittenPage(f *os.File, from, to int64) (int64, error) {
	buf := make([]byte, pageSize)
	for page := from / pageSize * pageSize; page < to; page += pageSize {
		end := min(page+pageSize, to) // a page boundary, or to
		n := int(end - page)
		if _, err := f.ReadAt(buf[:n], page); err != nil {
			return -1, fmt.Errorf("segment: read %s at %d: %w", f.Name(), page, err)
		}
		z := n
		for z > 0 && buf[z-1] == 0 {
			z--
		}
		if start := max(page+int64(z), from); end-start >= minHole {
			return start, nil
		}
	}
	return -1, nil
}

// allZero reports whether f holds only zeros from from to to.
func allZero(f *os.File, from, to int64) (bool, error) {
	buf := make([]byte, 64<<10)
	for pos := from; pos < to; {
		n := int(min(int64(len(buf)), to-pos))
		if _, err := f.ReadAt(buf[:n], pos); err != nil {
			return false, fmt.Errorf("segment: read %s at %d: %w", f.Name(), pos, err)
		}
		for _, c := range buf[:n] {
			if c != 0 {
				return false, nil
			}
		}
		pos += int64(n)
	}
	return true, nil
}

// lengthEnd is where a batch's length field ends: a header whose bytes up
// to it are all zero has length 0, which no batch has.
const lengthEnd = 12

// unwrittenHeader returns bad when the invalid batch at bad begins on a
// page that was written back before the batch was appended: the batch's
// bytes from bad to the next page boundary are all zero, fewer than
// minHole (a longer run is unwrittenPage's), and either cover its length
// field, or leave a batch that validates but for its base offset, whose
// bytes past the zeros are next's and whose zeroed bytes are not (the
// zeros hid the base offset, or its high bytes, which the CRC does not
// cover: with 8 zeros or more it reads 0 where the log expects next > 0;
// with 7 of them, 203 where it expects 6859, 0x1ACB, as a power-loss test
// of one broker under -flush never found). The rest of the batch, on the
// next page, was written back later. As with unwrittenPage, fdatasync
// covers every page of the file: the batch and everything after it were
// never synced.
// A power-loss test of a cluster under -flush never found a follower's
// log with a batch straddling a page boundary that way (8 zero bytes),
// and the log was refused as corrupt. It returns -1 otherwise.
func unwrittenHeader(f *os.File, bad, next int64) (int64, error) {
	boundary := (bad/pageSize + 1) * pageSize
	k := boundary - bad
	if k >= minHole {
		return -1, nil
	}
	st, err := f.Stat()
	if err != nil {
		return -1, err
	}
	if boundary >= st.Size() {
		return -1, nil // nothing of the batch on a later page
	}
	head := make([]byte, k)
	if _, err := f.ReadAt(head, bad); err != nil {
		return -1, fmt.Errorf("segment: read %s at %d: %w", f.Name(), bad, err)
	}
	for _, c := range head {
		if c != 0 {
			return -1, nil
		}
	}
	if k >= lengthEnd {
		return bad, nil
	}
	b, why, err := newBatchScanner(f, st.Size()).at(bad)
	if err != nil || why != "" {
		return -1, err
	}
	if h, err := batch.Validate(b, batch.Stored); err == nil && h.BaseOffset != next && h.BaseOffset == next&survivingBytes(k) {
		return bad, nil
	}
	return -1, nil
}

// survivingBytes masks the bytes of a batch's base offset (big-endian, at
// the batch's start) that lie past its first k bytes.
func survivingBytes(k int64) int64 {
	if k >= 8 {
		return 0
	}
	return int64(^uint64(0) >> (8 * k))
}

// searchValidBatch scans [from, end) of f byte by byte for the start of a
// batch that passes validation. Candidates are filtered cheaply (magic
// byte, then a length that fits) before the CRC is checked, so zeroed and
// random tails are scanned at memory speed.
func searchValidBatch(f *os.File, from, end int64) (int64, bool, error) {
	sc := newBatchScanner(f, end)
	const magicAt = 16
	chunk := make([]byte, scanWindow)
	for base := from; base+batch.HeaderSize <= end; {
		n := int(min(int64(len(chunk)), end-base))
		got, err := f.ReadAt(chunk[:n], base)
		if got < n {
			return 0, false, fmt.Errorf("segment: read %s at %d: %w", f.Name(), base, err)
		}
		for i := 0; i+magicAt < n; i++ {
			if chunk[i+magicAt] != 2 {
				continue
			}
			pos := base + int64(i)
			if pos+batch.HeaderSize > end {
				break
			}
			b, why, err := sc.at(pos)
			if err != nil {
				return 0, false, err
			}
			if why != "" {
				continue
			}
			if _, err := batch.Validate(b, batch.Stored); err == nil {
				return pos, true, nil
			}
		}
		// Overlap by a header so that a batch straddling chunks is seen.
		if base+int64(n) >= end {
			break
		}
		base += int64(n) - batch.HeaderSize
	}
	return 0, false, nil
}
