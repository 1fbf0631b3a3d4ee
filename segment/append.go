package segment

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"

	"ringlog/internal/fsutil"
	"ringlog/ioring"
	"ringlog/segment/batch"
)

// AppendOptions says where batches come from.
type AppendOptions struct {
	// Replica keeps the offsets and leader epochs the batches carry (a
	// follower copying its leader, whose log may have offset gaps after
	// compaction); the batches are validated as stored batches. Otherwise
	// the batches come from a producer: they are validated strictly, and
	// the log assigns offsets from its LEO and stamps LeaderEpoch.
	Replica     bool
	LeaderEpoch int32
	// LogAppendTime stamps each batch with the append time instead of the
	// producer's (message.timestamp.type=LogAppendTime). Producer batches
	// only.
	LogAppendTime bool
	// Validated says the caller has already run batch.Validate on every
	// batch in the mode Replica implies (the engine does, to answer each
	// produce request on its own before batching requests together): only
	// the headers are parsed again, not the CRC nor the records.
	Validated bool
}

// AppendResult describes a completed append.
type AppendResult struct {
	BaseOffset int64
	LastOffset int64
	// LogAppendTime is the time stamped on the batches, or -1.
	LogAppendTime int64
	Batches       int
	Records       int64
	Bytes         int64
	// Synced is true when the append was made durable before completing.
	Synced bool
}

// TaskKind tells what a Task does.
type TaskKind uint8

const (
	// TaskAppend writes batches (and syncs them under FlushAlways).
	TaskAppend TaskKind = iota
	// TaskFlush syncs the active segment (FlushInterval, or Flush).
	TaskFlush
	// TaskRollFlush syncs a segment that was just rolled, after which the
	// recovery point moves past it.
	TaskRollFlush
)

// Task is I/O a log needs done. The owner submits Ops (with any other
// log's ops: one submission for a whole shard round) and passes every op
// that ioring returns to Complete. Ops may include ops of other tasks of the
// same log (a roll's background sync); Complete sorts them out.
type Task struct {
	Kind TaskKind
	// Ops to submit, all in one ioring.IO.Submit.
	Ops []*ioring.Op
	// Ctx is the caller's: what to answer when the task completes.
	Ctx any
	// Result and Err are set when Complete reports the task done.
	Result AppendResult
	Err    error

	log       *Log
	remaining int

	// TaskAppend
	write    ioring.Op
	seg      *segment
	pos      int64 // where the write starts
	prevNext int64 // the log's next offset before the append
	next     int64
	hdrs     []batch.Header
	// stage is the staging buffer the batches were copied into (nil when
	// they stayed in the caller's memory), the write's for a direct one.
	stage []byte

	// TaskFlush and TaskRollFlush
	syncs [4]ioring.Op
	// txnFile is the segment's transaction index, opened for its sync
	// (syncs[3]) when it was written since the last one; closed when the
	// task completes.
	txnFile *os.File
	msgs    int64    // unflushed messages the flush covers
	rolled  *segment // TaskRollFlush: the segment being synced
	done    bool
	created int64 // TaskRollFlush: base of the segment created by the roll
}

// Complete records the completion of op, which must have been returned by
// ioring. When it was the last op of its task, the task's effect is applied
// to the log (commit, or rollback on error) and the task is returned with
// true; the caller then answers whatever waited on it.
func Complete(op *ioring.Op) (*Task, bool) {
	t, ok := op.Tag.(*Task)
	if !ok {
		return nil, false
	}
	t.remaining--
	if t.remaining > 0 {
		return t, false
	}
	t.log.finish(t)
	return t, true
}

func (t *Task) addOp(op *ioring.Op) {
	op.Tag = t
	t.Ops = append(t.Ops, op)
	t.remaining++
}

// Prepare validates batches, assigns their offsets (rewriting the batches
// in place, or their copies in a direct write's staging buffer), rolls the
// segment when needed and returns the task that writes them. The batches
// belong to the log until the task completes. At most one append is in
// flight per log (ErrPending).
func (l *Log) Prepare(batches [][]byte, opts AppendOptions) (*Task, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	if l.pending != nil {
		return nil, ErrPending
	}
	if len(batches) == 0 {
		return nil, ErrEmpty
	}
	var total int64
	for _, b := range batches {
		total += int64(len(b))
	}
	st, err := l.Stage(total)
	if err != nil {
		return nil, err
	}
	var check func([]byte, uint32) error
	if !opts.Validated {
		mode := batch.Strict
		if opts.Replica {
			mode = batch.Stored
		}
		check = func(b []byte, _ uint32) error {
			_, err := batch.Validate(b, mode)
			return err
		}
	}
	for i, b := range batches {
		if int64(len(b)) > l.cfg.MaxMessageBytes {
			st.Release()
			return nil, fmt.Errorf("%w: batch %d is %d bytes, limit %d", ErrBatchTooBig, i, len(b), l.cfg.MaxMessageBytes)
		}
		if _, err := st.Add(b, check); err != nil {
			st.Release()
			return nil, fmt.Errorf("%w: batch %d: %w", ErrInvalidBatch, i, err)
		}
	}
	return l.PrepareStaged(st, opts)
}

// PrepareStaged is Prepare for the batches of st, which were checked as
// they were staged (opts.Validated is implied): only their headers are
// read again. It takes st: the staging buffer goes back when the task
// completes, or at once when PrepareStaged fails.
func (l *Log) PrepareStaged(st *Staging, opts AppendOptions) (t *Task, err error) {
	defer func() {
		if err != nil {
			st.Release()
		}
	}()
	if err := l.usable(); err != nil {
		return nil, err
	}
	if l.pending != nil {
		return nil, ErrPending
	}
	batches := st.batches
	if len(batches) == 0 {
		return nil, ErrEmpty
	}
	t = &Task{Kind: TaskAppend, log: l, hdrs: make([]batch.Header, 0, len(batches))}
	var total, records int64
	next := l.nextOffset
	for i, b := range batches {
		if int64(len(b)) > l.cfg.MaxMessageBytes {
			return nil, fmt.Errorf("%w: batch %d is %d bytes, limit %d", ErrBatchTooBig, i, len(b), l.cfg.MaxMessageBytes)
		}
		h, err := batch.ParseHeader(b)
		if err == nil && h.Size() != len(b) {
			err = fmt.Errorf("%w: header says %d bytes, batch has %d", batch.ErrLength, h.Size(), len(b))
		}
		if err != nil {
			return nil, fmt.Errorf("%w: batch %d: %w", ErrInvalidBatch, i, err)
		}
		if opts.Replica {
			if h.BaseOffset < next {
				return nil, fmt.Errorf("%w: batch %d at offset %d, log end offset %d", ErrOffsetOrder, i, h.BaseOffset, next)
			}
		} else {
			h.BaseOffset = next
		}
		next = h.NextOffset()
		total += int64(len(b))
		records += int64(h.NumRecords)
		t.hdrs = append(t.hdrs, h)
	}

	now := l.opts.Now().UnixMilli()
	first := t.hdrs[0]
	incomingTs := int64(-1)
	for _, h := range t.hdrs {
		incomingTs = max(incomingTs, h.MaxTimestamp)
	}
	if opts.LogAppendTime && !opts.Replica {
		incomingTs = now
	}
	// Index files grow before the write, so that a full disk fails the
	// append here instead of raising SIGBUS when Complete stores an entry
	// through the mapping. A new segment (roll, rebase) reserves its room
	// as it is created, before it replaces the active one.
	switch {
	case l.shouldRoll(l.active, total, next-1, incomingTs, now):
		rt, err := l.roll(first.BaseOffset, indexEntriesFor(t.hdrs, 0, l.cfg.IndexIntervalBytes))
		if err != nil {
			return nil, err
		}
		t.Ops = append(t.Ops, rt.Ops...)
	case opts.Replica && l.active.written == 0 && first.BaseOffset != l.active.base:
		// An empty active segment takes the base of the first batch a
		// follower copies into it (the leader's log may have a gap here).
		if err := l.rebaseEmptyActive(first.BaseOffset, indexEntriesFor(t.hdrs, 0, l.cfg.IndexIntervalBytes)); err != nil {
			return nil, err
		}
	default:
		if err := l.active.reserveIndex(indexEntriesFor(t.hdrs, l.active.bytesSinceIndex, l.cfg.IndexIntervalBytes)); err != nil {
			return nil, err
		}
	}

	appendTime := int64(-1)
	if !opts.Replica {
		if opts.LogAppendTime {
			appendTime = now
		}
		for i, b := range batches {
			h := &t.hdrs[i]
			// The batches were validated above, so the rewrites cannot
			// fail; the errors are checked all the same.
			err := errors.Join(batch.SetBaseOffset(b, h.BaseOffset), batch.SetPartitionLeaderEpoch(b, opts.LeaderEpoch))
			h.PartitionLeaderEpoch = opts.LeaderEpoch
			if appendTime >= 0 {
				err = errors.Join(err, batch.SetMaxTimestamp(b, appendTime, true))
				h.MaxTimestamp = appendTime
				h.Attributes |= batch.AttrLogAppendTime
			}
			if err != nil {
				return nil, fmt.Errorf("%w: batch %d: %w", ErrInvalidBatch, i, err)
			}
		}
	}

	s := l.active
	t.seg, t.pos, t.prevNext, t.next = s, s.written, l.nextOffset, next
	d, err := l.directSeg(s)
	if err != nil {
		return nil, err
	}
	if d != nil {
		if t.write, err = l.directWrite(s, d, st); err != nil {
			return nil, err
		}
	} else {
		t.write = ioring.Op{Kind: ioring.OpWrite, File: s.log, Offset: s.written, Bufs: batches}
	}
	t.stage = st.buf
	switch l.cfg.Flush {
	case FlushAlways:
		t.write.Sync = ioring.SyncData
	case FlushInterval:
		if l.unflushedMsgs+records >= l.cfg.FlushMessages {
			t.write.Sync = ioring.SyncData
		}
	}
	t.addOp(&t.write)
	t.Result = AppendResult{BaseOffset: first.BaseOffset, LastOffset: next - 1, LogAppendTime: appendTime,
		Batches: len(batches), Records: records, Bytes: total, Synced: t.write.Sync != ioring.SyncNone}
	s.written += total
	l.nextOffset = next
	l.pending = t
	return t, nil
}

// shouldRoll follows Kafka's LogSegment.shouldRoll: a new segment starts
// when this one would grow past segment.bytes, when the incoming batches'
// timestamp is segment.ms past the first batch's (or, without timestamps,
// the segment was created segment.ms ago; on a compacted log
// max.compaction.lag.ms when shorter), when an index is full, or when
// offsets would no longer fit the index's 32-bit relative form.
func (l *Log) shouldRoll(s *segment, size, lastOffset, incomingTs, nowMs int64) bool {
	if s.written == 0 {
		return false
	}
	rollMs := l.cfg.rollMs()
	switch {
	case s.written+size > l.cfg.SegmentBytes:
		return true
	case lastOffset-s.base > math.MaxInt32:
		return true
	case s.offsets.full() || s.times.full():
		return true
	case rollMs > 0 && s.rollTs >= 0 && incomingTs-s.rollTs > rollMs:
		return true
	case rollMs > 0 && s.rollTs < 0 && nowMs-s.createdMs > rollMs:
		return true
	}
	return false
}

// indexEntriesFor is the most index entries that appending hdrs adds to
// a segment whose bytesSinceIndex is since: indexBatch's rule, run ahead.
func indexEntriesFor(hdrs []batch.Header, since, intervalBytes int64) int {
	n := 0
	for _, h := range hdrs {
		if since > intervalBytes {
			n++
			since = 0
		}
		since += int64(h.Size())
	}
	return n
}

// reserveIndex makes room in both index files for n more entries.
func (s *segment) reserveIndex(n int) error {
	if n == 0 {
		return nil
	}
	if err := s.offsets.reserve(n); err != nil {
		return fmt.Errorf("segment: grow %s: %w", s.offsets.m.f.Name(), err)
	}
	if err := s.times.reserve(n); err != nil {
		return fmt.Errorf("segment: grow %s: %w", s.times.m.f.Name(), err)
	}
	return nil
}

// roll starts a new active segment at base, with room in its indexes for
// entries, and returns the background task that syncs the old one.
func (l *Log) roll(base int64, entries int) (*Task, error) {
	old := l.active
	s, err := l.newEmptySegment(base, entries)
	if err != nil {
		return nil, err
	}
	// Blocks reserved for direct writes past the old segment's data go
	// before its sync below, which makes its size durable.
	if err := old.trimDirect(); err != nil {
		s.close()
		return nil, err
	}
	if err := old.offsets.trim(); err != nil {
		return nil, err
	}
	if err := old.times.trim(); err != nil {
		return nil, err
	}
	txnFile, err := old.txn.openForSync()
	if err != nil {
		return nil, err
	}
	l.install(append(slices.Clip(l.segs), s))

	// The old segment is synced in the background (its dirty pages may be
	// many); once that is done the recovery point moves to the new one.
	rt := &Task{Kind: TaskRollFlush, log: l, rolled: old, created: base, txnFile: txnFile}
	files := []*os.File{old.log, old.offsets.m.f, old.times.m.f}
	if rt.txnFile != nil {
		files = append(files, rt.txnFile)
	}
	for i, f := range files {
		rt.syncs[i] = ioring.Op{Kind: ioring.OpSync, File: f, Sync: ioring.SyncFull}
		rt.addOp(&rt.syncs[i])
	}
	old.ref() // the sync needs the files open until it completes
	l.rollFlushes = append(l.rollFlushes, rt)
	return rt, nil
}

// newEmptySegment creates segment files at base, discarding any leftover
// content a file of that name might have, with room in its indexes for
// entries, and publishes it as empty.
func (l *Log) newEmptySegment(base int64, entries int) (*segment, error) {
	s, err := openSegment(l.dir, base, l.cfg.SegmentIndexBytes)
	if err != nil {
		return nil, err
	}
	if err := discardContent(s.log); err != nil {
		s.close()
		return nil, err
	}
	// The new segment's name must be durable before anything is appended
	// to it: an append synced into a file whose directory entry a power
	// loss removes is lost with it (issue 20). One directory sync per roll.
	if err := fsutil.SyncDir(l.dir); err != nil {
		s.close()
		return nil, err
	}
	// A transaction index left by a segment of the same base (a log
	// emptied and restarted there) goes with that log's batches.
	if !s.txn.stale {
		if err := s.txn.rewrite(nil); err != nil {
			s.close()
			return nil, err
		}
	}
	s.txn.stale = false
	// Leftover index entries are zeroed, not cut off: the files may be
	// those of a segment of the same base that readers still map
	// (TruncateFullyAndStartAt), and a page past a file's end is a SIGBUS
	// to whoever touches it.
	s.offsets.setCount(0)
	s.times.setCount(0)
	if err := s.reserveIndex(entries); err != nil {
		s.close()
		return nil, err
	}
	s.createdMs = l.opts.Now().UnixMilli()
	s.publish(0, base)
	return s, nil
}

// discardContent empties a segment file that may hold the batches of a
// log that was truncated away, and makes that durable: batches of the old
// log coming back after a power loss would be taken for the new one's.
func discardContent(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() == 0 {
		return nil
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	return f.Sync()
}

// rebaseEmptyActive replaces the empty active segment with one based at
// base (> its base).
func (l *Log) rebaseEmptyActive(base int64, entries int) error {
	old := l.active
	s, err := l.newEmptySegment(base, entries)
	if err != nil {
		return err
	}
	segs := append(slices.Clip(l.segs[:len(l.segs)-1]), s)
	l.install(segs)
	if len(segs) == 1 {
		l.logStart.Store(max(l.logStart.Load(), base))
	}
	l.nextOffset = base
	l.leo.Store(base)
	return l.dropSegment(old)
}

// finish applies a task whose ops have all completed.
func (l *Log) finish(t *Task) {
	switch t.Kind {
	case TaskAppend:
		l.finishAppend(t)
	case TaskFlush:
		l.finishFlush(t)
	case TaskRollFlush:
		l.finishRollFlush(t)
	}
}

func (l *Log) finishAppend(t *Task) {
	l.pending = nil
	s := t.seg
	// The staging buffer goes back to the pool once done has kept what it
	// needs of it, unless the tail cache keeps it.
	stage := t.stage
	defer func() {
		if stage != nil {
			ioring.Unstage(stage)
		}
	}()
	if err := t.write.Err; err != nil {
		t.Err = err
		if t.write.N == t.write.Len() {
			// The data reached the file but its sync failed: the kernel may
			// have dropped the dirty pages, so nothing can be trusted until
			// recovery runs again.
			l.fail(err)
			return
		}
		// Undo the partial write so that the next append starts on a batch
		// boundary.
		s.written = t.pos
		l.nextOffset = t.prevNext
		if s.direct != nil {
			s.direct.trimmed(t.pos)
		}
		if terr := s.log.Truncate(t.pos); terr != nil {
			l.fail(fmt.Errorf("truncate after failed write: %w (write: %w)", terr, err))
		}
		return
	}
	if l.closed {
		return
	}
	pos := t.pos
	epochsChanged := false
	for _, h := range t.hdrs {
		s.indexBatch(pos, h, l.cfg.IndexIntervalBytes)
		if l.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset) {
			epochsChanged = true
		}
		pos += int64(h.Size())
	}
	if t.write.Direct && s.direct != nil {
		s.direct.done(&t.write, pos)
		// Cached before the size is published: a reader that sees the
		// new size sees the chunk too.
		if s.cache.add(l.opts.TailBudget, t.pos, stage[t.pos-t.write.Offset:pos-t.write.Offset], stage) {
			stage = nil
		}
		l.tailAt = l.opts.Now()
	}
	s.publish(pos, t.next)
	l.leo.Store(t.next)
	l.appended.Add(pos - t.pos)
	if t.Result.Synced {
		l.unflushedMsgs = 0
		l.lastFlush = l.opts.Now()
	} else {
		l.unflushedMsgs += t.Result.Records
	}
	if epochsChanged {
		if err := l.epochs.persist(); err != nil {
			t.Err = fmt.Errorf("segment: persist leader epochs: %w", err)
			l.fail(t.Err)
		}
	}
}

// PrepareFlush returns a task that syncs the active segment, or nil when
// nothing is due: under FlushInterval when flush.ms has passed since the
// last sync and records are unsynced; with force whenever records are
// unsynced (owner only).
func (l *Log) PrepareFlush(force bool) *Task {
	if l.usable() != nil || l.unflushedMsgs == 0 {
		return nil
	}
	if !force {
		if l.cfg.Flush != FlushInterval || l.opts.Now().Sub(l.lastFlush).Milliseconds() < l.cfg.FlushMs {
			return nil
		}
	}
	t := &Task{Kind: TaskFlush, log: l, msgs: l.unflushedMsgs, rolled: l.active}
	t.syncs[0] = ioring.Op{Kind: ioring.OpSync, File: l.active.log, Sync: ioring.SyncData}
	t.addOp(&t.syncs[0])
	// The transaction index is synced with the data it describes; a file
	// that cannot be opened is left to the next flush (and, failing that,
	// rebuilt by recovery: it is derived from the log).
	if f, err := l.active.txn.openForSync(); err == nil && f != nil {
		t.txnFile = f
		t.syncs[3] = ioring.Op{Kind: ioring.OpSync, File: f, Sync: ioring.SyncData}
		t.addOp(&t.syncs[3])
	}
	l.active.ref()
	return t
}

func (l *Log) finishFlush(t *Task) {
	defer t.rolled.unref()
	t.closeTxnFile()
	for i := range t.syncs {
		if err := t.syncs[i].Err; err != nil {
			t.Err = err
			l.fail(err)
			return
		}
	}
	l.unflushedMsgs = max(0, l.unflushedMsgs-t.msgs)
	l.lastFlush = l.opts.Now()
}

// closeTxnFile closes the transaction index a sync task opened.
func (t *Task) closeTxnFile() {
	if t.txnFile != nil {
		t.txnFile.Close()
		t.txnFile = nil
	}
}

func (l *Log) finishRollFlush(t *Task) {
	defer t.rolled.unref()
	t.closeTxnFile()
	for i := range t.syncs {
		if err := t.syncs[i].Err; err != nil {
			t.Err = err
			l.fail(err)
			return
		}
	}
	t.done = true
	// Roll syncs may complete out of order; the recovery point only moves
	// past segments whose syncs have all completed.
	moved := false
	for len(l.rollFlushes) > 0 && l.rollFlushes[0].done {
		l.recoveryPoint = max(l.recoveryPoint, l.rollFlushes[0].created)
		l.rollFlushes = l.rollFlushes[1:]
		moved = true
	}
	if moved && !l.closed {
		// The new segment's directory entry must be durable too.
		if err := fsutil.SyncDir(l.dir); err != nil {
			t.Err = err
			l.fail(err)
			return
		}
		if err := l.writeCheckpoint(); err != nil {
			t.Err = err
			l.fail(err)
		}
	}
}

// Append prepares, writes and completes an append synchronously through
// the log's IO (owner only). A shard uses Prepare and Complete instead, to
// batch many logs into one submission. Background syncs of rolled segments
// are left in flight and completed by later calls (or Close).
func (l *Log) Append(batches [][]byte, opts AppendOptions) (AppendResult, error) {
	t, err := l.Prepare(batches, opts)
	if err != nil {
		return AppendResult{}, err
	}
	if err := l.run(t.Ops, t); err != nil {
		return AppendResult{}, err
	}
	return t.Result, t.Err
}

// run submits ops through the log's IO and completes what comes back until
// task (nil: every op in flight) is done. It is for logs that own their IO;
// on a shared IO the shard dispatches completions itself. A failure of the
// ring itself (rather than of an op) leaves the ops' fate unknown: the log
// stops.
func (l *Log) run(ops []*ioring.Op, task *Task) error {
	if err := l.io.Submit(ops...); err != nil {
		l.fail(err)
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	var buf [8]*ioring.Op
	for {
		if task != nil && task.remaining == 0 {
			return nil
		}
		if task == nil && l.io.InFlight() == 0 {
			return nil
		}
		done, err := l.io.Wait(buf[:0], 1, -1)
		if err != nil {
			l.fail(err)
			return fmt.Errorf("%w: %w", ErrFailed, err)
		}
		for _, op := range done {
			Complete(op)
		}
	}
}
