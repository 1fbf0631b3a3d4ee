package segment

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"ringlog/internal/fsutil"
	"ringlog/ioring"
)

// Options are how a Log is wired, as opposed to its Config.
type Options struct {
	// IO performs the log's writes and syncs. Logs on one shard share the
	// shard's IO, so that one submission carries all of them. When nil the
	// log opens a portable IO of its own.
	IO ioring.IO
	// Now is the clock (tests set it); nil means time.Now.
	Now func() time.Time
	// RepairCorrupt makes Open cut a log at its first invalid batch even
	// when valid data follows (corruption rather than a torn tail),
	// instead of failing with ErrCorrupt. It is the operator's explicit
	// choice to lose data; never the default.
	RepairCorrupt bool
	// DirectWrites writes appends with O_DIRECT instead of through the page
	// cache (direct.go), where the file system offers direct I/O; the
	// log falls back to buffered writes, and says why in DirectWritesOff,
	// where it does not. Reads go through the page cache either way.
	DirectWrites bool
	// TailBudget bounds the memory of the tail caches (tail.go) of the
	// logs that share it, when DirectWrites is on; nil: 2 MiB per log.
	TailBudget *TailBudget
}

// RecoveryInfo says what Open found.
type RecoveryInfo struct {
	// Clean is true when the clean-shutdown marker was present, so no
	// segment was scanned.
	Clean bool
	// SegmentsScanned and BatchesScanned count the recovery scan.
	SegmentsScanned int
	BatchesScanned  int
	// TruncatedBytes were cut from a torn tail (or, with RepairCorrupt,
	// from the first invalid batch on), SegmentsDropped whole segments
	// after it.
	TruncatedBytes  int64
	SegmentsDropped int
	// ZeroBytes were cut from the end of the last segment kept, all zeros:
	// blocks reserved ahead of direct writes (Options.DirectWrites), or a
	// size extended before its data reached the disk. No data is lost
	// with them; TruncatedBytes does not count them.
	ZeroBytes int64
	// Reason describes the first invalid batch, if any.
	Reason string
}

// Log is one partition's log: a directory of segments.
//
// Concurrency: one goroutine, the owner, calls the methods that change the
// log (Prepare, Append, Complete, Truncate*, DeleteRecordsBefore,
// EnforceRetention, Flush, SetConfig, Close). Read, ReadOffsetForTimestamp,
// LEO, LogStartOffset, EndOffsetForEpoch and Epochs may be called from any
// goroutine at any time: they work on published, reference-counted views.
type Log struct {
	dir   string
	cfg   Config
	opts  Options
	io    ioring.IO
	ownIO bool

	// Owned by the writer.
	segs          []*segment
	active        *segment
	nextOffset    int64 // LEO including an append in flight
	pending       *Task
	failed        error
	closed        bool
	recoveryPoint int64
	unflushedMsgs int64
	lastFlush     time.Time
	// tailAt is when the active segment's tail cache last took an append
	// (direct writes); zero when it holds nothing (DropIdleTail).
	tailAt      time.Time
	recovery    RecoveryInfo
	rollFlushes []*Task // syncs of rolled segments, oldest first

	epochs epochCache

	// cleaner is the log compaction state (clean.go).
	cleaner cleanerState
	// dio is the direct-write state (direct.go).
	dio directState

	// Published for readers.
	set      atomic.Pointer[segSet]
	leo      atomic.Int64
	logStart atomic.Int64
	// appended counts the bytes of batches appended since the log was
	// opened (AppendedBytes), for the broker's metrics.
	appended atomic.Int64
}

// segSet is an immutable list of segments that readers pin while they
// read. The log holds one reference to the current set; replacing the set
// drops it, and the last reader out releases the segments, whose files are
// closed once no set refers to them.
type segSet struct {
	refs pins
	segs []*segment
}

// pins counts the references to something readers share with its owner:
// the owner's own and each reader's. Once the count reached 0 it is gone
// and no reader can pin it again.
type pins struct{ n atomic.Int64 }

// tryAcquire pins it for a reader; false when it is gone.
func (p *pins) tryAcquire() bool {
	for {
		n := p.n.Load()
		if n <= 0 {
			return false
		}
		if p.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// drop releases a reference and reports whether it was the last.
func (p *pins) drop() bool { return p.n.Add(-1) == 0 }

func (s *segSet) tryAcquire() bool { return s.refs.tryAcquire() }

func (s *segSet) release() {
	if s.refs.drop() {
		for _, seg := range s.segs {
			seg.unref()
		}
	}
}

// acquire pins the current segment set; nil once the log is closed (a
// reader racing Close gets ErrClosed, not a nil dereference).
func (l *Log) acquire() *segSet {
	for {
		s := l.set.Load()
		if s == nil {
			return nil
		}
		if s.tryAcquire() {
			return s
		}
	}
}

// install publishes segs as the current set.
func (l *Log) install(segs []*segment) {
	l.segs = segs
	l.active = segs[len(segs)-1]
	set := &segSet{segs: segs}
	set.refs.n.Store(1)
	for _, s := range segs {
		s.ref()
	}
	if old := l.set.Swap(set); old != nil {
		old.release()
	}
}

// Open opens the log in dir, creating it when absent, and recovers it:
// after a clean shutdown the files are trusted; otherwise every segment
// from the recovery point on is scanned, validated and re-indexed, and a
// torn tail is cut.
func Open(dir string, cfg Config, opts Options) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := fsutil.MkdirAllDurable(dir, fsutil.DirPerm); err != nil {
		return nil, err
	}
	l := &Log{dir: dir, cfg: cfg, opts: opts, io: opts.IO}
	l.epochs.dir = dir
	if l.opts.Now == nil {
		l.opts.Now = time.Now
	}
	if l.io == nil {
		l.io, l.ownIO = ioring.NewPortable(), true
	}
	if err := l.load(); err != nil {
		l.closeFiles()
		return nil, fmt.Errorf("segment: open %s: %w", dir, err)
	}
	l.lastFlush = l.opts.Now()
	return l, nil
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// Config is the log's current configuration (owner only).
func (l *Log) Config() Config { return l.cfg }

// SetConfig changes the configuration; it applies to later appends, rolls
// and retention runs (owner only).
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.cfg = cfg
	return nil
}

// Recovery reports what Open found.
func (l *Log) Recovery() RecoveryInfo { return l.recovery }

// LEO is the log end offset: the offset the next batch will get. Batches
// in flight are not counted until their write completes.
func (l *Log) LEO() int64 { return l.leo.Load() }

// LogStartOffset is the first offset that may be read.
func (l *Log) LogStartOffset() int64 { return l.logStart.Load() }

// Size is the total committed size of the segments in bytes.
func (l *Log) Size() int64 {
	set := l.acquire()
	if set == nil {
		return 0
	}
	defer set.release()
	var n int64
	for _, s := range set.segs {
		n += s.size()
	}
	return n
}

// Segments is the number of segments.
func (l *Log) Segments() int {
	set := l.acquire()
	if set == nil {
		return 0
	}
	defer set.release()
	return len(set.segs)
}

// Epochs is a copy of the leader-epoch cache.
func (l *Log) Epochs() []EpochEntry { return l.epochs.snapshot() }

// EndOffsetForEpoch answers OffsetForLeaderEpoch (KIP-101, KIP-279).
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	return l.epochs.endOffsetFor(epoch, l.LEO())
}

// EpochForOffset is the leader epoch that wrote offset (the latest epoch
// starting at or before it), or UndefinedEpoch.
func (l *Log) EpochForOffset(offset int64) int32 { return l.epochs.epochFor(offset) }

// Failed returns the error that stopped the log, if any.
func (l *Log) Failed() error { return l.failed }

func (l *Log) usable() error {
	switch {
	case l.closed:
		return ErrClosed
	case l.failed != nil:
		return fmt.Errorf("%w: %w", ErrFailed, l.failed)
	}
	return nil
}

// fail stops the log after an error that leaves its state uncertain (a
// failed fsync: the kernel may have dropped the dirty pages, so what is on
// disk is unknown until the log is reopened and recovered).
func (l *Log) fail(err error) {
	if l.failed == nil {
		l.failed = err
	}
}

// Stop marks the log failed with err (owner only), as a failed fsync does:
// it takes no more appends, flushes, truncations or cleans, and Close
// leaves no clean-shutdown marker, so the next Open scans it again. The
// engine stops the log of a partition it takes offline (a write that
// failed with EIO, whose undo cannot be trusted either).
func (l *Log) Stop(err error) { l.fail(err) }

func (l *Log) writeCheckpoint() error {
	c := logCheckpoint{logStart: l.logStart.Load(), recoveryPoint: l.recoveryPoint}
	return fsutil.WriteFileAtomic(l.dir, checkpointFile, c.encode())
}

// Flush makes everything appended so far durable, synchronously (owner
// only). Appends of the FlushAlways policy are durable without it.
func (l *Log) Flush() error {
	if err := l.usable(); err != nil {
		return err
	}
	t := l.PrepareFlush(true)
	if t == nil {
		return nil
	}
	if err := l.run(t.Ops, t); err != nil {
		return err
	}
	return t.Err
}

// Close flushes the log, trims the active segment's indexes, records the
// recovery point and writes the clean-shutdown marker, so that the next
// Open skips the recovery scan (owner only). A failed log is closed
// without the marker.
func (l *Log) Close() error {
	if l.closed {
		return nil
	}
	if l.pending != nil {
		return fmt.Errorf("segment: close %s with an append in flight", l.dir)
	}
	var errs []error
	if l.ownIO && l.io.InFlight() > 0 {
		// Background syncs of rolled segments still in flight.
		errs = append(errs, l.run(nil, nil))
	}
	if l.failed == nil {
		if err := l.cleanShutdown(); err != nil {
			errs = append(errs, err)
		}
	}
	l.closed = true
	errs = append(errs, l.closeFiles())
	if l.ownIO {
		errs = append(errs, l.io.Close())
	}
	return errors.Join(errs...)
}

func (l *Log) cleanShutdown() error {
	if err := l.active.trimDirect(); err != nil {
		return err
	}
	for _, s := range l.segs {
		if err := s.log.Sync(); err != nil {
			return err
		}
	}
	// A rolled segment whose background sync has not completed (only
	// after a ring failure) has indexes the marker would vouch for.
	for _, rt := range l.rollFlushes {
		if err := rt.rolled.offsets.sync(); err != nil {
			return err
		}
		if err := rt.rolled.times.sync(); err != nil {
			return err
		}
	}
	// Transaction indexes written since their last sync: the marker
	// vouches for them as it does for the others.
	for _, s := range l.segs {
		if err := s.txn.sync(); err != nil {
			return err
		}
	}
	a := l.active
	if err := a.offsets.trim(); err != nil {
		return err
	}
	if err := a.times.trim(); err != nil {
		return err
	}
	if err := a.offsets.sync(); err != nil {
		return err
	}
	if err := a.times.sync(); err != nil {
		return err
	}
	l.recoveryPoint = l.LEO()
	if err := l.writeCheckpoint(); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(l.dir, cleanMarkerFile, nil)
}

// closeFiles releases the log's hold on its segments; their files close
// when the last reader lets go.
func (l *Log) closeFiles() error {
	var errs []error
	if set := l.set.Swap(nil); set != nil {
		for _, s := range set.segs {
			s.dropped.Store(true)
		}
		set.release()
	} else {
		for _, s := range l.segs {
			errs = append(errs, s.close())
		}
	}
	l.segs, l.active = nil, nil
	return errors.Join(errs...)
}

// dropSegment removes a segment's files. Readers that still hold it keep
// their open descriptors and mappings (unlinked files stay readable on
// Unix) until they release it.
func (l *Log) dropSegment(s *segment) error {
	s.dropped.Store(true)
	var errs []error
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		if err := os.Remove(s.path(suf)); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	if s.refs.Load() == 0 {
		errs = append(errs, s.close())
	}
	return errors.Join(errs...)
}

// removeStale deletes leftovers of interrupted operations.
func removeStale(dir string, name string) error {
	return os.Remove(filepath.Join(dir, name))
}
