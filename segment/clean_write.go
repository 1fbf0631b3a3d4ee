package segment

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"ringlog/segment/batch"

	"ringlog/internal/fsutil"
)

// CleanResult holds the cleaned segments a clean wrote, under their
// .cleaned names, until InstallClean swaps them in or Discard deletes them.
// Exactly one of the two must be called.
type CleanResult struct {
	// Stats describe the clean.
	Stats CleanStats

	plan    *CleanPlan
	groups  []*cleanGroup
	mapEnd  int64
	horizon int64
	// crashed is set by a test hook that stops InstallClean as a crash
	// would: nothing more may then happen on disk.
	crashed bool
}

// cleanGroup is a run of consecutive segments cleaned into one.
type cleanGroup struct {
	old []planSeg
	seg *segment // the cleaned segment; nil while nothing changed
	// state says which names its files have.
	state groupState

	w          *bufio.Writer
	pos, next  int64
	inputBytes int64
	// txns are the entries of the cleaned segment's transaction index:
	// the aborted transactions whose marker it keeps with their data.
	txns []AbortedTxn
}

type groupState uint8

const (
	groupCleaned   groupState = iota // <base>.*.cleaned
	groupSwap                        // committed: <base>.*.swap, not installed yet
	groupInstalled                   // in the log's segment list; files .swap or final
	groupGone                        // files removed
)

// cleanRun is one clean on the cleaner's goroutine. It reads only through
// the plan's pinned segments and writes only files of its own.
type cleanRun struct {
	l      *Log
	plan   *CleanPlan
	opts   CleanOptions
	cfg    Config
	now    int64
	m      *offsetMap
	mapEnd int64
	// producers maps producer ids to the last offset of their last batch.
	producers map[int64]int64
	horizon   int64
	stats     CleanStats
	txn       *txnClean

	sc     *batchScanner
	kept   []batch.Record
	arena  []batch.RecordHeader
	outBuf []byte
}

// Clean builds the offset map of the plan's dirty section and writes the
// cleaned segments beside the log under .cleaned names. Any goroutine may
// run it (a cleaner's): it reads through the plan's pinned segments only
// and changes nothing the owner or readers see. On error the plan is
// released and nothing is left behind.
func (l *Log) Clean(p *CleanPlan, opts CleanOptions) (res *CleanResult, err error) {
	if p == nil || p.log != l || p.released.Load() {
		return nil, errors.New("segment: Clean needs a plan of this log from PlanClean")
	}
	start := time.Now()
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = DefaultCleanMaxKeys
	}
	c := &cleanRun{l: l, plan: p, opts: opts, cfg: p.cfg, now: p.now, m: newOffsetMap(opts.MaxKeys),
		producers: p.producers, horizon: math.MaxInt64, txn: newTxnClean(slices.Clone(p.aborted))}
	r := &CleanResult{plan: p}
	defer func() {
		if err != nil {
			r.Discard()
			res = nil
		}
	}()
	if c.producers == nil {
		if c.producers, err = l.producerLastOffsets(); err != nil {
			return nil, err
		}
	}
	if err := c.buildMap(); err != nil {
		return nil, err
	}
	c.stats.MapEnd, c.stats.Keys = c.mapEnd, c.m.len()
	for _, g := range c.groups() {
		done, err := c.cleanGroup(g)
		if done != nil {
			r.groups = append(r.groups, done)
		}
		if err != nil {
			return nil, err
		}
	}
	r.mapEnd, r.horizon = c.mapEnd, c.horizon
	c.stats.Duration = time.Since(start)
	r.Stats = c.stats
	return r, nil
}

// producerLastOffsets maps every producer id of the log to the last offset
// of its last batch (CleanPlan's nil producers).
func (l *Log) producerLastOffsets() (map[int64]int64, error) {
	out := map[int64]int64{}
	err := l.ScanHeaders(l.LogStartOffset(), l.LEO(), func(h batch.Header) error {
		if h.ProducerID >= 0 && !h.Control() {
			out[h.ProducerID] = h.LastOffset()
		}
		return nil
	})
	return out, err
}

func (c *cleanRun) checkStop() error {
	select {
	case <-c.opts.Stop:
		return ErrCleanAborted
	default:
		return nil
	}
}

func (c *cleanRun) read(n int64) {
	c.stats.BytesRead += n
	if c.opts.Throttle != nil {
		c.opts.Throttle(n)
	}
}

func (c *cleanRun) wrote(n int64) {
	c.stats.BytesWritten += n
	if c.opts.Throttle != nil {
		c.opts.Throttle(n)
	}
}

// scanner returns the run's batch scanner reset to f, reusing its window.
func (c *cleanRun) scanner(f *os.File, end int64) *batchScanner {
	if c.sc == nil {
		c.sc = &batchScanner{buf: make([]byte, scanWindow)}
	}
	c.sc.f, c.sc.end, c.sc.winPos, c.sc.winLen = f, end, -1, 0
	return c.sc
}

// groups splits the segments below the map's end into runs that each
// become one cleaned segment, as Kafka's groupSegmentsBySize does: the
// sizes of a run add up to at most segment.bytes, and its offsets fit the
// index's 32-bit relative form. Small segments left by earlier cleans are
// thus merged. Empty segments are left alone: a group must end with a
// batch (see the swap rule in clean.go).
func (c *cleanRun) groups() [][]planSeg {
	var out [][]planSeg
	var cur []planSeg
	var bytes int64
	flush := func() {
		if len(cur) > 0 {
			out = append(out, cur)
		}
		cur, bytes = nil, 0
	}
	for _, ps := range c.plan.segs {
		if ps.seg.base >= c.mapEnd {
			break
		}
		if ps.size == 0 {
			flush()
			continue
		}
		if len(cur) > 0 && (bytes+ps.size > c.cfg.SegmentBytes || ps.next-1-cur[0].seg.base > math.MaxInt32) {
			flush()
		}
		cur = append(cur, ps)
		bytes += ps.size
	}
	flush()
	return out
}

// cleanGroup rewrites the segments of old into one cleaned segment. A
// single segment in which nothing changes is not rewritten: it returns nil.
// The output is only started at the first change, by copying the unchanged
// prefix, so that a clean that changes little writes little.
func (c *cleanRun) cleanGroup(old []planSeg) (g *cleanGroup, err error) {
	g = &cleanGroup{old: old}
	c.txn.entries = c.txn.entries[:0]
	for _, ps := range old {
		g.inputBytes += ps.size
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, g.remove())
			g = nil
		}
	}()
	if len(old) > 1 {
		// Merging segments is a change in itself.
		if err := c.startOutput(g, 0); err != nil {
			return g, err
		}
	}
	for gi, ps := range old {
		sc := c.scanner(ps.seg.log, ps.size)
		for pos := int64(0); pos < ps.size; {
			if err := c.checkStop(); err != nil {
				return g, err
			}
			b, h, err := c.batchAt(sc, ps, pos)
			if err != nil {
				return g, err
			}
			last := gi == len(old)-1 && pos+int64(h.Size()) == ps.size
			out, changed, err := c.filter(b, h, last)
			if err != nil {
				return g, fmt.Errorf("segment: clean batch at offset %d of %s: %w", h.BaseOffset, ps.seg.path(logSuffix), err)
			}
			if changed && g.seg == nil {
				if err := c.startOutput(g, pos); err != nil {
					return g, err
				}
			}
			if g.seg != nil && out != nil {
				oh := h
				if changed {
					if oh, err = batch.ParseHeader(out); err != nil {
						return g, err
					}
				}
				if err := c.emit(g, out, oh); err != nil {
					return g, err
				}
			}
			c.read(int64(h.Size()))
			pos += int64(h.Size())
		}
	}
	c.stats.BytesCleaned += g.inputBytes
	if g.seg == nil {
		return nil, nil
	}
	g.txns = slices.Clone(c.txn.entries)
	if err := c.finishOutput(g); err != nil {
		return g, err
	}
	c.stats.SegmentsIn += len(old)
	c.stats.SegmentsOut++
	return g, nil
}

// startOutput creates g's cleaned segment and copies the first prefix
// bytes of its first segment into it unchanged, indexing them.
func (c *cleanRun) startOutput(g *cleanGroup, prefix int64) error {
	base := g.old[0].seg.base
	seg, err := createCleaned(c.l.dir, base, c.indexCapacity(g.inputBytes, offsetEntrySize), c.indexCapacity(g.inputBytes, timeEntrySize))
	if err != nil {
		return err
	}
	g.seg, g.next = seg, base
	g.w = bufio.NewWriterSize(seg.log, 1<<20)
	if prefix == 0 {
		return nil
	}
	src := g.old[0].seg
	r := newHeaderReader(src.log)
	for p := int64(0); p < prefix; {
		h, err := r.header(p, prefix)
		if err != nil {
			return err
		}
		seg.indexBatch(p, h, c.cfg.IndexIntervalBytes)
		g.next = h.NextOffset()
		p += int64(h.Size())
	}
	if _, err := g.w.ReadFrom(io.NewSectionReader(src.log, 0, prefix)); err != nil {
		return fmt.Errorf("segment: copy %s: %w", src.path(logSuffix), err)
	}
	g.pos = prefix
	c.wrote(prefix)
	return nil
}

// indexCapacity sizes an index of a cleaned segment: no more entries than
// index.interval.bytes allows for the input's size, within
// segment.index.bytes.
func (c *cleanRun) indexCapacity(inputBytes int64, entrySize int64) int64 {
	n := inputBytes/max(c.cfg.IndexIntervalBytes+1, batch.HeaderSize) + 2
	return min(n, c.cfg.SegmentIndexBytes/entrySize) * entrySize
}

func (c *cleanRun) emit(g *cleanGroup, b []byte, h batch.Header) error {
	if g.pos+int64(len(b)) > math.MaxUint32 {
		return fmt.Errorf("segment: cleaned segment %d would exceed 4 GiB", g.seg.base)
	}
	g.seg.indexBatch(g.pos, h, c.cfg.IndexIntervalBytes)
	if _, err := g.w.Write(b); err != nil {
		return fmt.Errorf("segment: write %s: %w", g.seg.log.Name(), err)
	}
	g.pos += int64(len(b))
	g.next = h.NextOffset()
	c.wrote(int64(len(b)))
	return nil
}

// finishOutput makes g's cleaned segment durable and ready to install:
// synced, indexes trimmed and synced, size and end published.
func (c *cleanRun) finishOutput(g *cleanGroup) error {
	s := g.seg
	if err := g.w.Flush(); err != nil {
		return fmt.Errorf("segment: write %s: %w", s.log.Name(), err)
	}
	g.w = nil
	// The swap rule: a cleaned segment covers what it replaces, exactly.
	if want := g.old[len(g.old)-1].next; g.next != want {
		return fmt.Errorf("segment: cleaned segment %d ends at %d, the segments it replaces at %d", s.base, g.next, want)
	}
	s.publish(g.pos, g.next)
	s.written = g.pos
	s.createdMs = c.now
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("segment: sync %s: %w", s.log.Name(), err)
	}
	for _, x := range []*index{s.offsets.index, s.times.index} {
		if err := x.trim(); err != nil {
			return err
		}
		if err := x.sync(); err != nil {
			return err
		}
	}
	// The aborted transactions whose markers stay with data of theirs
	// (clean_txn.go), as Kafka's cleaner indexes them: one whose marker
	// went must not be named to consumers, who would skip the producer's
	// later records while they wait for that marker.
	es := g.txns
	b := make([]byte, 0, len(es)*txnEntrySize)
	for _, e := range es {
		b = appendTxnEntry(b, e)
	}
	if err := writeFileSynced(s.path(txnIndexSuffix)+cleanedSuffix, b); err != nil {
		return err
	}
	s.txn.entries.store(es)
	return nil
}

// createCleaned creates the files of a cleaned segment at base under
// .cleaned names, over any leftover of an earlier attempt.
func createCleaned(dir string, base, offsetsCap, timesCap int64) (*segment, error) {
	s := &segment{dir: dir, base: base, rollTs: -1}
	s.maxTs.Store(-1)
	// Its final name: the index is written under .cleaned by
	// finishOutput, renamed with the others, and used by that name once
	// installed.
	s.txn.path = s.path(txnIndexSuffix)
	if err := removeSegmentFiles(dir, base, cleanedSuffix); err != nil {
		return nil, err
	}
	var err error
	if s.log, err = os.OpenFile(s.path(logSuffix)+cleanedSuffix, os.O_RDWR|os.O_CREATE|os.O_TRUNC, fsutil.FilePerm); err != nil {
		return nil, err
	}
	if s.offsets, err = openOffsetIndex(s.path(indexSuffix)+cleanedSuffix, base, offsetsCap); err == nil {
		s.times, err = openTimeIndex(s.path(timeIndexSuffix)+cleanedSuffix, base, timesCap)
	}
	if err == nil {
		err = s.offsets.grow()
	}
	if err == nil {
		err = s.times.grow()
	}
	if err != nil {
		s.close()
		removeSegmentFiles(dir, base, cleanedSuffix)
		return nil, err
	}
	return s, nil
}

// removeSegmentFiles removes the files of the segment at base whose names
// end in suffix after the usual one (".cleaned", ".swap", or "" for the
// segment itself), the .log first.
func removeSegmentFiles(dir string, base int64, suffix string) error {
	var errs []error
	s := segment{dir: dir, base: base}
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		if err := os.Remove(s.path(suf) + suffix); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// remove closes g's cleaned segment and deletes its files, whatever their
// names are now (cleaned or swap). Once installed, they belong to the log:
// until then, no old file has been deleted, so even a committed .swap can
// be withdrawn and the old segments stay in force.
func (g *cleanGroup) remove() error {
	if g.seg == nil || g.state == groupInstalled || g.state == groupGone {
		return nil
	}
	suffix := cleanedSuffix
	if g.state == groupSwap {
		suffix = swapSuffix
	}
	err := errors.Join(g.seg.close(), removeSegmentFiles(g.seg.dir, g.seg.base, suffix))
	g.state = groupGone
	return err
}

// Discard deletes the cleaned segments of a clean that will not be
// installed and releases its plan. Any goroutine may call it.
func (r *CleanResult) Discard() {
	if r == nil {
		return
	}
	r.finish()
}

// finish releases what InstallClean did not take: the plan, and the
// cleaned segments of groups that were not installed.
func (r *CleanResult) finish() {
	for _, g := range r.groups {
		if r.crashed {
			// A crash leaves the files as they are; only this process's
			// handles go.
			if g.state != groupInstalled && g.seg != nil {
				g.seg.close()
			}
			continue
		}
		// A leftover file only wastes space until the next Open deletes
		// it, so a failure to remove it is not worth failing over.
		_ = g.remove()
	}
	r.plan.release()
}
