package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options are the process-wide settings of Run.
type Options struct {
	Logger   *slog.Logger
	Metrics  *Metrics      // nil: none
	Progress time.Duration // the progress line's period; 0: none
	// PollRecordsMax bounds the records of one transaction (0: 5000).
	PollRecordsMax int
}

// errTopologyChanged ends a worker's run when the source gained topics
// or partitions: the next run starts over from what the target committed,
// with the new partitions in its plan.
var errTopologyChanged = errors.New("mirror: source topics changed")

// Run runs one worker per flow until ctx is done. A worker that fails
// starts over (after a back-off) from the offsets its target committed.
func Run(ctx context.Context, flows []*Flow, opt Options) error {
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.PollRecordsMax <= 0 {
		opt.PollRecordsMax = 5000
	}
	var wg sync.WaitGroup
	workers := make([]*worker, 0, len(flows))
	for _, f := range flows {
		w := &worker{f: f, opt: opt, log: opt.Logger, m: opt.Metrics.flow(f.Name())}
		workers = append(workers, w)
		wg.Go(func() { w.loop(ctx) })
		if f.EmitCheckpoints || f.SyncGroupOffsets {
			// Its own goroutine: it shares only the flow's settings
			// with the worker.
			wg.Go(func() { w.checkpointLoop(ctx) })
		}
	}
	if opt.Progress > 0 {
		go progress(ctx, opt, workers)
	}
	wg.Wait()
	return ctx.Err()
}

type worker struct {
	f   *Flow
	opt Options
	log *slog.Logger
	m   *flowMetrics

	srcAdm, dstAdm *kadm.Client
	next           map[string]map[int32]int64 // source topic -> partition -> next offset to mirror
	lag            map[string]map[int32]int64
	lastHeartbeat  time.Time
	// pending are the offset syncs (and so the source offsets) mirrored
	// but not yet written, lastOffsetFlush when they last were: only
	// without exactly once do they wait (offset.flush.interval.ms).
	pending         map[tp]OffsetSync
	lastOffsetFlush time.Time
}

func (w *worker) loop(ctx context.Context) {
	mode := "exactly once (records and source offsets in one transaction on the target)"
	if !w.f.ExactlyOnce {
		mode = "at least once (idempotent producer, offsets after the records: a crash mirrors records again)"
	}
	w.log.Info("mirror: flow starting", "flow", w.f.Name(), "mode", mode, "offsets", w.f.OffsetsTopic())
	backoff := time.Second
	for ctx.Err() == nil {
		err := w.run(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errTopologyChanged):
			w.log.Info("mirror: source topics changed, replanning", "flow", w.f.Name())
			backoff = time.Second
			continue
		}
		w.log.Warn("mirror: flow failed, starting over from the target's committed offsets", "flow", w.f.Name(), "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// run is one life of the worker: plan, fence, read the committed offsets,
// mirror until an error or a change of the source's topics.
func (w *worker) run(ctx context.Context) error {
	// kgo answers a Metadata request from its cache when younger than
	// MetadataMinAge: the refresh must see the source as it is now.
	srcAdmin, err := w.f.sourceClient(kgo.ClientID("ringlog-mirror-"+w.f.Name()),
		kgo.MetadataMinAge(min(time.Second, w.f.RefreshInterval/2)))
	if err != nil {
		return err
	}
	defer srcAdmin.Close()
	w.srcAdm = kadm.NewClient(srcAdmin)
	popts := []kgo.Opt{
		kgo.ClientID("ringlog-mirror-" + w.f.Name()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(8 << 20), kgo.ProducerLinger(0),
	}
	if w.f.ExactlyOnce {
		popts = append(popts, kgo.TransactionalID(w.f.TransactionalID), kgo.TransactionTimeout(60*time.Second))
	}
	prod, err := w.f.targetClient(popts...)
	if err != nil {
		return err
	}
	defer prod.Close()
	// The plan's admin requests go through a client of their own, so
	// that the producer learns the remote topics' partitions only after
	// the plan has grown them.
	dstAdmin, err := w.f.targetClient(kgo.ClientID("ringlog-mirror-"+w.f.Name()),
		kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return err
	}
	defer dstAdmin.Close()
	w.dstAdm = kadm.NewClient(dstAdmin)

	src, err := w.sourceTopics(ctx)
	if err != nil {
		return err
	}
	if err := w.prepareInternal(ctx); err != nil {
		return err
	}
	if err := w.prepareTargets(ctx, src); err != nil {
		return err
	}
	if w.f.ExactlyOnce {
		// InitProducerId with our transactional id fences the previous
		// life of this flow (a killed process) and aborts its open
		// transaction: what the target committed is now final.
		if _, _, err := prod.ProducerID(ctx); err != nil {
			return fmt.Errorf("init transactional producer %q on the target: %w", w.f.TransactionalID, err)
		}
	}
	committed, err := w.readOffsets(ctx)
	if err != nil {
		return err
	}
	w.next, w.lag, w.pending = map[string]map[int32]int64{}, map[string]map[int32]int64{}, nil
	w.lastOffsetFlush = time.Now()
	start := map[string]map[int32]kgo.Offset{}
	for t, n := range src {
		start[t], w.next[t], w.lag[t] = map[int32]kgo.Offset{}, map[int32]int64{}, map[int32]int64{}
		for p := range n {
			if o, ok := committed[tp{t, p}]; ok {
				start[t][p] = kgo.NewOffset().At(o + 1)
				w.next[t][p] = o + 1
			} else {
				// MM2's consumers start at the earliest offset.
				start[t][p] = kgo.NewOffset().AtStart()
			}
		}
	}
	if len(src) == 0 {
		// Nothing to mirror yet: heartbeat and wait for topics.
		return w.idle(ctx, prod)
	}
	cons, err := w.f.sourceClient(kgo.ClientID("ringlog-mirror-"+w.f.Name()),
		kgo.ConsumePartitions(start), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(16<<20),
		// The Java consumer's fetch.max.wait.ms, which MM2 runs with, not
		// kgo's 5 s: a fetch in flight is not cut short when partitions
		// whose start offsets were still being listed become ready, so
		// a partition waits out one whole fetch of the others.
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return err
	}
	defer cons.Close()
	w.log.Info("mirror: flow running", "flow", w.f.Name(), "topics", len(src), "resumed_partitions", len(committed))

	refresh := time.Now().Add(w.f.RefreshInterval)
	for {
		if time.Now().After(refresh) {
			now, err := w.sourceTopics(ctx)
			if err != nil {
				return err
			}
			if !maps.Equal(now, src) {
				return errTopologyChanged
			}
			if err := w.prepareTargets(ctx, src); err != nil { // configs
				return err
			}
			refresh = time.Now().Add(w.f.RefreshInterval)
		}
		pollCtx, cancel := context.WithTimeout(ctx, w.pollWait())
		fs := cons.PollRecords(pollCtx, w.opt.PollRecordsMax)
		cancel()
		if ctx.Err() != nil {
			// Stopping (SIGTERM): without exactly once, write the
			// offsets still waiting for offset.flush.interval.ms, so a
			// clean stop mirrors nothing twice.
			if len(w.pending) > 0 {
				w.lastOffsetFlush = time.Time{}
				if err := w.commit(prod, nil, false); err != nil {
					return errors.Join(ctx.Err(), err)
				}
			}
			return ctx.Err()
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("fetch %s/%d from the source: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if m := w.lag[fp.Topic]; m != nil {
				next := w.next[fp.Topic][fp.Partition]
				if n := len(fp.Records); n > 0 {
					next = fp.Records[n-1].Offset + 1
				}
				m[fp.Partition] = max(0, fp.HighWatermark-next)
			}
		})
		recs := fs.Records()
		hb := w.f.HeartbeatInterval > 0 && time.Since(w.lastHeartbeat) >= w.f.HeartbeatInterval
		if len(recs) == 0 && !hb {
			continue
		}
		if err := w.commit(prod, recs, hb); err != nil {
			return err
		}
	}
}

// pollWait is how long a poll waits for records: no longer than the next
// heartbeat is due.
func (w *worker) pollWait() time.Duration {
	if w.f.HeartbeatInterval > 0 {
		return max(10*time.Millisecond, min(time.Second, w.f.HeartbeatInterval-time.Since(w.lastHeartbeat)))
	}
	return time.Second
}

// idle heartbeats until the refresh finds topics to mirror.
func (w *worker) idle(ctx context.Context, prod *kgo.Client) error {
	t := time.NewTicker(max(10*time.Millisecond, min(w.f.RefreshInterval, w.f.HeartbeatInterval)))
	defer t.Stop()
	refresh := time.Now().Add(w.f.RefreshInterval)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if w.f.HeartbeatInterval > 0 && time.Since(w.lastHeartbeat) >= w.f.HeartbeatInterval {
			if err := w.commit(prod, nil, true); err != nil {
				return err
			}
		}
		if time.Now().After(refresh) {
			src, err := w.sourceTopics(ctx)
			if err != nil {
				return err
			}
			if len(src) > 0 {
				return errTopologyChanged
			}
			refresh = time.Now().Add(w.f.RefreshInterval)
		}
	}
}

// progress logs each flow's records and bytes per second and its lag.
func progress(ctx context.Context, opt Options, workers []*worker) {
	t := time.NewTicker(opt.Progress)
	defer t.Stop()
	prev := make([][2]int64, len(workers))
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for i, w := range workers {
			r, b := w.m.records.Load(), w.m.bytes.Load()
			secs := opt.Progress.Seconds()
			opt.Logger.Info("mirror: progress", "flow", w.f.Name(), "records", r, "bytes", b,
				"records_per_s", int64(float64(r-prev[i][0])/secs), "mb_per_s", fmt.Sprintf("%.2f", float64(b-prev[i][1])/secs/1e6),
				"lag", w.m.lag.Load())
			prev[i] = [2]int64{r, b}
		}
	}
}
