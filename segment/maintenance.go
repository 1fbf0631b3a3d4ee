package segment

import (
	"errors"
	"fmt"
	"slices"

	"ringlog/internal/fsutil"
)

// AssignEpoch records that leader epoch epoch starts at offset (a new
// leader does this when it takes over, before it appends anything), and
// persists the cache when it changed (owner only).
func (l *Log) AssignEpoch(epoch int32, offset int64) error {
	if err := l.usable(); err != nil {
		return err
	}
	if l.epochs.assign(epoch, offset) {
		return l.epochs.persist()
	}
	return nil
}

// TruncateTo removes every batch that holds an offset at or above offset,
// as a follower does after a leader change (KIP-101). A batch that starts
// below offset but reaches it is removed whole, so the LEO may end up below
// offset; it never ends up above. The truncation is synced before it
// returns, so that divergent batches cannot come back after a crash (owner
// only).
func (l *Log) TruncateTo(offset int64) error {
	if err := l.usable(); err != nil {
		return err
	}
	if l.pending != nil {
		return ErrPending
	}
	if offset >= l.nextOffset {
		return l.truncateEpochsFromEnd(l.nextOffset)
	}
	if offset < l.logStart.Load() {
		return l.TruncateFullyAndStartAt(offset)
	}
	i := segmentFor(l.segs, offset)
	for i > 0 && l.segs[i].base >= offset {
		i--
	}
	s := l.segs[i]
	size, next := s.sizeNext()
	r := getHeaderReader(s.log)
	pos, h, err := s.find(r, offset, size)
	putHeaderReader(r)
	if err != nil {
		return err
	}
	newNext := next
	if pos < size {
		newNext = min(offset, h.BaseOffset)
	}
	if err := l.truncateSegment(s, pos, newNext); err != nil {
		l.fail(err)
		return err
	}
	dropped := l.segs[i+1:]
	if len(dropped) > 0 {
		l.install(slices.Clone(l.segs[:i+1]))
		for _, d := range dropped {
			if err := l.dropSegment(d); err != nil {
				l.fail(err)
				return err
			}
		}
		// The dropped segments must not come back after a power loss,
		// whatever else is rewritten below.
		if err := fsutil.SyncDir(l.dir); err != nil {
			l.fail(err)
			return err
		}
	}
	l.nextOffset = newNext
	l.leo.Store(newNext)
	l.clampRollFlushes(s.base)
	if err := l.cleanerTruncated(newNext); err != nil {
		l.fail(err)
		return err
	}
	if l.epochs.truncateFromEnd(newNext) {
		if err := l.epochs.persist(); err != nil {
			l.fail(err)
			return err
		}
	}
	if l.recoveryPoint > s.base {
		l.recoveryPoint = s.base
		if err := l.writeCheckpoint(); err != nil {
			l.fail(err)
			return err
		}
	}
	return nil
}

// clampRollFlushes keeps the background syncs of rolled segments still in
// flight from moving the recovery point past base, the segment a
// truncation made active: the segments they would vouch for are gone, and
// what is appended to the active one next is not synced by them. (A
// recovery point above the active segment's base would have the next
// unclean start trust its unsynced tail without a scan.)
func (l *Log) clampRollFlushes(base int64) {
	for _, rt := range l.rollFlushes {
		rt.created = min(rt.created, base)
	}
}

// truncateSegment cuts s at pos, whose batches end before next.
func (l *Log) truncateSegment(s *segment, pos, next int64) error {
	if err := s.log.Truncate(pos); err != nil {
		return fmt.Errorf("segment: truncate %s: %w", s.log.Name(), err)
	}
	if s.direct != nil {
		s.direct.trimmed(pos)
	}
	// Before the smaller size is published and the next appends reuse
	// the positions past it.
	s.cache.drop()
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("segment: sync %s: %w", s.log.Name(), err)
	}
	s.offsets.truncateTo(next)
	s.times.truncateTo(next)
	if err := s.txn.truncateTo(next); err != nil {
		return err
	}
	// Recompute the largest timestamp: the time index holds it up to its
	// last entry, and only the batches after the last offset index entry
	// remain to be read.
	maxTs, offMaxTs := s.times.last()
	_, lastPos := s.offsets.last()
	r := getHeaderReader(s.log)
	defer putHeaderReader(r)
	for p := lastPos; p < pos; {
		h, err := r.header(p, pos)
		if err != nil {
			return err
		}
		if h.MaxTimestamp > maxTs {
			maxTs, offMaxTs = h.MaxTimestamp, h.LastOffset()
		}
		p += int64(h.Size())
	}
	s.maxTs.Store(maxTs)
	s.offsetOfMaxTs = offMaxTs
	s.bytesSinceIndex = pos - lastPos
	if pos == 0 {
		s.rollTs, s.bytesSinceIndex, s.createdMs = -1, 0, l.opts.Now().UnixMilli()
	}
	s.written = pos
	s.publish(pos, next)
	return nil
}

// TruncateFullyAndStartAt empties the log and restarts it at offset, as a
// follower does when its log has nothing in common with the leader's (owner
// only).
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if err := l.usable(); err != nil {
		return err
	}
	if l.pending != nil {
		return ErrPending
	}
	if err := l.truncateFullyAndStartAtLocked(offset); err != nil {
		l.fail(err)
		return err
	}
	return nil
}

func (l *Log) truncateFullyAndStartAtLocked(offset int64) error {
	old := l.segs
	s, err := l.newEmptySegment(offset, 0)
	if err != nil {
		return err
	}
	l.install([]*segment{s})
	var errs []error
	for _, d := range old {
		if d != s && d.base != offset {
			errs = append(errs, l.dropSegment(d))
		} else if d != s {
			// Same name as the new segment: the files were reused, only the
			// old handles go.
			d.dropped.Store(true)
			if d.refs.Load() == 0 {
				errs = append(errs, d.close())
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l.nextOffset = offset
	l.leo.Store(offset)
	l.logStart.Store(offset)
	l.recoveryPoint = offset
	l.clampRollFlushes(offset)
	if err := l.cleanerTruncated(offset); err != nil {
		return err
	}
	l.unflushedMsgs = 0
	l.epochs.mu.Lock()
	l.epochs.entries = nil
	l.epochs.mu.Unlock()
	if err := l.epochs.persist(); err != nil {
		return err
	}
	if err := fsutil.SyncDir(l.dir); err != nil {
		return err
	}
	return l.writeCheckpoint()
}

// DeleteRecordsBefore moves the log start offset to offset (DeleteRecords)
// and deletes the segments that lie wholly below it. The caller checks
// offset against the high watermark; offset above LEO is ErrOutOfRange. It
// returns the new log start offset (owner only).
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	if offset > l.LEO() {
		return 0, fmt.Errorf("%w: delete before %d, log end %d", ErrOutOfRange, offset, l.LEO())
	}
	if offset <= l.logStart.Load() {
		return l.logStart.Load(), nil
	}
	l.logStart.Store(offset)
	if err := l.writeCheckpoint(); err != nil {
		l.fail(err)
		return 0, err
	}
	if l.epochs.truncateFromStart(offset) {
		if err := l.epochs.persist(); err != nil {
			l.fail(err)
			return 0, err
		}
	}
	_, err := l.deleteOldSegments(func(i int, _ *segment) bool {
		return i+1 < len(l.segs) && l.segs[i+1].base <= offset
	}, l.LEO())
	return offset, err
}

// EnforceRetention deletes the oldest segments that retention.ms or
// retention.bytes no longer keep, never one holding offsets at or above
// upper (the high watermark). When the active segment itself has expired
// it is rolled first, as Kafka does. A log whose cleanup.policy is compact
// alone keeps everything. It returns the number of segments deleted (owner
// only).
func (l *Log) EnforceRetention(upper int64) (int, error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	if l.pending != nil {
		return 0, ErrPending
	}
	if !l.cfg.Cleanup.Deletes() {
		// cleanup.policy=compact alone: the cleaner keeps the log's size
		// in check, and retention must not delete the latest records.
		return 0, nil
	}
	now := l.opts.Now().UnixMilli()
	total := int64(0)
	for _, s := range l.segs {
		total += s.size()
	}
	excess := total - l.cfg.RetentionBytes
	return l.deleteOldSegments(func(_ int, s *segment) bool {
		if l.cfg.RetentionMs >= 0 && s.maxTs.Load() >= 0 && now-s.maxTs.Load() > l.cfg.RetentionMs {
			return true
		}
		if l.cfg.RetentionBytes >= 0 && excess-s.size() >= 0 {
			excess -= s.size()
			return true
		}
		return false
	}, upper)
}

// deleteOldSegments deletes segments from the oldest on while deletable
// says so and their offsets are below upper. An empty active segment is
// never deleted; a non-empty one is replaced by a new empty segment first.
func (l *Log) deleteOldSegments(deletable func(i int, s *segment) bool, upper int64) (int, error) {
	n := 0
	for n < len(l.segs) {
		s := l.segs[n]
		last := n == len(l.segs)-1
		end := s.next()
		if !last {
			end = l.segs[n+1].base
		}
		if end > upper || (last && s.size() == 0) || !deletable(n, s) {
			break
		}
		n++
	}
	if n == 0 {
		return 0, nil
	}
	doomed := l.segs[:n]
	keep := slices.Clone(l.segs[n:])
	if len(keep) == 0 {
		s, err := l.newEmptySegment(l.nextOffset, 0)
		if err != nil {
			l.fail(err)
			return 0, err
		}
		keep = []*segment{s}
	}
	l.install(keep)
	l.logStart.Store(max(l.logStart.Load(), keep[0].base))
	l.recoveryPoint = max(l.recoveryPoint, keep[0].base)
	if err := l.writeCheckpoint(); err != nil {
		l.fail(err)
		return 0, err
	}
	if l.epochs.truncateFromStart(l.logStart.Load()) {
		if err := l.epochs.persist(); err != nil {
			l.fail(err)
			return 0, err
		}
	}
	var errs []error
	for _, d := range doomed {
		errs = append(errs, l.dropSegment(d))
	}
	if err := errors.Join(errs...); err != nil {
		l.fail(err)
		return n, err
	}
	return n, nil
}
