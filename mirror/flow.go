package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options are the process-wide settings of Run.
type Options struct {
	Logger   *slog.Logger
	Metrics  *Metrics      // nil: none
	Progress time.Duration // the progress line's period; 0: none
	// TxnRecordsMax bounds the records of one transaction (with exactly
	// once; without, of one flush of the producer): the offset syncs'
	// translation granularity (0: 100,000). A transaction ends once its
	// key and value bytes reach TxnBytesMax (0: 64 MiB; with the last
	// poll's records, this bounds what is in flight to the target) or it
	// has been open TxnInterval (0: 200 ms), and as soon as the source has
	// no more records to give. A poll asks for at most pollRecordsMax.
	TxnRecordsMax int
	TxnBytesMax   int64
	TxnInterval   time.Duration
}

// pollRecordsMax bounds one poll of the source: a transaction is usually
// several polls.
const pollRecordsMax = 5000

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
	if opt.TxnRecordsMax <= 0 {
		opt.TxnRecordsMax = 100_000
	}
	if opt.TxnBytesMax <= 0 {
		opt.TxnBytesMax = 64 << 20
	}
	if opt.TxnInterval <= 0 {
		opt.TxnInterval = 200 * time.Millisecond
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
	srcCl, dstCl   *kgo.Client // srcAdm's and dstAdm's clients
	// noSourceAuthorizer is set once the source said it has no ACL
	// authorizer (logged once, as MM2 does).
	noSourceAuthorizer bool
	plan               map[string]int32 // the source topics of this run, with their partition counts
	lastHeartbeat      time.Time

	// mu guards the run's ownership and positions: the poll loop holds it
	// while it mirrors a poll; the group's callbacks (other goroutines)
	// while they start or drop tasks.
	mu    sync.Mutex
	tasks map[int]*task              // the tasks this process owns, by number
	next  map[string]map[int32]int64 // source topic -> partition -> next offset to mirror
	lag   map[string]map[int32]int64 // source topic -> partition -> records behind, as of the last fetch
	// remote caches the remote topic name of each source topic.
	remote map[string]string
	// replan is set when the group assigned a partition this run's plan
	// lacks (another member saw the source grow first); groupErr when a
	// task could not be started.
	replan   atomic.Bool
	groupErr atomic.Pointer[error]
}

func (w *worker) loop(ctx context.Context) {
	mode := "exactly once (records and source offsets in one transaction on the target)"
	if !w.f.ExactlyOnce {
		mode = "at least once (idempotent producer, offsets after the records: a crash mirrors records again)"
	}
	sharing := "one process: every partition in one task"
	if w.f.Tasks > 1 {
		sharing = fmt.Sprintf("%d tasks shared by the processes of group %s on the source", w.f.Tasks, w.f.GroupID)
	}
	w.log.Info("mirror: flow starting", "flow", w.f.Name(), "mode", mode, "offsets", w.f.OffsetsTopic(), "tasks", sharing)
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

// run is one life of the worker: plan, take its tasks (fencing their
// previous owners), read the committed offsets, mirror until an error or
// a change of the source's topics.
func (w *worker) run(ctx context.Context) error {
	// kgo answers a Metadata request from its cache when younger than
	// MetadataMinAge: the refresh must see the source as it is now.
	srcAdmin, err := w.f.sourceClient(kgo.ClientID("ringlog-mirror-"+w.f.Name()),
		kgo.MetadataMinAge(min(time.Second, w.f.RefreshInterval/2)))
	if err != nil {
		return err
	}
	defer srcAdmin.Close()
	w.srcAdm, w.srcCl = kadm.NewClient(srcAdmin), srcAdmin
	// The plan's admin requests go through a client of their own, so
	// that the producers learn the remote topics' partitions only after
	// the plan has grown them.
	dstAdmin, err := w.f.targetClient(kgo.ClientID("ringlog-mirror-"+w.f.Name()),
		kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return err
	}
	defer dstAdmin.Close()
	w.dstAdm, w.dstCl = kadm.NewClient(dstAdmin), dstAdmin

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
	w.syncTopicACLs(ctx)
	w.mu.Lock()
	w.plan, w.tasks, w.remote = src, map[int]*task{}, nil
	w.next, w.lag = map[string]map[int32]int64{}, map[string]map[int32]int64{}
	for t := range src {
		w.next[t], w.lag[t] = map[int32]int64{}, map[int32]int64{}
	}
	w.mu.Unlock()
	w.replan.Store(false)
	w.groupErr.Store(nil)
	defer w.dropTasks()
	if len(src) == 0 {
		// Nothing to mirror yet: heartbeat and wait for topics.
		return w.idle(ctx)
	}
	var cons *kgo.Client
	if w.f.Tasks > 1 {
		cons, err = w.groupConsumer(src)
	} else {
		cons, err = w.directConsumer(ctx, src)
	}
	if err != nil {
		return err
	}
	defer func() {
		cons.AllowRebalance()
		cons.Close()
	}()

	refresh := time.Now().Add(w.f.RefreshInterval)
	aclSync := time.Now().Add(w.f.ACLSyncInterval)
	for {
		if time.Now().After(aclSync) {
			w.syncTopicACLs(ctx)
			aclSync = time.Now().Add(w.f.ACLSyncInterval)
		}
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
		if w.replan.Load() {
			return errTopologyChanged
		}
		if err := w.groupErr.Load(); err != nil {
			return *err
		}
		wait, n := w.pollBounds()
		pollCtx, cancel := context.WithTimeout(ctx, wait)
		fs := cons.PollRecords(pollCtx, n)
		cancel()
		if ctx.Err() != nil {
			// Stopping (SIGTERM): commit what was produced, and without
			// exactly once write the offsets still waiting for
			// offset.flush.interval.ms, so a clean stop mirrors nothing
			// twice.
			return errors.Join(ctx.Err(), w.commitOpen(), w.flushPending(ctx))
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
		if err := w.mirrorPoll(ctx, fs); err != nil {
			return err
		}
		// The group may rebalance only between transactions: a task is
		// handed over with none open. A transaction stays open at most
		// TxnInterval, so a rebalance waits no longer.
		if !w.anyOpen() {
			cons.AllowRebalance()
		}
	}
}

// pollBounds are the next poll's wait and records: it waits no longer
// than the oldest open batch may stay open (or the next heartbeat is due),
// and asks for no more records than the fullest batch has room for.
func (w *worker) pollBounds() (time.Duration, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wait, n := w.pollWait(), min(pollRecordsMax, w.opt.TxnRecordsMax)
	for _, t := range w.tasks {
		for _, b := range t.open {
			if b != nil {
				wait = min(wait, max(time.Millisecond, w.opt.TxnInterval-time.Since(b.began)))
				n = min(n, max(1, w.opt.TxnRecordsMax-b.recs))
			}
		}
	}
	return wait, n
}

// anyOpen says whether a batch is open.
func (w *worker) anyOpen() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.tasks {
		for _, b := range t.open {
			if b != nil {
				return true
			}
		}
	}
	return false
}

// commitOpen commits every open batch (a clean stop).
func (w *worker) commitOpen() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(w.tasks)) {
		for c := range w.tasks[k].open {
			if err := w.commitBatch(w.tasks[k], int8(c)); err != nil {
				return err
			}
		}
	}
	return nil
}

// directConsumer is the source consumer of a flow run by one process: it
// owns the flow's one task and so every partition, assigned directly.
func (w *worker) directConsumer(ctx context.Context, src map[string]int32) (*kgo.Client, error) {
	w.mu.Lock()
	committed, err := w.takeTasks(ctx, []int{0})
	w.mu.Unlock()
	if err != nil {
		return nil, err
	}
	start := map[string]map[int32]kgo.Offset{}
	w.mu.Lock()
	for t, n := range src {
		start[t] = map[int32]kgo.Offset{}
		for p := range n {
			start[t][p] = w.resumeAt(committed, t, p)
		}
	}
	w.mu.Unlock()
	cons, err := w.f.sourceClient(append(w.consumerOpts(), kgo.ConsumePartitions(start))...)
	if err != nil {
		return nil, err
	}
	w.log.Info("mirror: flow running", "flow", w.f.Name(), "topics", len(src), "resumed_partitions", len(committed))
	return cons, nil
}

// resumeAt is where partition t/p resumes: just after its committed
// offset, else (MM2's consumers) at the earliest offset. w.mu is held.
func (w *worker) resumeAt(committed map[tp]int64, t string, p int32) kgo.Offset {
	if o, ok := committed[tp{t, p}]; ok {
		if w.next[t] != nil {
			w.next[t][p] = o + 1
		}
		return kgo.NewOffset().At(o + 1).WithEpoch(-1)
	}
	return kgo.NewOffset().AtStart()
}

func (w *worker) consumerOpts() []kgo.Opt {
	return []kgo.Opt{kgo.ClientID("ringlog-mirror-" + w.f.Name()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(16 << 20),
		// The Java consumer's fetch.max.wait.ms, which MM2 runs with, not
		// kgo's 5 s: a fetch in flight is not cut short when partitions
		// whose start offsets were still being listed become ready, so
		// a partition waits out one whole fetch of the others.
		kgo.FetchMaxWait(500 * time.Millisecond)}
}

// dropTasks gives up every task this process owns (their producers are
// closed). A rebalance comes only with no batch open; a run that failed
// may leave one, whose transaction is aborted. Without exactly once the
// offsets still waiting for offset.flush.interval.ms are written first, so
// that an orderly handover mirrors nothing twice.
func (w *worker) dropTasks() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.tasks {
		for c := range t.open {
			if err := w.abortBatch(t, int8(c)); err != nil {
				w.log.Warn("mirror: end the open batch of a task given up", "flow", w.f.Name(), "task", t.id, "err", err)
			}
		}
		if err := w.flushTask(t); err != nil {
			w.log.Warn("mirror: write the offsets of a task given up", "flow", w.f.Name(), "task", t.id, "err", err)
		}
		t.close()
	}
	w.tasks = map[int]*task{}
	for _, m := range w.lag {
		clear(m) // only the partitions of the tasks assigned next count
	}
}

// mirrorPoll mirrors one poll: per task, per source codec, into that
// producer's open batch; then it commits the batches that are due. The
// heartbeat goes in the process's lowest task's.
func (w *worker) mirrorPoll(ctx context.Context, fs kgo.Fetches) error {
	w.mu.Lock()
	defer w.mu.Unlock()
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
	hb := w.f.HeartbeatInterval > 0 && time.Since(w.lastHeartbeat) >= w.f.HeartbeatInterval && len(w.tasks) > 0
	byTask := map[int][]*kgo.Record{}
	for _, r := range recs {
		if n, ok := w.plan[r.Topic]; !ok || r.Partition >= n {
			return errTopologyChanged
		}
		k := taskOf(r.Topic, r.Partition, w.f.Tasks)
		if w.tasks[k] == nil {
			return fmt.Errorf("mirror: a record of %s/%d, in task %d, which this process does not own", r.Topic, r.Partition, k)
		}
		byTask[k] = append(byTask[k], r)
	}
	lowest := -1
	for k := range w.tasks {
		if lowest < 0 || k < lowest {
			lowest = k
		}
	}
	if hb {
		if _, ok := byTask[lowest]; !ok {
			byTask[lowest] = nil
		}
	}
	for _, k := range slices.Sorted(maps.Keys(byTask)) {
		t := w.tasks[k]
		runs := codecRuns(byTask[k])
		if len(runs) == 0 {
			runs = []codecRun{{codec: t.openCodec()}}
		}
		for i, run := range runs {
			// A partition is in one open batch at a time: records of
			// another codec wait for the batch that holds its earlier
			// ones to commit, so that they land, and are committed,
			// after them.
			for c, b := range t.open {
				if b != nil && int8(c) != run.codec && b.holdsAny(run.recs) {
					if err := w.commitBatch(t, int8(c)); err != nil {
						return err
					}
				}
			}
			if err := w.produce(ctx, t, run.codec, run.recs, hb && k == lowest && i == 0); err != nil {
				return err
			}
		}
	}
	return w.commitDue()
}

// openCodec is the codec of one of t's open batches, 0 if none is open:
// where a heartbeat alone goes.
func (t *task) openCodec() int8 {
	for c, b := range t.open {
		if b != nil {
			return int8(c)
		}
	}
	return 0
}

// commitDue commits the open batches that are full or old enough, or all
// of them when the source had nothing more: no partition is behind its
// high watermark as of its last fetch. w.mu is held.
func (w *worker) commitDue() error {
	caughtUp := true
	for _, m := range w.lag {
		for _, l := range m {
			if l > 0 {
				caughtUp = false
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(w.tasks)) {
		t := w.tasks[k]
		for c, b := range t.open {
			if b != nil && (caughtUp || b.recs >= w.opt.TxnRecordsMax || b.bytes >= w.opt.TxnBytesMax || time.Since(b.began) >= w.opt.TxnInterval) {
				if err := w.commitBatch(t, int8(c)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// codecRun is records of one source codec, committed together.
type codecRun struct {
	codec int8
	recs  []*kgo.Record
}

// codecRuns splits a task's records by the codec of their source batches,
// keeping each partition's records in order across the runs: a record
// goes in the first run of its codec at or after its partition's previous
// record's run, since runs are committed one after another.
func codecRuns(recs []*kgo.Record) []codecRun {
	var runs []codecRun
	at := map[tp]int{}
	for _, r := range recs {
		c, k := codecOf(r), tp{r.Topic, r.Partition}
		j := at[k]
		for j < len(runs) && runs[j].codec != c {
			j++
		}
		if j == len(runs) {
			runs = append(runs, codecRun{codec: c})
		}
		runs[j].recs = append(runs[j].recs, r)
		at[k] = j
	}
	return runs
}

// flushPending writes, without exactly once, the offsets still waiting for
// offset.flush.interval.ms (a clean stop).
func (w *worker) flushPending(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for _, t := range w.tasks {
		errs = append(errs, w.flushTask(t))
	}
	return errors.Join(errs...)
}

// flushTask writes task t's pending offsets now (without exactly once;
// with it, none are pending between transactions); w.mu is held.
func (w *worker) flushTask(t *task) error {
	if len(t.pending) == 0 {
		return nil
	}
	for _, p := range t.prods {
		if p != nil { // any of the task's producers: no transaction here
			b := newBatch()
			defer b.cancel()
			w.produceOffsets(b.ctx, t, p, b.done)
			if err := p.Flush(b.ctx); err != nil {
				return fmt.Errorf("flush offsets: %w", err)
			}
			if err := b.err(); err != nil {
				return fmt.Errorf("produce offsets to the target: %w", err)
			}
			return nil
		}
	}
	return nil
}

// pollWait is how long a poll waits for records: no longer than the next
// heartbeat is due.
func (w *worker) pollWait() time.Duration {
	if w.f.HeartbeatInterval > 0 {
		return max(10*time.Millisecond, min(time.Second, w.f.HeartbeatInterval-time.Since(w.lastHeartbeat)))
	}
	return time.Second
}

// idle heartbeats until the refresh finds topics to mirror. The
// heartbeats are not in a transaction: with no task, there is nothing to
// fence, and several processes of a flow may idle at once.
func (w *worker) idle(ctx context.Context) error {
	prod, err := w.f.targetClient(kgo.ClientID("ringlog-mirror-" + w.f.Name()))
	if err != nil {
		return err
	}
	defer prod.Close()
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
			h := Heartbeat{SourceAlias: w.f.SourceAlias, TargetAlias: w.f.TargetAlias, TimestampMs: time.Now().UnixMilli()}
			hctx, cancel := context.WithTimeout(ctx, txnTimeout)
			err := prod.ProduceSync(hctx, &kgo.Record{Topic: heartbeatsTopic, Key: h.Key(), Value: h.Value()}).FirstErr()
			cancel()
			if err != nil {
				return fmt.Errorf("heartbeat: %w", err)
			}
			w.lastHeartbeat = time.Now()
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
