package segment

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"ringlog/internal/fsutil"
)

// Log compaction (cleanup.policy=compact), after Kafka's LogCleaner.
//
// The log is split at the first dirty offset (firstDirty): below it, the
// clean section, rewritten by earlier cleans; from it up to the cleanable
// end (the active segment, the high watermark, min.compaction.lag.ms), the
// dirty section, written since. A clean maps every key of the dirty section
// to the offset of its latest record, then rewrites every segment below the
// map's end, keeping a record only when no later record of its key exists,
// and writes cleaned segments that replace the old ones.
//
// A clean runs in three steps, split by who may run them, so that the
// expensive part never holds up the log's owner:
//
//	PlanClean     owner          pins the segment set, copies what the clean needs
//	Clean         any goroutine  builds the offset map, writes <base>.log.cleaned files
//	InstallClean  owner          commits (.cleaned -> .swap), installs the new set,
//	                             removes the old files, renames .swap to the final names
//
// Crash safety follows Kafka's .swap protocol, made deterministic by one
// rule of the rewrite: the last batch of each group of segments is always
// written, emptied of its records if need be, so that a cleaned segment
// covers exactly the offsets of the segments it replaces ([first base, end
// of the last)). A .log.swap file therefore names the segments it replaces
// by itself: every segment whose base lies in [its base, its next offset).
// See recoverSwaps for what Open does with leftovers.

// Files of a clean in progress and the cleaner's checkpoint.
const (
	// cleanedSuffix marks a cleaned segment being written; a crash leaves
	// it incomplete, and Open deletes it.
	cleanedSuffix = ".cleaned"
	// swapSuffix marks a cleaned segment whose clean is committed; Open
	// finishes the swap.
	swapSuffix = ".swap"
	// cleanerCheckpointFile holds "0\n<first dirty offset> <delete horizon>\n":
	// where the next clean's dirty section starts, and the earliest delete
	// horizon of a tombstone the last clean kept (-1: none).
	cleanerCheckpointFile = "cleaner-checkpoint"
)

// Errors of a clean. Neither leaves anything behind: the old segments stay
// in force.
var (
	// ErrCleanAborted means CleanOptions.Stop was closed during the clean.
	ErrCleanAborted = errors.New("segment: clean aborted")
	// ErrCleanStale means the log was truncated between PlanClean and
	// InstallClean, so the cleaned segments no longer describe it.
	ErrCleanStale = errors.New("segment: log truncated during the clean")
)

// cleanerState is the log's compaction state; all of it but busy belongs
// to the owner.
type cleanerState struct {
	loaded bool
	// firstDirty is the first offset the cleans so far have not mapped.
	firstDirty int64
	// horizon is the earliest delete horizon among the tombstones the last
	// clean kept: once the clock passes it, a clean is due to remove them.
	// math.MaxInt64 when none is pending.
	horizon int64
	// truncations counts truncations; a plan made before one is stale.
	truncations int64
	// busy is set while a plan is out (PlanClean until InstallClean or
	// Discard): one clean at a time per log.
	busy atomic.Bool
}

// cleanerLoad reads the cleaner checkpoint once. A checkpoint that cannot
// be parsed is ignored: it only saves work (without it, the whole log is
// dirty and the next clean maps all of it), so losing it costs time, not
// data.
func (l *Log) cleanerLoad() error {
	if l.cleaner.loaded {
		return nil
	}
	l.cleaner.firstDirty, l.cleaner.horizon = 0, math.MaxInt64
	b, err := readSmallFile(filepath.Join(l.dir, cleanerCheckpointFile))
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return err
	}
	if f := strings.Fields(string(b)); len(f) == 3 && f[0] == "0" {
		fd, err1 := strconv.ParseInt(f[1], 10, 64)
		hz, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 == nil && err2 == nil && fd >= 0 {
			l.cleaner.firstDirty = fd
			if hz >= 0 {
				l.cleaner.horizon = hz
			}
		}
	}
	l.cleaner.loaded = true
	return nil
}

// cleanerPersist replaces the cleaner checkpoint, without syncing it: it
// runs on the owner's goroutine at the end of every clean, and no content
// it may have after a power loss is unsafe. The clean it records was made
// durable first, so it never claims more than was cleaned; a stale one
// costs a clean more work (or, after a truncation, leaves some records
// uncompacted until they are rewritten), a torn one is ignored. Two fsyncs
// less per clean on the owner's goroutine, which appends wait for.
func (l *Log) cleanerPersist() error {
	hz := l.cleaner.horizon
	if hz == math.MaxInt64 {
		hz = -1
	}
	path := filepath.Join(l.dir, cleanerCheckpointFile)
	if err := os.WriteFile(path+tmpSuffix, fmt.Appendf(nil, "0\n%d %d\n", l.cleaner.firstDirty, hz), fsutil.FilePerm); err != nil {
		return err
	}
	return os.Rename(path+tmpSuffix, path)
}

// cleanerTruncated is called by every truncation (owner): a clean planned
// before it is stale, and the dirty section starts no later than the new
// end, so that what is appended after the truncation is mapped by the next
// clean (Kafka's maybeTruncateCheckpoint).
func (l *Log) cleanerTruncated(offset int64) error {
	l.cleaner.truncations++
	if err := l.cleanerLoad(); err != nil {
		return err
	}
	if l.cleaner.firstDirty <= offset {
		return nil
	}
	l.cleaner.firstDirty = offset
	return l.cleanerPersist()
}

// CleanStatus says how dirty a compacted log is, to choose which log to
// clean (Kafka's LogToClean).
type CleanStatus struct {
	// FirstDirty is where the dirty section starts; CleanableEnd is the
	// first offset no clean may touch yet: the active segment's base, the
	// base of the segment holding the upper bound (the last stable offset),
	// or the base of the first dirty segment younger than
	// min.compaction.lag.ms, whichever is lowest.
	FirstDirty, CleanableEnd int64
	// CleanBytes and DirtyBytes are the sizes of the segments of each
	// section below CleanableEnd; a segment holding FirstDirty is dirty.
	CleanBytes, DirtyBytes int64
	// Ratio is DirtyBytes / (CleanBytes + DirtyBytes).
	Ratio float64
	// Due says the log should be cleaned now, and Reason why: the ratio
	// reached min.cleanable.dirty.ratio, the oldest dirty batch is older
	// than max.compaction.lag.ms, or the delete horizon of a kept
	// tombstone has passed.
	Due    bool
	Reason string
}

// CleanStatus computes the log's cleaning status below upper (the high
// watermark). A log that is not compacted, or not usable, is never due
// (owner only; no I/O but the first read of the cleaner checkpoint).
func (l *Log) CleanStatus(upper int64) (CleanStatus, error) {
	var st CleanStatus
	if !l.cfg.Cleanup.Compacts() || l.usable() != nil {
		return st, nil
	}
	if err := l.cleanerLoad(); err != nil {
		return st, err
	}
	now := l.opts.Now().UnixMilli()
	fd := min(max(l.cleaner.firstDirty, l.logStart.Load()), l.LEO())
	// The segment holding upper is not cleanable, as in Kafka's
	// calculateCleanableBytes: upper (the last stable offset) may fall
	// inside a segment, and a clean maps and rewrites whole segments.
	end := l.active.base
	if upper < end {
		end = l.segs[segmentFor(l.segs, upper)].base
	}
	segs := l.segs[:len(l.segs)-1] // the active segment is never cleaned
	segEnd := func(i int) int64 { return l.segs[i+1].base }
	if lag := l.cfg.MinCompactionLagMs; lag > 0 {
		for i, s := range segs {
			if segEnd(i) <= fd {
				continue
			}
			if s.maxTs.Load() > now-lag {
				end = min(end, s.base)
				break
			}
		}
	}
	st.FirstDirty, st.CleanableEnd = fd, end
	var firstDirtySeg *segment
	for i, s := range segs {
		if s.base >= end {
			break
		}
		if segEnd(i) <= fd {
			st.CleanBytes += s.size()
			continue
		}
		st.DirtyBytes += s.size()
		if firstDirtySeg == nil && fd < end {
			firstDirtySeg = s
		}
	}
	if total := st.CleanBytes + st.DirtyBytes; total > 0 {
		st.Ratio = float64(st.DirtyBytes) / float64(total)
	}
	switch {
	case st.DirtyBytes > 0 && st.Ratio >= l.cfg.MinCleanableDirtyRatio:
		st.Due, st.Reason = true, "min.cleanable.dirty.ratio"
	case st.DirtyBytes > 0 && firstDirtySeg != nil && l.overdue(firstDirtySeg, now):
		st.Due, st.Reason = true, "max.compaction.lag.ms"
	case st.CleanBytes+st.DirtyBytes > 0 && now >= l.cleaner.horizon:
		st.Due, st.Reason = true, "delete horizon"
	}
	return st, nil
}

// overdue reports whether the first batch of s is older than
// max.compaction.lag.ms (Kafka uses the first batch's timestamp, falling
// back to the segment's largest one).
func (l *Log) overdue(s *segment, now int64) bool {
	ts := s.rollTs
	if ts < 0 {
		ts = s.maxTs.Load()
	}
	return ts >= 0 && ts <= now && now-ts > l.cfg.MaxCompactionLagMs
}

// CleanPlan is what a clean works on: the pinned segments below the
// cleanable end and a copy of the settings. It is released by
// InstallClean or CleanResult.Discard (or by Clean when it fails).
type CleanPlan struct {
	// Status is the log's status when the plan was made.
	Status CleanStatus

	log         *Log
	set         *segSet
	segs        []planSeg
	cfg         Config
	now         int64
	producers   map[int64]int64
	aborted     []AbortedTxn
	truncations int64
	released    atomic.Bool
}

// planSeg is a segment of the plan with its committed size and next offset
// when the plan was made; a segment that is not active does not change
// unless the log is truncated.
type planSeg struct {
	seg        *segment
	size, next int64
}

func (p *CleanPlan) release() {
	if p.released.CompareAndSwap(false, true) {
		p.set.release()
		p.log.cleaner.busy.Store(false)
	}
}

// PlanClean starts a clean of the log below upper (the last stable offset:
// every transaction below it has ended, clean_txn.go) and
// returns its plan, or nil when the log is not compacted, has nothing
// cleanable, or a clean is already out. It cleans whatever its status; the
// caller checks Status.Due when it wants Kafka's triggers.
//
// producers maps each active producer id to the last offset of its last
// batch: such a batch is kept, emptied if all its records go, so that the
// producer's sequence and epoch can be rebuilt from the log (Kafka keeps
// the same). nil means every producer id found in the log is active.
// (owner only)
func (l *Log) PlanClean(upper int64, producers map[int64]int64) (*CleanPlan, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	if !l.cfg.Cleanup.Compacts() {
		return nil, nil
	}
	st, err := l.CleanStatus(upper)
	if err != nil {
		return nil, err
	}
	if !l.cleaner.busy.CompareAndSwap(false, true) {
		return nil, nil
	}
	set := l.acquire()
	if set == nil {
		l.cleaner.busy.Store(false)
		return nil, ErrClosed
	}
	p := &CleanPlan{Status: st, log: l, set: set, cfg: l.cfg, now: l.opts.Now().UnixMilli(),
		producers: producers, truncations: l.cleaner.truncations}
	segs := p.set.segs
	for _, s := range segs[:len(segs)-1] {
		if s.base >= st.CleanableEnd {
			break
		}
		size, next := s.sizeNext()
		p.segs = append(p.segs, planSeg{seg: s, size: size, next: next})
	}
	if len(p.segs) == 0 {
		p.release()
		return nil, nil
	}
	p.aborted = planAborted(segs, st.CleanableEnd)
	return p, nil
}

// CleanOptions tune a clean.
type CleanOptions struct {
	// MaxKeys bounds the offset map (Kafka sizes it from
	// log.cleaner.dedupe.buffer.size). When the dirty section holds more
	// keys, the clean maps what fits and the next clean goes on from there.
	// 0 means DefaultCleanMaxKeys.
	MaxKeys int
	// Throttle, when set, is called with the bytes the clean has just read
	// or written; it may sleep to bound the cleaner's I/O rate.
	Throttle func(bytes int64)
	// Stop aborts the clean when closed (ErrCleanAborted).
	Stop <-chan struct{}
}

// DefaultCleanMaxKeys is Kafka's default capacity: a 128 MiB dedupe buffer
// of 24-byte entries (16-byte hash, 8-byte offset) at a 0.9 load factor.
const DefaultCleanMaxKeys = 128 << 20 / 24 * 9 / 10

// CleanStats describes a clean.
type CleanStats struct {
	// MapEnd is the end of the mapped dirty section: the next clean's
	// first dirty offset.
	MapEnd int64
	// Keys is the number of distinct keys mapped.
	Keys int
	// SegmentsIn were replaced by SegmentsOut cleaned segments.
	SegmentsIn, SegmentsOut int
	// BytesCleaned is the size of the segments the clean went through (the
	// log cleaned); BytesRead counts both passes; BytesWritten what the
	// cleaned segments hold.
	BytesCleaned, BytesRead, BytesWritten int64
	RecordsRead, RecordsRemoved           int64
	// TombstonesRemoved are tombstones whose delete horizon had passed.
	TombstonesRemoved int64
	// AbortedBatchesRemoved are batches of aborted transactions whose
	// records went; MarkersRemoved are transaction markers removed once
	// their transaction had no data left and their horizon had passed.
	AbortedBatchesRemoved, MarkersRemoved int
	// BatchesRewritten were rebuilt without their removed records,
	// BatchesEmptied kept as a bare header, BatchesDropped removed whole;
	// BatchesUndecodable were kept as they were because their records could
	// not be read.
	BatchesRewritten, BatchesEmptied, BatchesDropped, BatchesUndecodable int
	Duration                                                             time.Duration
}

// CleanNow plans, runs and installs a clean on the calling goroutine, which
// must be the owner: a log without a shard (tests, tools) cleans this way.
// It returns zero stats when there was nothing to clean.
func (l *Log) CleanNow(upper int64, opts CleanOptions) (CleanStats, error) {
	p, err := l.PlanClean(upper, nil)
	if err != nil || p == nil {
		return CleanStats{}, err
	}
	r, err := l.Clean(p, opts)
	if err != nil {
		return CleanStats{}, err
	}
	return l.InstallClean(r)
}
