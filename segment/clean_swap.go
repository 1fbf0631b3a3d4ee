package segment

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"ringlog/internal/fsutil"
	"ringlog/segment/batch"
)

// cleanCrashHook, set by tests, is called at each step of InstallClean;
// when it returns true the install stops there as if the process had died.
var cleanCrashHook func(step string) bool

func crashAt(r *CleanResult, step string) bool {
	if cleanCrashHook != nil && cleanCrashHook(step) {
		r.crashed = true
		return true
	}
	return false
}

// errCrashed is what InstallClean returns when a test hook stopped it.
var errCrashed = errors.New("segment: simulated crash")

// InstallClean swaps the cleaned segments of r in for the segments they
// replace (owner only). A group whose segments are no longer in the log as
// planned (retention deleted them meanwhile) is dropped; a truncation
// since the plan makes the whole clean stale (ErrCleanStale). Readers that
// hold the old segments keep reading them until they release them.
//
// On disk, in this order:
//
//  1. every cleaned file is renamed from .cleaned to .swap, the .log last,
//     and the directory synced: the clean is committed (a crash before
//     leaves the old segments in force, a crash after the new ones);
//  2. the new segment list is installed for readers;
//  3. the old segments' files are removed, except the first of each
//     group, whose names the cleaned segment takes over, and the indexes
//     are renamed from .swap to their final names; the directory is
//     synced, so that no later step can reach the disk before these;
//  4. each .log.swap is renamed to its final name, replacing the old file;
//  5. the cleaner checkpoint records the new first dirty offset.
//
// A failure after step 1 stops the log (Failed): Open settles the swap.
func (l *Log) InstallClean(r *CleanResult) (CleanStats, error) {
	if r == nil || r.plan == nil || r.plan.log != l {
		return CleanStats{}, errors.New("segment: InstallClean needs a result of this log's Clean")
	}
	defer r.finish()
	if err := l.usable(); err != nil {
		return r.Stats, err
	}
	if r.plan.truncations != l.cleaner.truncations {
		return r.Stats, ErrCleanStale
	}
	at := make(map[*segment]int, len(l.segs))
	for i, s := range l.segs {
		at[s] = i
	}
	var valid []*cleanGroup
	settled := true // every group installed, or gone with the segments it replaced
	for _, g := range r.groups {
		if g.appliesTo(l, at) {
			valid = append(valid, g)
		} else if _, still := at[g.old[len(g.old)-1].seg]; still {
			settled = false
		}
	}

	// 1. Commit.
	for _, g := range valid {
		if err := g.rename(cleanedSuffix, swapSuffix); err != nil {
			// Nothing is committed before the .log's rename: the group
			// can still be abandoned, and rename's failure left its
			// name as it was.
			return r.Stats, err
		}
		g.state = groupSwap
		if crashAt(r, "swap") {
			return r.Stats, errCrashed
		}
	}
	if len(valid) == 0 {
		return r.Stats, l.cleanerDone(r, settled)
	}
	if err := fsutil.SyncDir(l.dir); err != nil {
		l.fail(err)
		return r.Stats, err
	}
	if crashAt(r, "committed") {
		return r.Stats, errCrashed
	}

	// 2. Install.
	first := make(map[*segment]*cleanGroup, len(valid))
	for _, g := range valid {
		first[g.old[0].seg] = g
	}
	segs := make([]*segment, 0, len(l.segs))
	for i := 0; i < len(l.segs); {
		if g := first[l.segs[i]]; g != nil {
			segs = append(segs, g.seg)
			i += len(g.old)
			continue
		}
		segs = append(segs, l.segs[i])
		i++
	}
	l.install(segs)
	for _, g := range valid {
		// The log holds the cleaned segments now: whatever happens next,
		// their files are left to the log (and to Open's recovery).
		g.state = groupInstalled
	}

	// 3. Remove the old files, name the indexes.
	var errs []error
	for _, g := range valid {
		for _, o := range g.old[1:] {
			errs = append(errs, l.dropSegment(o.seg))
			if crashAt(r, "dropped") {
				return r.Stats, errCrashed
			}
		}
		// The first old segment's files are replaced by rename: only its
		// handles go, at the last reader's release.
		o := g.old[0].seg
		o.dropped.Store(true)
		if o.refs.Load() == 0 {
			errs = append(errs, o.close())
		}
		for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			errs = append(errs, os.Rename(g.seg.path(suf)+swapSuffix, g.seg.path(suf)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		l.fail(err)
		return r.Stats, err
	}
	if crashAt(r, "indexes") {
		return r.Stats, errCrashed
	}
	if err := fsutil.SyncDir(l.dir); err != nil {
		l.fail(err)
		return r.Stats, err
	}

	// 4. Final names.
	for _, g := range valid {
		if err := os.Rename(g.seg.path(logSuffix)+swapSuffix, g.seg.path(logSuffix)); err != nil {
			l.fail(err)
			return r.Stats, err
		}
		if crashAt(r, "renamed") {
			return r.Stats, errCrashed
		}
	}
	return r.Stats, l.cleanerDone(r, settled)
}

// cleanerDone records a clean's end in the cleaner state (step 5). The
// first dirty offset only moves when every group was settled: a group
// abandoned while its segments are still there has not been cleaned.
func (l *Log) cleanerDone(r *CleanResult, settled bool) error {
	if settled {
		l.cleaner.firstDirty = max(l.cleaner.firstDirty, r.mapEnd)
		l.cleaner.horizon = r.horizon
	} else {
		l.cleaner.horizon = min(l.cleaner.horizon, r.horizon)
	}
	if err := l.cleanerPersist(); err != nil {
		l.fail(err)
		return err
	}
	return nil
}

// appliesTo reports whether g's old segments are still in the log, in a
// row, unchanged and not active.
func (g *cleanGroup) appliesTo(l *Log, at map[*segment]int) bool {
	i, ok := at[g.old[0].seg]
	if !ok || i+len(g.old) >= len(l.segs) {
		return false
	}
	for j, o := range g.old {
		s := l.segs[i+j]
		if size, next := s.sizeNext(); s != o.seg || size != o.size || next != o.next {
			return false
		}
	}
	return true
}

// rename moves g's three files from one suffix to another, the .log last.
func (g *cleanGroup) rename(from, to string) error {
	for _, suf := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix} {
		p := g.seg.path(suf)
		if err := os.Rename(p+from, p+to); err != nil {
			return err
		}
	}
	return nil
}

// recoverSwaps settles cleans that a crash interrupted, before Open looks
// at the segments, and returns the bases of the segments that came out of
// a swap: their indexes cannot be trusted and must be rebuilt by a scan.
//
//   - *.cleaned files are from a clean that never committed: deleted, the
//     old segments stay in force.
//   - <base>.log.swap is a committed clean: its batches are validated (it
//     was synced before its rename, so an invalid one is corruption), every
//     segment whose base lies in [base, its next offset) is one it replaces
//     and is deleted (the cleaned segment covers exactly their offsets),
//     its index .swap files are deleted, and it is renamed to <base>.log.
//   - index .swap files without a .log.swap belong to a clean that did not
//     commit: deleted.
//
// Every step is idempotent, so a crash during recovery is settled by the
// next one the same way.
func (l *Log) recoverSwaps() (map[int64]bool, error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	changed := false
	var swaps, logs []int64
	var stale []string
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		switch {
		case strings.HasSuffix(name, cleanedSuffix):
			stale = append(stale, name)
		case strings.HasSuffix(name, swapSuffix):
			if b, ok := parseSegmentName(strings.TrimSuffix(name, swapSuffix), logSuffix); ok {
				swaps = append(swaps, b)
			} else {
				stale = append(stale, name) // an index's .swap: removed below once the .log.swap is settled
			}
		default:
			if b, ok := parseSegmentName(name, logSuffix); ok {
				logs = append(logs, b)
			}
		}
	}
	swapped := map[int64]bool{}
	slices.Sort(swaps)
	for _, base := range swaps {
		path := filepath.Join(l.dir, segmentName(base)+logSuffix)
		next, err := swapEnd(path+swapSuffix, base)
		if err != nil {
			return nil, err
		}
		for _, b := range logs {
			if b >= base && b < next {
				if err := removeSegmentFiles(l.dir, b, ""); err != nil {
					return nil, err
				}
			}
		}
		for _, suf := range []string{indexSuffix, timeIndexSuffix} {
			if err := os.Remove(filepath.Join(l.dir, segmentName(base)+suf+swapSuffix)); err != nil && !os.IsNotExist(err) {
				return nil, err
			}
		}
		// The replaced segments must be gone for good before the cleaned
		// one takes its name: a file system that kept the rename but not
		// the removals would show overlapping segments (InstallClean has
		// the same barrier at its step 3).
		if err := fsutil.SyncDir(l.dir); err != nil {
			return nil, err
		}
		if err := os.Rename(path+swapSuffix, path); err != nil {
			return nil, err
		}
		swapped[base] = true
		changed = true
	}
	for _, name := range stale {
		if err := os.Remove(filepath.Join(l.dir, name)); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		changed = true
	}
	if changed {
		if err := fsutil.SyncDir(l.dir); err != nil {
			return nil, err
		}
	}
	return swapped, nil
}

// swapEnd validates every batch of a committed cleaned segment and returns
// its next offset.
func swapEnd(path string, base int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if st.Size() > math.MaxUint32 {
		return 0, fmt.Errorf("%w: %s is %d bytes", ErrCorrupt, path, st.Size())
	}
	sc := newBatchScanner(f, st.Size())
	next := base
	for pos := int64(0); pos < st.Size(); {
		b, why, err := sc.at(pos)
		if err != nil {
			return 0, err
		}
		var h batch.Header
		if why == "" {
			h, err = batch.Validate(b, batch.Stored)
			if err != nil {
				why = err.Error()
			} else if h.BaseOffset < next {
				why = fmt.Sprintf("base offset %d below %d", h.BaseOffset, next)
			}
		}
		if why != "" {
			// The file was synced before the rename that committed it:
			// this is damage, not a torn write, and the segments it
			// replaces may be gone already.
			return 0, fmt.Errorf("%w: committed cleaned segment %s at %d: %s", ErrCorrupt, path, pos, why)
		}
		next = h.NextOffset()
		pos += int64(h.Size())
	}
	return next, nil
}
