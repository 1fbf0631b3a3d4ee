package streams

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Guarantee is the processing guarantee (Kafka's processing.guarantee).
type Guarantee int

const (
	// AtLeastOnce commits input offsets after the outputs and changelog
	// writes they caused are acknowledged: a crash replays records since
	// the last commit.
	AtLeastOnce Guarantee = iota
	// ExactlyOnce writes outputs, changelog records and input offsets in
	// one transaction (Kafka's exactly_once_v2, KIP-447).
	ExactlyOnce
)

// Config configures an application.
type Config struct {
	// ApplicationID is the consumer group and the prefix of internal
	// topics ("<id>-<name>-repartition", "<id>-<store>-changelog").
	ApplicationID string
	Brokers       []string
	// StateDir holds the tasks' stores: <StateDir>/<ApplicationID>/<task>/.
	StateDir  string
	Guarantee Guarantee
	// CommitInterval defaults to Kafka's: 30 s at least once, 100 ms
	// exactly once.
	CommitInterval time.Duration
	// InstanceID names this instance: the transactional id is
	// "<ApplicationID>-<InstanceID>", so that a restarted instance fences
	// its previous incarnation. Random when empty.
	InstanceID string
	// ReplicationFactor of the internal topics; 0 or -1 is the broker's
	// default.
	ReplicationFactor int16
	// CacheMaxBytes bounds the record cache (Kafka's
	// statestore.cache.max.bytes, KIP-63) of this instance, shared by the
	// count, reduce and aggregate stores (time-windowed ones too: a
	// window's value is also forwarded before stream time closes it) and
	// the tables read from topics of all its tasks: updates of a
	// key are merged in memory and written to the store and its
	// changelog, and forwarded downstream, once per commit (or when the
	// key is evicted, least recently used first, to stay under the
	// bound). 0 disables the cache: every update is written and
	// forwarded. DefaultCacheMaxBytes is Kafka's default (10 MiB); the
	// zero Config has no cache.
	CacheMaxBytes int64
	// RepartitionPurgeInterval is how often the records of repartition
	// topics below the committed offsets are deleted (DeleteRecords), as
	// Kafka Streams' repartition.purge.interval.ms; 0 is its default,
	// DefaultRepartitionPurgeInterval. Repartition topics are created
	// with retention.ms -1: purging is what frees them.
	RepartitionPurgeInterval time.Duration
	// MaxPollRecords bounds the records processed per poll (default 1000).
	MaxPollRecords int
	// NumStandbyReplicas is Kafka's num.standby.replicas: each task with
	// stores is also kept, as a standby, on up to this many instances
	// other than the one running it, which read its changelogs into a
	// local copy of its stores (standby.go). When the task moves to one of
	// them, its restore reads only what that copy had not applied yet. 0
	// (the default) keeps no standbys. All instances of an application
	// should agree: the group's leader assigns the standbys.
	NumStandbyReplicas int
	// MetadataMaxAge is how often pattern sources (SourcePattern) look
	// for topics created or deleted since Start, as Kafka's
	// metadata.max.age.ms: a new matching topic is read from its start
	// at most this long after it appears. 0 is DefaultMetadataMaxAge
	// (Kafka's 5 minutes).
	MetadataMaxAge time.Duration
	// TaskTimeout is Kafka Streams' task.timeout.ms (KIP-572) for the
	// commits of exactly once: a transaction that cannot commit because a
	// record failed (its topic deleted, a write refused) is aborted and
	// its input processed again at the next commit, and the application
	// stops with ErrTaskTimeout (wrapping the last failure) once commits
	// have failed so for longer than this, none succeeding. 0 is
	// DefaultTaskTimeout (Kafka's 5 minutes); negative stops at the first
	// failure, as at least once always does.
	TaskTimeout time.Duration
	// OnRestore is called from the processing goroutine as stores are
	// restored from their changelogs (and global stores bootstrapped).
	OnRestore func(RestoreProgress)
	// ClientOpts are added to every kgo client (TLS, SASL, timeouts).
	ClientOpts []kgo.Opt
	Logger     *slog.Logger
}

// DefaultTaskTimeout is how long exactly-once commits may fail before the
// application stops when Config.TaskTimeout is 0: Kafka Streams'
// task.timeout.ms default.
const DefaultTaskTimeout = 5 * time.Minute

// App is a running stream-processing application instance.
type App struct {
	topo *Topology
	cfg  Config
	log  *slog.Logger

	adm  *kadm.Client
	admc *kgo.Client
	cl   *kgo.Client
	sess *kgo.GroupTransactSession // exactly once

	// Resolved at Start.
	sourceTopics map[*node][]string
	// topicSub, sourceTopics and taskCount grow as pattern sources
	// match new topics (patterns.go): written with mu and tasksMu held,
	// read by other goroutines under tasksMu.
	topicSub       map[string]int
	taskCount      map[int]int32   // subtopology -> partitions
	internalTopics map[string]bool // never matched by a pattern
	changelogs     map[string]bool
	partitioned    map[string]bool // internal topics whose records carry their partition (fkjoin.go)
	// repartWriter is the subtopology writing each repartition topic (by
	// suffix); joinSized the partitions of those sized by a join rather
	// than by their writer, 0 when Start could not size them (set at
	// Start, read by patterns.go).
	repartWriter map[string]int
	joinSized    map[string]int32

	// mu serializes processing and the rebalance callbacks that revoke.
	mu sync.Mutex
	// tasksMu guards tasks and byTopic for readers in other goroutines
	// (queries, Stats); written only with mu held too.
	tasksMu sync.RWMutex
	tasks   map[taskID]*task

	assignMu sync.Mutex
	assigned map[string][]int32 // handed over by OnPartitionsAssigned
	revoked  map[string][]int32 // handed over by the revoke callbacks, exactly once
	// listed is the pattern watcher's last listing of the topics, for
	// the processing goroutine (patterns.go).
	listed *topicList
	// relist asks the watcher for a listing now: a pattern topic's
	// partitions answer that the topic is gone.
	relist chan struct{}
	// stopWatch ends the pattern watcher, watchDone closes when it has
	// (nil without pattern sources).
	stopWatch context.CancelFunc
	watchDone chan struct{}
	// owned is the partitions kgo assigned this instance: a revocation
	// closes a task only when no partition of it stays (a pattern topic
	// deleted takes its partitions, not the tasks).
	owned map[string]map[int32]bool
	// standbyWant is the standby tasks of the last assignment; wakePoll
	// cuts the loop's poll short so that it opens them.
	standbyWant []taskID
	wakePoll    context.CancelFunc
	// wakePending: a wake came while the loop was between two polls
	// (after it took the handed-over work): its next poll returns at
	// once instead of waiting up to CommitInterval with work pending.
	wakePending bool

	standby  *standbys
	restorer *restorer // tasks restoring between polls (restoring.go)

	produceErr   error
	produceErrMu sync.Mutex
	// failingSince is when exactly-once commits started to fail (the
	// first aborted for a failed record since the last that committed);
	// zero while they succeed (processing goroutine, mu held).
	failingSince time.Time
	promise      func(*kgo.Record, error) // of records produced without onOK
	slab         produceSlab              // records and bytes of sinks (mu held)

	global *globalRunner
	cache  *recordCache       // nil: Config.CacheMaxBytes is 0
	purge  *repartitionPurger // nil: no repartition topics

	rateMu     sync.Mutex
	rateAt     time.Time
	rateTotal  int64
	rateByTask map[string]int64 // each task's Processed at rateAt

	// cancel stops the loop (Close): it ends polling, never a commit
	// under way. kill cancels abort, both: a commit is cut short too.
	cancel, abort context.CancelFunc
	done          chan struct{}
	err           error
	killed        atomic.Bool // stopped as a crash would: nothing more committed
	inTxn         bool        // exactly once: a transaction is open (processing goroutine, mu held)
}

// New checks cfg and returns an application of t, not started.
func New(t *Topology, cfg Config) (*App, error) {
	if cfg.ApplicationID == "" {
		return nil, errors.New("streams: Config.ApplicationID is required")
	}
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("streams: Config.Brokers is required")
	}
	if cfg.StateDir == "" {
		return nil, errors.New("streams: Config.StateDir is required")
	}
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = 30 * time.Second
		if cfg.Guarantee == ExactlyOnce {
			cfg.CommitInterval = 100 * time.Millisecond
		}
	}
	if cfg.InstanceID == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		cfg.InstanceID = hex.EncodeToString(b[:])
	}
	if cfg.MaxPollRecords == 0 {
		cfg.MaxPollRecords = 1000
	}
	if cfg.RepartitionPurgeInterval < 0 {
		return nil, errors.New("streams: Config.RepartitionPurgeInterval is negative")
	}
	if cfg.RepartitionPurgeInterval == 0 {
		cfg.RepartitionPurgeInterval = DefaultRepartitionPurgeInterval
	}
	if cfg.TaskTimeout == 0 {
		cfg.TaskTimeout = DefaultTaskTimeout
	}
	if cfg.MetadataMaxAge < 0 {
		return nil, errors.New("streams: Config.MetadataMaxAge is negative")
	}
	if cfg.MetadataMaxAge == 0 {
		cfg.MetadataMaxAge = DefaultMetadataMaxAge
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CacheMaxBytes < 0 {
		return nil, errors.New("streams: Config.CacheMaxBytes is negative")
	}
	if cfg.NumStandbyReplicas < 0 {
		return nil, errors.New("streams: Config.NumStandbyReplicas is negative")
	}
	a := &App{topo: t, cfg: cfg, log: cfg.Logger.With("app", cfg.ApplicationID),
		tasks: map[taskID]*task{}, done: make(chan struct{})}
	a.standby = newStandbys(a)
	a.relist = make(chan struct{}, 1)
	if cfg.CacheMaxBytes > 0 {
		a.cache = &recordCache{max: cfg.CacheMaxBytes}
	}
	a.promise = func(r *kgo.Record, err error) {
		if err != nil {
			a.keepProduceErr(r, err)
		}
	}
	return a, nil
}

func (a *App) internalTopic(suffix string) string { return a.cfg.ApplicationID + "-" + suffix }
func (a *App) changelogTopic(store string) string {
	return a.cfg.ApplicationID + "-" + store + "-changelog"
}

func (a *App) isolation() kgo.IsolationLevel {
	if a.cfg.Guarantee == ExactlyOnce {
		return kgo.ReadCommitted()
	}
	return kgo.ReadUncommitted()
}

// Start resolves the topology against the cluster (source topics,
// co-partitioning, internal topics created), bootstraps the global
// stores, and starts processing in a goroutine of its own. Mistakes
// found against the cluster are returned before anything runs.
func (a *App) Start(ctx context.Context) error {
	admc, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.cfg.Brokers...), kgo.MetadataMinAge(100 * time.Millisecond)}, a.cfg.ClientOpts...)...)
	if err != nil {
		return err
	}
	a.admc, a.adm = admc, kadm.NewClient(admc)
	if err := a.resolve(ctx); err != nil {
		admc.Close()
		return err
	}
	if len(a.topo.globals) > 0 {
		if a.global, err = a.startGlobal(ctx); err != nil {
			admc.Close()
			return err
		}
	}
	var topics []string
	for t := range a.topicSub {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(a.cfg.Brokers...),
		kgo.ConsumerGroup(a.cfg.ApplicationID),
		kgo.ConsumeTopics(topics...),
		kgo.Balancers(&taskBalancer{app: a}),
		kgo.DisableAutoCommit(),
		kgo.FetchIsolationLevel(a.isolation()),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.RecordPartitioner(&partitioner{app: a, byKey: kgo.StickyKeyPartitioner(nil)}),
		kgo.OnPartitionsAssigned(a.onAssigned),
		kgo.OnPartitionsRevoked(a.onRevoked),
		kgo.OnPartitionsLost(a.onLost),
		kgo.ProducerLinger(5 * time.Millisecond),
		// Kafka Streams' producer default (compression.type none), not
		// kgo's (snappy): a repartition topic's records are compressed
		// and decompressed by the application itself, at every hop.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}, a.cfg.ClientOpts...)
	if a.cfg.Guarantee == ExactlyOnce {
		opts = append(opts, kgo.TransactionalID(a.cfg.ApplicationID+"-"+a.cfg.InstanceID), kgo.RequireStableFetchOffsets())
		if a.sess, err = kgo.NewGroupTransactSession(opts...); err != nil {
			admc.Close()
			return err
		}
		a.cl = a.sess.Client()
		// InitProducerId now, before any restore: it fences this
		// instance's previous life and aborts its open transaction, so
		// the changelogs' ends are final before they are read.
		if _, _, err := a.cl.ProducerID(ctx); err != nil {
			a.sess.Close()
			admc.Close()
			return fmt.Errorf("streams: init transactional producer: %w", err)
		}
	} else {
		// Callbacks run only between polls, never while polled records
		// wait to be processed: a revoke commits exactly what was
		// processed.
		opts = append(opts, kgo.BlockRebalanceOnPoll())
		if a.cl, err = kgo.NewClient(opts...); err != nil {
			admc.Close()
			return err
		}
	}
	// Two contexts: Close cancels the loop's (polls, restores), not the
	// one its commits run under, or a Close landing in a commit would cut
	// the transaction's end short and leave it open, what it processed
	// uncommitted while Close returns nil.
	commitCtx, abort := context.WithCancel(context.Background())
	runCtx, cancel := context.WithCancel(commitCtx)
	a.cancel, a.abort = cancel, abort
	if a.hasPatterns() {
		wctx, stop := context.WithCancel(runCtx)
		a.stopWatch, a.watchDone = stop, make(chan struct{})
		go func() {
			defer close(a.watchDone)
			a.watchPatterns(wctx)
		}()
	}
	go a.run(runCtx, commitCtx)
	return nil
}

// Wait returns when processing stopped: nil after Close, the error that
// stopped it otherwise.
func (a *App) Wait() error {
	<-a.done
	return a.err
}

// Close commits what was processed, leaves the group and stops. It
// waits for a commit under way however long the cluster takes to answer
// it (the client's retries bound that); CloseContext bounds the wait.
func (a *App) Close() error {
	return a.CloseContext(context.Background())
}

// CloseContext is Close bounded by ctx, as Kafka Streams' close(Duration):
// when ctx ends before the instance has stopped, it stops as a crash
// would (the commit under way is cut short, nothing more is committed:
// exactly once, the open transaction is aborted by the broker's
// transaction timeout or by the next instance with the same InstanceID,
// which fences it; at least once, what was processed since the last
// commit is processed again by the tasks' next owner), and CloseContext
// returns ctx's error at once, without waiting for the instance's clients
// to close: Wait returns when they have.
func (a *App) CloseContext(ctx context.Context) error {
	if a.cancel == nil {
		return nil
	}
	a.cancel()
	select {
	case <-a.done:
		return a.err
	case <-ctx.Done():
	}
	a.killed.Store(true)
	a.abort()
	select {
	case <-a.done:
		if a.err != nil {
			return a.err
		}
	default:
	}
	return fmt.Errorf("streams: close: %w", ctx.Err())
}

// kill stops the instance as a crash would, as far as a process can do it
// to itself: nothing is committed or flushed, the open transaction stays
// open, stores are closed as they are. Tests use it.
func (a *App) kill() {
	a.killed.Store(true)
	a.abort()
	<-a.done
}

func (a *App) run(ctx, commitCtx context.Context) {
	defer close(a.done)
	defer a.abort()
	err := a.loop(ctx, commitCtx)
	if a.stopWatch != nil {
		// Before the clients close: the watcher may be purging a topic.
		a.stopWatch()
		<-a.watchDone
	}
	a.mu.Lock()
	killed := a.killed.Load()
	if err == nil && !killed {
		err = a.commitLocked(context.Background())
	}
	a.closeTasksLocked(!killed && err == nil)
	a.mu.Unlock()
	a.standby.close()
	if a.sess != nil {
		if killed {
			a.cl.Close()
		} else {
			a.sess.Close()
		}
	} else {
		// A poll may hold rebalances back (BlockRebalanceOnPoll): the
		// leave's revoke must not wait for an AllowRebalance that no
		// loop will call.
		a.cl.CloseAllowingRebalance()
	}
	if a.global != nil {
		a.global.close()
	}
	a.purge.stop()
	a.admc.Close()
	if err != nil && !errors.Is(err, context.Canceled) {
		a.log.Error("streams: stopped", "err", err)
		a.err = err
	}
}

// loop polls and processes until ctx is cancelled; its commits run under
// commitCtx, which only a kill cancels.
func (a *App) loop(ctx, commitCtx context.Context) error {
	lastCommit := time.Now()
	var nextWall time.Time // the next wall-clock punctuation, zero if none
	for {
		// kgo returns from a poll only with records: a deadline makes an
		// idle loop come round to commit what it holds, and to fire the
		// wall-clock punctuations when they are due.
		wait := a.cfg.CommitInterval
		if !nextWall.IsZero() {
			wait = max(min(wait, time.Until(nextWall)), time.Millisecond)
		}
		if a.restorer.active() {
			// Back to the restores soon: the poll only keeps the
			// running tasks and the group going meanwhile.
			wait = min(wait, 10*time.Millisecond)
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		a.assignMu.Lock()
		a.wakePoll = cancel
		if a.wakePending {
			a.wakePending = false
			cancel()
		}
		a.assignMu.Unlock()
		fetches := a.cl.PollRecords(pctx, a.cfg.MaxPollRecords)
		a.assignMu.Lock()
		a.wakePoll = nil
		a.assignMu.Unlock()
		cancel()
		if fetches.IsClientClosed() || ctx.Err() != nil {
			return nil
		}
		var fatal error
		fetches.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			if a.patternTopicGone(topic, err) {
				return // leaving: the watcher lists the topics now and stops reading it
			}
			a.log.Warn("streams: fetch", "topic", topic, "partition", p, "err", err)
		})
		a.mu.Lock()
		a.takeRevokedLocked()
		if err := a.takeListedLocked(ctx); err != nil {
			a.mu.Unlock()
			return err
		}
		if err := a.takeAssignedLocked(ctx); err != nil {
			a.mu.Unlock()
			return err
		}
		if err := a.restoreStep(ctx); err != nil {
			a.mu.Unlock()
			return err
		}
		if err := a.syncStandbysLocked(ctx); err != nil && ctx.Err() == nil {
			// Tried again at the next pass; the standbys are a cache.
			a.log.Warn("streams: open standby tasks", "err", err)
		}
		if a.sess != nil && !a.inTxn && !fetches.Empty() {
			if err := a.sess.Begin(); err != nil {
				a.mu.Unlock()
				return fmt.Errorf("streams: begin transaction: %w", err)
			}
			a.inTxn = true
		}
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if fatal != nil || len(p.Records) == 0 {
				return
			}
			t := a.taskOf(p.Topic, p.Partition)
			if t == nil {
				return // revoked since the poll: its new owner reads it again
			}
			for _, r := range p.Records {
				if err := t.process(r); err != nil {
					fatal = err
					return
				}
			}
			t.setLag(p.Topic, p.HighWatermark-p.Records[len(p.Records)-1].Offset-1)
		})
		if fatal == nil {
			if err := a.punctuateWallClockLocked(); err != nil {
				fatal = fmt.Errorf("streams: wall-clock punctuation: %w", err)
			}
		}
		if fatal != nil {
			if a.sess != nil && a.inTxn {
				_, _ = a.sess.End(commitCtx, kgo.TryAbort)
				a.inTxn = false
			}
			a.mu.Unlock()
			return fatal
		}
		if time.Since(lastCommit) >= a.cfg.CommitInterval {
			if err := a.commitLocked(commitCtx); err != nil {
				a.mu.Unlock()
				return err
			}
			lastCommit = time.Now()
			a.purge.maybeStart(a.adm, a.log)
		}
		nextWall = a.nextWallClockLocked()
		a.mu.Unlock()
		if a.sess == nil {
			a.cl.AllowRebalance()
		}
	}
}

// commitLocked makes what the tasks processed durable: at least once,
// flush the producer (outputs and changelogs), write the stores, commit
// the input offsets; exactly once, end the transaction, then write the
// stores if it committed or drop their writes if it aborted (kgo then
// rewinds the consumer to the committed offsets).
func (a *App) commitLocked(ctx context.Context) error {
	if a.sess != nil {
		if !a.inTxn {
			return nil
		}
		if err := a.flushCachesLocked(); err != nil {
			return err
		}
		// Every record acknowledged or failed before the decision: End's
		// own flush comes after it, so a record failing there (a topic
		// deleted meanwhile) would be found only once the transaction
		// had committed without it.
		if err := a.cl.Flush(ctx); err != nil {
			return fmt.Errorf("streams: flush: %w", err)
		}
		failed := a.takeProduceErr()
		if failed == nil {
			a.failingSince = time.Time{}
			return a.endTxnLocked(ctx, kgo.TryCommit)
		}
		now := time.Now()
		if a.failingSince.IsZero() {
			a.failingSince = now
		}
		failingFor := now.Sub(a.failingSince)
		if err := a.endTxnLocked(ctx, kgo.TryAbort); err != nil {
			return errors.Join(fmt.Errorf("streams: aborting for a failed record: %w", failed), err)
		}
		if a.cfg.TaskTimeout < 0 || failingFor >= a.cfg.TaskTimeout {
			return fmt.Errorf("%w: commits failed for %v (Config.TaskTimeout %v): %w",
				ErrTaskTimeout, failingFor.Round(time.Millisecond), a.cfg.TaskTimeout, failed)
		}
		a.log.Warn("streams: aborting the transaction", "err", failed,
			"failing_for", failingFor.Round(time.Millisecond), "task_timeout", a.cfg.TaskTimeout)
		return nil
	}
	if err := a.flushCachesLocked(); err != nil {
		return err
	}
	if err := a.cl.Flush(ctx); err != nil {
		return fmt.Errorf("streams: flush: %w", err)
	}
	if err := a.takeProduceErr(); err != nil {
		return fmt.Errorf("streams: produce: %w", err)
	}
	for _, t := range a.tasks {
		if err := t.commitState(); err != nil {
			return err
		}
	}
	purgeable := a.purge.pending(a.cl)
	if err := a.cl.CommitUncommittedOffsets(a.withOffsetMetadata(ctx)); err != nil {
		return fmt.Errorf("streams: commit offsets: %w", err)
	}
	a.purge.committed(purgeable)
	return nil
}

// flushCachesLocked writes and forwards what the record cache holds,
// before the producer flush or the transaction's end that makes it
// durable.
func (a *App) flushCachesLocked() error {
	if a.cache == nil {
		return nil
	}
	for _, t := range a.tasks {
		t.flushCaches()
		if t.err != nil {
			return t.err
		}
	}
	return nil
}

// endTxnLocked ends the open transaction (commit or abort, as kgo's
// session decides), then writes the stores if it committed or drops
// their writes if it aborted. The errors of records the end failed (an
// abort fails the records still buffered, and their promises have run
// when End returns) belonged to that transaction: they are dropped, or
// the next, healthy transaction would be aborted for them.
func (a *App) endTxnLocked(ctx context.Context, commit kgo.TransactionEndTry) error {
	a.inTxn = false
	purgeable := a.purge.pending(a.cl)
	committed, err := a.sess.End(a.withOffsetMetadata(ctx), commit)
	if err != nil {
		return fmt.Errorf("streams: end transaction: %w", err)
	}
	if committed {
		a.purge.committed(purgeable)
	}
	if stale := a.takeProduceErr(); stale != nil && committed {
		// A committed transaction had every record acknowledged.
		return fmt.Errorf("streams: a record failed in a committed transaction: %w", stale)
	}
	for _, t := range a.tasks {
		if committed {
			if err := t.commitState(); err != nil {
				return err
			}
		} else {
			t.discardState()
		}
	}
	return nil
}

// produce sends r; a failure is kept for the next commit, which fails
// (at least once) or aborts (exactly once); onOK, if any, runs once r
// is acknowledged. Records without onOK (outputs and repartition
// records: all but changelogs) share one promise, made once: a closure
// per record was an allocation per record on the hot path.
func (a *App) produce(r *kgo.Record, onOK func(*kgo.Record)) {
	if onOK == nil {
		a.cl.Produce(context.Background(), r, a.promise)
		return
	}
	a.cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
		if err != nil {
			a.keepProduceErr(r, err)
			return
		}
		onOK(r)
	})
}

// keepProduceErr keeps the first produce error since the last commit.
func (a *App) keepProduceErr(r *kgo.Record, err error) {
	a.produceErrMu.Lock()
	if a.produceErr == nil {
		a.produceErr = fmt.Errorf("to %s/%d: %w", r.Topic, r.Partition, err)
	}
	a.produceErrMu.Unlock()
}

func (a *App) takeProduceErr() error {
	a.produceErrMu.Lock()
	defer a.produceErrMu.Unlock()
	err := a.produceErr
	a.produceErr = nil
	return err
}

func (a *App) taskOf(topic string, p int32) *task {
	sub, ok := a.topicSub[topic]
	if !ok {
		return nil
	}
	return a.tasks[taskID{sub, p}]
}

// onAssigned only hands the partitions over to the processing goroutine,
// which creates and restores their tasks before it processes their
// records: it must not wait for the processing goroutine, which may be in
// GroupTransactSession.End waiting for this goroutine's heartbeat.
func (a *App) onAssigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	a.assignMu.Lock()
	defer a.assignMu.Unlock()
	if a.assigned == nil {
		a.assigned = map[string][]int32{}
	}
	if a.owned == nil {
		a.owned = map[string]map[int32]bool{}
	}
	for t, ps := range assigned {
		a.assigned[t] = append(a.assigned[t], ps...)
		if a.owned[t] == nil {
			a.owned[t] = map[int32]bool{}
		}
		for _, p := range ps {
			a.owned[t][p] = true
		}
	}
	// Paused until the loop has created their tasks: one whose stores
	// lag restores first (restoring.go), and kgo must not hand out its
	// records meanwhile (paused, they are dropped from its buffers and
	// fetched again once resumed).
	// The client is the callback's: a.cl may not be set yet.
	cl.PauseFetchPartitions(assigned)
	// The loop creates the tasks now, not at its next record or commit
	// interval: their processors' wall-clock punctuations start with them.
	a.wakeLocked()
}

// takeAssignedLocked creates the tasks of newly assigned partitions and
// restores their stores.
func (a *App) takeAssignedLocked(ctx context.Context) error {
	a.assignMu.Lock()
	assigned := a.assigned
	a.assigned = nil
	a.assignMu.Unlock()
	if err := a.learnAssignedLocked(ctx, assigned); err != nil {
		return err
	}
	if len(assigned) == 0 {
		return nil
	}
	var fresh []*task
	for topic, ps := range assigned {
		sub, ok := a.topicSub[topic]
		if !ok {
			continue
		}
		for _, p := range ps {
			id := taskID{sub, p}
			if _, ok := a.tasks[id]; ok {
				continue
			}
			// A standby of the task here becomes its active copy: its
			// store and checkpoints are where the restore starts.
			a.standby.drop(id)
			t, err := a.newTask(id)
			if err != nil {
				return err
			}
			a.tasksMu.Lock()
			a.tasks[id] = t
			a.tasksMu.Unlock()
			fresh = append(fresh, t)
		}
	}
	if len(fresh) == 0 {
		a.cl.ResumeFetchPartitions(assigned)
		return nil
	}
	sort.Slice(fresh, func(i, j int) bool {
		return fresh[i].id.sub < fresh[j].id.sub || fresh[i].id.sub == fresh[j].id.sub && fresh[i].id.partition < fresh[j].id.partition
	})
	if err := a.restoreTimes(ctx, fresh); err != nil {
		return err
	}
	// Tasks whose stores lag their changelogs restore between polls
	// (restoring.go); the others run at once.
	ready, err := a.startRestores(ctx, fresh)
	if err != nil {
		return err
	}
	for _, t := range ready {
		if err := t.initProcessors(); err != nil {
			return err
		}
	}
	// Resumed but for the restoring tasks' (restoreStep resumes them).
	for _, t := range a.restoringTasks() {
		for topic := range t.srcs {
			assigned[topic] = slices.DeleteFunc(assigned[topic], func(p int32) bool { return p == t.id.partition })
		}
	}
	a.cl.ResumeFetchPartitions(assigned)
	return nil
}

// onRevoked commits what the revoked tasks processed and closes them
// (at least once: BlockRebalanceOnPoll runs it between polls). Exactly
// once, the session has already marked the open transaction to abort;
// the revoked tasks' pending writes go with it.
func (a *App) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if len(revoked) == 0 {
		return
	}
	if a.sess != nil {
		a.handOverRevoked(revoked)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropAssignedLocked(revoked)
	commit := a.sess == nil && !a.killed.Load()
	if commit {
		if err := a.commitLocked(ctx); err != nil {
			a.log.Error("streams: commit on revoke", "err", err)
			commit = false
		}
	}
	a.closeRevokedLocked(revoked, commit)
	a.wake() // a revoked task may stay here as a standby
}

// wake cuts the loop's poll short.
func (a *App) wake() {
	a.assignMu.Lock()
	defer a.assignMu.Unlock()
	a.wakeLocked()
}

// wakeLocked is wake with assignMu held.
func (a *App) wakeLocked() {
	if a.wakePoll != nil {
		a.wakePoll()
	} else {
		a.wakePending = true
	}
}

// onLost drops the lost tasks' pending writes: another instance owns
// them now and replays from the committed offsets.
func (a *App) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	if a.sess != nil {
		a.handOverRevoked(lost)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropAssignedLocked(lost)
	a.closeRevokedLocked(lost, false)
}

// handOverRevoked queues revoked (or lost) partitions for the processing
// goroutine, exactly once: GroupTransactSession calls the callbacks with
// its own lock held, which its End needs, so a callback waiting for the
// processing goroutine (in End) would deadlock. The session aborts the
// open transaction; the loop closes the tasks before it processes
// anything more.
func (a *App) handOverRevoked(gone map[string][]int32) {
	a.assignMu.Lock()
	defer a.assignMu.Unlock()
	a.dropAssignedAssignLocked(gone)
	if a.revoked == nil {
		a.revoked = map[string][]int32{}
	}
	for t, ps := range gone {
		a.revoked[t] = append(a.revoked[t], ps...)
	}
	a.wakeLocked()
}

// takeRevokedLocked closes the tasks of the partitions handOverRevoked
// queued, dropping their writes (their transaction aborts).
func (a *App) takeRevokedLocked() {
	a.assignMu.Lock()
	revoked := a.revoked
	a.revoked = nil
	a.assignMu.Unlock()
	if len(revoked) > 0 {
		a.closeRevokedLocked(revoked, false)
	}
}

func (a *App) dropAssignedLocked(gone map[string][]int32) {
	a.assignMu.Lock()
	defer a.assignMu.Unlock()
	a.dropAssignedAssignLocked(gone)
}

// dropAssignedAssignLocked needs assignMu held.
func (a *App) dropAssignedAssignLocked(gone map[string][]int32) {
	for topic, ps := range gone {
		for _, p := range ps {
			delete(a.owned[topic], p)
		}
		if a.assigned[topic] == nil {
			continue
		}
		keep := a.assigned[topic][:0]
		for _, p := range a.assigned[topic] {
			if !contains(ps, p) {
				keep = append(keep, p)
			}
		}
		a.assigned[topic] = keep
	}
}

func contains(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

func (a *App) closeRevokedLocked(gone map[string][]int32, committed bool) {
	ids := map[taskID]bool{}
	for topic, ps := range gone {
		if sub, ok := a.topicSub[topic]; ok {
			for _, p := range ps {
				ids[taskID{sub, p}] = true
			}
		}
	}
	// A task keeps running while this instance still owns a partition of
	// it from a topic not revoked now: the balancer moves whole tasks, so
	// that is a pattern topic deleted (or purged) under a task whose other
	// topics stay. Partitions revoked and assigned again since are of
	// revoked topics: the task closes, as before.
	a.assignMu.Lock()
	for topic, ps := range a.owned {
		if _, revoked := gone[topic]; revoked {
			continue
		}
		if sub, ok := a.topicSub[topic]; ok {
			for p := range ps {
				delete(ids, taskID{sub, p})
			}
		}
	}
	a.assignMu.Unlock()
	a.tasksMu.Lock()
	defer a.tasksMu.Unlock()
	for id := range ids {
		t, ok := a.tasks[id]
		if !ok {
			continue
		}
		a.dropRestore(t)
		if !committed {
			t.discardState()
		}
		if err := t.close(); err != nil {
			a.log.Warn("streams: close task", "task", id, "err", err)
		}
		delete(a.tasks, id)
	}
}

func (a *App) closeTasksLocked(committed bool) {
	a.tasksMu.Lock()
	defer a.tasksMu.Unlock()
	for id, t := range a.tasks {
		a.dropRestore(t)
		if !committed {
			t.discardState()
		}
		_ = t.close()
		delete(a.tasks, id)
	}
	a.closeRestorer()
}

// partitioner sends changelog records to the partition the task set
// (its own), a foreign-key join's responses to the partition of the left
// row's task, and everything else by key as Kafka's default partitioner
// (murmur2), so that a repartition topic routes a key as a Java
// producer would.
type partitioner struct {
	app   *App
	byKey kgo.Partitioner
}

func (p *partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if p.app.changelogs[topic] || p.app.partitioned[topic] {
		return kgo.ManualPartitioner().ForTopic(topic)
	}
	return p.byKey.ForTopic(topic)
}
