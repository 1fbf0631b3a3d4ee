package engine

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"ringlog/segment"
	"ringlog/segment/batch"
)

// Log compaction: one cleaner goroutine per engine (Kafka's
// log.cleaner.threads = 1) compacts the partitions of topics whose
// cleanup.policy includes compact. Each round it asks every shard for the
// cleaning status of its compacted logs (a quick look at segment sizes),
// picks the dirtiest log that is due, has its shard pin the segments and
// hand over a plan, cleans on its own goroutine (offset map, cleaned
// segments written beside the log), and finally asks the shard to swap the
// cleaned segments in. The shard thus spends on a clean two short calls
// and the swap (a few renames and directory syncs), never the cleaning:
// its appends go on meanwhile. Logs of delete-only topics are never looked
// at.

// CleanerConfig configures the log cleaner (Kafka's log.cleaner.*).
type CleanerConfig struct {
	// Disabled is log.cleaner.enable=false: compacted topics then grow
	// without bound. The zero value runs the cleaner, Kafka's default.
	Disabled bool
	// Backoff is log.cleaner.backoff.ms: how long the cleaner sleeps when
	// no log is due (15 s).
	Backoff time.Duration
	// DedupeBufferSize is log.cleaner.dedupe.buffer.size (128 MiB): the
	// offset map's budget, counted as Kafka does (24 bytes per key at a
	// 0.9 load factor; Go's map takes about 1.5 times that). A dirty
	// section with more keys is cleaned over several rounds.
	DedupeBufferSize int64
	// IOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second: the
	// cleaner's reads and writes together stay under this rate. 0 means
	// no limit (Kafka's default, Double.MaxValue).
	IOMaxBytesPerSecond float64
}

func (c *CleanerConfig) setDefaults() {
	if c.Backoff <= 0 {
		c.Backoff = 15 * time.Second
	}
	if c.DedupeBufferSize <= 0 {
		c.DedupeBufferSize = 128 << 20
	}
}

// maxKeys is the offset map's capacity for the budget.
func (c *CleanerConfig) maxKeys() int {
	return max(1, int(c.DedupeBufferSize/24*9/10))
}

// CleanerStats counts the cleaner's work since the engine opened.
type CleanerStats struct {
	Cleans, Failures int64
	// BytesCleaned is the size of the log the cleans went through,
	// BytesRemoved what they took off it.
	BytesCleaned, BytesRemoved int64
}

// CleanerStats returns the cleaner's counters.
func (e *Core) CleanerStats() CleanerStats {
	c := e.cleaner
	if c == nil {
		return CleanerStats{}
	}
	return CleanerStats{Cleans: c.cleans.Load(), Failures: c.failures.Load(),
		BytesCleaned: c.bytesCleaned.Load(), BytesRemoved: c.bytesRemoved.Load()}
}

type cleaner struct {
	e        *Core
	cfg      CleanerConfig
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	// Owned by the cleaner goroutine: partitions whose last clean failed,
	// left alone until the time given.
	failed map[*partition]time.Time

	cleans, failures           atomic.Int64
	bytesCleaned, bytesRemoved atomic.Int64
	// running is set while a clean runs off the shards (tests watch it).
	running atomic.Bool
}

func startCleaner(e *Core) *cleaner {
	c := &cleaner{e: e, cfg: e.cfg.Cleaner, stop: make(chan struct{}), done: make(chan struct{}),
		failed: map[*partition]time.Time{}}
	if c.cfg.Disabled {
		close(c.done)
		return c
	}
	go c.run()
	return c
}

// close stops the cleaner and waits for it. A clean in progress is
// abandoned: its cleaned files are deleted and the old segments stay.
func (c *cleaner) close() {
	c.stopOnce.Do(func() { close(c.stop) })
	<-c.done
}

func (c *cleaner) run() {
	defer close(c.done)
	t := time.NewTimer(c.cfg.Backoff)
	defer t.Stop()
	for {
		// After a clean another log (or the rest of this one) may be due
		// at once; only an idle round waits.
		if !c.cleanOne() {
			t.Reset(c.cfg.Backoff)
			select {
			case <-c.stop:
				return
			case <-t.C:
			}
		}
		select {
		case <-c.stop:
			return
		default:
		}
	}
}

// onShard runs fn on s and waits for it. It does not give up on the
// cleaner's stop: fn may create a plan, which must not be left to nobody.
// The shards outlive the cleaner (Close stops it first), so this returns.
func (c *cleaner) onShard(s *shard, fn func()) bool {
	return s.do(func() error { fn(); return nil }) == nil
}

type cleanCandidate struct {
	p  *partition
	st segment.CleanStatus
}

// pick returns the dirtiest log that is due (Kafka's
// grabFilthiestCompactedLog), or nil.
func (c *cleaner) pick() *cleanCandidate {
	now := time.Now()
	for p, until := range c.failed {
		if p.deleted.Load() || now.After(until) {
			delete(c.failed, p)
		}
	}
	var best *cleanCandidate
	for _, s := range c.e.shards {
		var found []cleanCandidate
		c.onShard(s, func() {
			for p := range s.parts {
				// A partition moving to another directory is not cleaned
				// (Kafka pauses cleaning too): the move copies segments
				// it takes to be immutable.
				if p.log() == nil || p.deleted.Load() || p.offlineErr() != nil || p.move.Load() != nil || p.log().Failed() != nil || !p.log().Config().Cleanup.Compacts() {
					continue
				}
				st, err := p.log().CleanStatus(p.cleanableEnd())
				if err != nil {
					c.e.log.Error("cleaner status", "partition", p.dir, "err", err)
					continue
				}
				if st.Due {
					found = append(found, cleanCandidate{p, st})
				}
			}
		})
		for i := range found {
			f := &found[i]
			if _, ok := c.failed[f.p]; ok {
				continue
			}
			if best == nil || f.st.Ratio > best.st.Ratio {
				best = f
			}
		}
	}
	return best
}

// cleanOne cleans the dirtiest due log, if any, and reports whether it did.
func (c *cleaner) cleanOne() bool {
	cand := c.pick()
	if cand == nil {
		return false
	}
	p := cand.p
	var plan *segment.CleanPlan
	var log *segment.Log
	var err error
	c.onShard(p.shard, func() {
		if p.log() == nil || p.deleted.Load() || p.offlineErr() != nil {
			return
		}
		log = p.log()
		plan, err = log.PlanClean(p.cleanableEnd(), p.activeProducers())
	})
	if err != nil || plan == nil {
		if err != nil {
			c.fail(p, err)
		}
		return false
	}
	c.running.Store(true)
	t := throttler{rate: c.cfg.IOMaxBytesPerSecond, stop: c.stop, start: time.Now()}
	res, err := log.Clean(plan, segment.CleanOptions{MaxKeys: c.cfg.maxKeys(), Throttle: t.add, Stop: c.stop})
	c.running.Store(false)
	if err != nil {
		if !errors.Is(err, segment.ErrCleanAborted) {
			c.fail(p, err)
		}
		return false
	}
	var stats segment.CleanStats
	ran := c.onShard(p.shard, func() {
		if p.move.Load() != nil {
			res.Discard()
			err = segment.ErrCleanStale // a move began during the clean
			return
		}
		if p.deleted.Load() || p.log() != log || p.offlineErr() != nil {
			res.Discard()
			err = fmt.Errorf("%w: %s-%d deleted during its clean", ErrUnknownTopicOrPartition, p.tp.Topic, p.tp.Partition)
			return
		}
		stats, err = log.InstallClean(res)
		p.shard.checkDisk(p, err)
	})
	if !ran {
		res.Discard()
		return false
	}
	if err != nil {
		if !errors.Is(err, segment.ErrCleanStale) && !errors.Is(err, ErrUnknownTopicOrPartition) {
			c.fail(p, err)
		}
		return false
	}
	delete(c.failed, p)
	c.cleans.Add(1)
	c.bytesCleaned.Add(stats.BytesCleaned)
	c.bytesRemoved.Add(stats.BytesCleaned - stats.BytesWritten)
	rate := 0.0
	if s := stats.Duration.Seconds(); s > 0 {
		rate = float64(stats.BytesCleaned) / s / 1e6
	}
	c.e.log.Info("log cleaned", "partition", p.tp, "reason", cand.st.Reason, "dirty_ratio", cand.st.Ratio,
		"segments", fmt.Sprintf("%d->%d", stats.SegmentsIn, stats.SegmentsOut), "bytes_cleaned", stats.BytesCleaned,
		"bytes_written", stats.BytesWritten, "records_removed", stats.RecordsRemoved, "keys", stats.Keys,
		"duration", stats.Duration, "mb_per_s", rate)
	return true
}

// fail records a failed clean: the partition is left alone for a while, so
// that a log the cleaner cannot handle does not keep it from the others
// (Kafka marks such a partition uncleanable).
func (c *cleaner) fail(p *partition, err error) {
	c.failures.Add(1)
	c.failed[p] = time.Now().Add(10 * c.cfg.Backoff)
	c.e.log.Error("log cleaning failed", "partition", p.tp, "err", err)
}

// cleanableEnd is where compaction stops: the last stable offset, as in
// Kafka (not the high watermark): a transaction not settled yet may still
// be aborted, and the cleaner must know which records are aborted before
// it decides what to keep (shard only).
func (p *partition) cleanableEnd() int64 {
	return p.state().LSO
}

// activeProducers maps each producer id the partition knows to the last
// offset of its last batch: the cleaner keeps those batches, emptied if
// need be, so that the producer's state survives a rebuild from the log
// (shard only).
func (p *partition) activeProducers() map[int64]int64 {
	out := make(map[int64]int64, len(p.producers.entries))
	for pid, e := range p.producers.entries {
		if n := len(e.batches); n > 0 {
			out[pid] = e.batches[n-1].lastOffset
		}
	}
	return out
}

// throttler keeps the cleaner's I/O under a rate, as Kafka's Throttler
// does: it sleeps whenever the bytes counted since the start of its window
// are ahead of the rate.
type throttler struct {
	rate  float64
	stop  <-chan struct{}
	start time.Time
	bytes float64
}

func (t *throttler) add(n int64) {
	if t.rate <= 0 {
		return
	}
	t.bytes += float64(n)
	elapsed := time.Since(t.start)
	ahead := time.Duration(t.bytes/t.rate*float64(time.Second)) - elapsed
	if ahead > 10*time.Millisecond {
		timer := time.NewTimer(ahead)
		select {
		case <-timer.C:
		case <-t.stop:
			timer.Stop()
		}
	} else if ahead <= 0 && elapsed > time.Second {
		// Not behind: start a new window, so that an idle spell earns no
		// credit for a later burst.
		t.start, t.bytes = time.Now(), 0
	}
}

// keyed refuses a producer's batch to a compacted topic when a record has
// no key, as Kafka's LogValidator does: the cleaner would drop the record.
// Services inside the broker (AppendOnShard) are trusted to key what they
// write. The records are walked once more for this (decompressed again): a
// cost only compacted topics pay.
func keyed(h batch.Header, b []byte) error {
	err := batch.Records(h, b, maxDecompressed, func(rec *batch.Record) error {
		if rec.Key == nil {
			return fmt.Errorf("%w: a compacted topic cannot take a record without a key", batch.ErrRecord)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", segment.ErrInvalidBatch, err)
	}
	return nil
}
