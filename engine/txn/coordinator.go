package txn

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/segment"
)

// StateTopic is the internal topic holding transaction state.
const StateTopic = "__transaction_state"

// Config is the coordinator's configuration; the names in comments are
// Kafka's broker settings.
type Config struct {
	// Partitions is transaction.state.log.num.partitions (50): the
	// partition count transactional ids are routed by. The caller creates
	// __transaction_state with it; an existing topic keeps its count,
	// which the caller then passes instead.
	Partitions int32
	// ReplicationFactor is transaction.state.log.replication.factor (3),
	// capped by the live brokers when the topic is created.
	ReplicationFactor int16
	// MinISR is transaction.state.log.min.isr (2): the topic's
	// min.insync.replicas (capped by its replication factor at creation).
	MinISR int
	// SegmentBytes is transaction.state.log.segment.bytes (100 MiB).
	SegmentBytes int64
	// MaxTimeout is transaction.max.timeout.ms (15 min): the most a
	// producer's transaction.timeout.ms may be.
	MaxTimeout time.Duration
	// IDExpiration is transactional.id.expiration.ms (7 days): an id
	// idle for that long is removed.
	IDExpiration time.Duration
	// AbortTimedOutInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms (10 s):
	// how often transactions past their timeout are looked for.
	AbortTimedOutInterval time.Duration
	// RemoveExpiredInterval is
	// transaction.remove.expired.transaction.cleanup.interval.ms (1 h).
	RemoveExpiredInterval time.Duration
	// MarkerRetryBackoff is how long a marker that could not be written
	// (its partition's leader unavailable) waits before it is sent again
	// (Kafka's channel manager retries at its next poll; 100 ms).
	MarkerRetryBackoff time.Duration

	// AllocateProducerID hands out a new producer id (the engine's,
	// from the block allocator). It may block; it is never called on a
	// shard goroutine.
	AllocateProducerID func() (int64, error)
	// OffsetsPartitionFor is the partition of __consumer_offsets that
	// holds a group (AddOffsetsToTxn adds it to the transaction).
	OffsetsPartitionFor func(groupID string) int32
	// Markers writes transaction markers to partition leaders.
	Markers MarkerWriter

	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Partitions <= 0 {
		c.Partitions = 50
	}
	if c.ReplicationFactor <= 0 {
		c.ReplicationFactor = 3
	}
	if c.MinISR <= 0 {
		c.MinISR = 2
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = 100 << 20
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = 15 * time.Minute
	}
	if c.IDExpiration <= 0 {
		c.IDExpiration = 7 * 24 * time.Hour
	}
	if c.AbortTimedOutInterval <= 0 {
		c.AbortTimedOutInterval = 10 * time.Second
	}
	if c.RemoveExpiredInterval <= 0 {
		c.RemoveExpiredInterval = time.Hour
	}
	if c.MarkerRetryBackoff <= 0 {
		c.MarkerRetryBackoff = 100 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// DefaultConfig is Kafka's defaults (the hooks left unset).
func DefaultConfig() Config {
	var c Config
	c.setDefaults()
	c.Logger = nil
	return c
}

// Marker is one transaction marker to write: a COMMIT or ABORT control
// batch of the producer at its epoch, stamped with the coordinator's
// epoch (the leader epoch of its partition of __transaction_state), by
// which a partition leader refuses markers of a coordinator that lost its
// partition.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	// TransactionVersion is the client's transaction version (KIP-1228;
	// engine.Marker.TransactionVersion says how a leader uses it).
	TransactionVersion int16
}

// MarkerWriter writes markers to the leaders of partitions: this broker's
// own through the engine, other brokers' with WriteTxnMarkers.
type MarkerWriter interface {
	// WriteMarkers writes m to each partition of tps. It must not block.
	// done is called exactly once, never on a shard goroutine, with the
	// partitions to send again later (their leader was unavailable, or
	// moved), and fenced true when a leader refused the marker because it
	// saw a newer coordinator epoch (this coordinator lost its partition;
	// the new one sends the markers). Partitions whose topic was deleted
	// count as written, as in Kafka.
	WriteMarkers(m Marker, tps []engine.TP, done func(retry []engine.TP, fenced bool))
}

// Coordinator is the transaction coordinator. Its methods may be called
// from any goroutine; each answers through its reply function exactly
// once, from a shard goroutine or the caller's.
type Coordinator struct {
	eng   *engine.Core
	cfg   Config
	log   *slog.Logger
	parts []*partition // by partition of __transaction_state; fixed at Start

	closed  atomic.Bool
	loads   loads
	loadSem chan struct{}

	mu              sync.Mutex // guards the timers
	abortTimer      *time.Timer
	expirationTimer *time.Timer
}

// partition is one partition of __transaction_state and the transactional
// ids that hash to it. Everything in it is touched only on the goroutine
// of the shard that owns the partition.
type partition struct {
	c     *Coordinator
	tp    engine.TP
	state partState
	txns  map[string]*txnMeta
	// inflight counts the appends issued and not completed; idle are the
	// functions waiting for it to reach zero (afterWrites).
	inflight int
	idle     []func()

	// The term, as the group coordinator keeps it: the leader epoch this
	// broker was last elected or resigned at (the coordinator epoch its
	// markers carry), the topic incarnation, and a counter every term
	// change moves.
	epoch   int32
	topicID [16]byte
	gen     uint64
}

type partState int8

const (
	partUnloaded partState = iota
	partLoading
	partLoaded
	partFailed
)

const maxParallelLoads = 4

// Start starts the coordinator. It creates nothing and coordinates nothing
// until Elected, as the group coordinator (see doc.go).
func Start(eng *engine.Core, cfg Config) (*Coordinator, error) {
	cfg.setDefaults()
	if cfg.AllocateProducerID == nil || cfg.OffsetsPartitionFor == nil || cfg.Markers == nil {
		return nil, errors.New("txn: Config needs AllocateProducerID, OffsetsPartitionFor and Markers")
	}
	c := &Coordinator{eng: eng, cfg: cfg, log: cfg.Logger, loadSem: make(chan struct{}, maxParallelLoads)}
	for i := range cfg.Partitions {
		c.parts = append(c.parts, &partition{c: c, tp: engine.TP{Topic: StateTopic, Partition: i}, txns: map[string]*txnMeta{}, epoch: -1})
	}
	c.mu.Lock()
	c.abortTimer = time.AfterFunc(cfg.AbortTimedOutInterval, c.abortTimedOut)
	c.expirationTimer = time.AfterFunc(cfg.RemoveExpiredInterval, c.removeExpired)
	c.mu.Unlock()
	return c, nil
}

// TopicConfigs are the topic overrides to create __transaction_state with:
// compacted, min.insync.replicas as transaction.state.log.min.isr says
// (capped by the replication factor the topic gets), as Kafka creates it.
// Kafka also sets compression.type=uncompressed and unclean leader
// election off: ringlog stores batches as written (the coordinator writes
// them uncompressed) and unclean election is off unless a topic asks.
func (c *Coordinator) TopicConfigs(replicationFactor int) map[string]string {
	return map[string]string{
		"cleanup.policy":      "compact",
		"segment.bytes":       strconv.FormatInt(c.cfg.SegmentBytes, 10),
		"min.insync.replicas": strconv.Itoa(max(1, min(c.cfg.MinISR, replicationFactor))),
		"segment.index.bytes": strconv.FormatInt(min(max(c.cfg.SegmentBytes/4096*24, 64<<10), segment.DefaultConfig().SegmentIndexBytes), 10),
	}
}

// ReplicationFactor is transaction.state.log.replication.factor.
func (c *Coordinator) ReplicationFactor() int16 { return c.cfg.ReplicationFactor }

// Partitions is the partition count of __transaction_state.
func (c *Coordinator) Partitions() int32 { return int32(len(c.parts)) }

// PartitionOf is the partition of __transaction_state that holds id:
// Kafka's abs(transactionalId.hashCode()) % partitions, the rule groups
// are routed by.
func (c *Coordinator) PartitionOf(id string) int32 {
	return group.PartitionFor(id, int32(len(c.parts)))
}

// MaxTimeout is transaction.max.timeout.ms.
func (c *Coordinator) MaxTimeout() time.Duration { return c.cfg.MaxTimeout }

// Close stops the coordinator: timers stop, markers being written are
// dropped (the next leader of each partition sends them again from its
// log), and later requests get NOT_COORDINATOR. Call it before the
// engine's Close.
func (c *Coordinator) Close() {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	c.mu.Lock()
	c.abortTimer.Stop()
	c.expirationTimer.Stop()
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range c.parts {
		wg.Add(1)
		if err := c.eng.OnShard(p.tp, func() { defer wg.Done(); p.unload() }); err != nil {
			wg.Done()
		}
	}
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		c.log.Error("transaction coordinator: shards did not unload in 10s (engine closed first?)")
	}
}

// unload forgets the partition's transactional ids (shard only).
func (p *partition) unload() {
	p.state = partUnloaded
	p.gen++
	txns := p.txns
	p.txns = map[string]*txnMeta{}
	for _, m := range txns {
		p.release(m)
	}
}

// onID runs fn on the shard of id's partition once the partition serves;
// otherwise fail gets the code that says why (see unavailable).
func (c *Coordinator) onID(id string, fn func(p *partition), fail func(code int16)) {
	if c == nil {
		fail(kerr.CoordinatorNotAvailable.Code)
		return
	}
	c.onPartition(c.parts[c.PartitionOf(id)], fn, fail)
}

func (c *Coordinator) onPartition(p *partition, fn func(p *partition), fail func(code int16)) {
	if c.closed.Load() {
		fail(kerr.NotCoordinator.Code)
		return
	}
	err := c.eng.OnShard(p.tp, func() {
		if code := p.unavailable(); code != 0 {
			fail(code)
			return
		}
		fn(p)
	})
	if err != nil {
		if errors.Is(err, engine.ErrClosed) || errors.Is(err, engine.ErrUnknownTopicOrPartition) {
			fail(kerr.NotCoordinator.Code)
		} else {
			fail(kerr.CoordinatorNotAvailable.Code)
		}
	}
}

func (p *partition) unavailable() int16 {
	switch p.state {
	case partLoading:
		return kerr.CoordinatorLoadInProgress.Code
	case partFailed:
		return kerr.CoordinatorNotAvailable.Code
	case partUnloaded:
		return kerr.NotCoordinator.Code
	}
	return 0
}

// after runs fn on p's shard after d if the term gen is still on.
func (p *partition) after(d time.Duration, gen uint64, fn func()) {
	time.AfterFunc(d, func() {
		if p.c.closed.Load() {
			return
		}
		_ = p.c.eng.OnShard(p.tp, func() {
			if p.gen == gen && p.state == partLoaded {
				fn()
			}
		})
	})
}

// write appends t, the pending transition of m, to the partition (shard
// only) and completes it once the high watermark covers it (acks=all, as
// Kafka writes its internal topics). done runs on the shard with 0 or the
// error code for the client (Kafka's appendTransactionToLog mapping). A
// term that ended meanwhile answers NOT_COORDINATOR: its state is gone.
func (p *partition) write(m *txnMeta, t *transit, done func(code int16)) {
	var value []byte
	if t.state != stateDead {
		value = txnValue(t)
	}
	b, err := buildBatch(txnKey(m.id), value, time.Now())
	if err != nil {
		p.c.log.Error("transaction coordinator: encode a transition", "id", m.id, "err", err)
		done(kerr.UnknownServerError.Code)
		return
	}
	m.pending = t
	gen := p.gen
	p.inflight++
	p.c.eng.AppendOnShard(p.tp, b, engine.AppendOptions{RequireISR: true}, func(_ engine.AppendResult, err error) {
		// Calls parked on m go on once what this write started is over
		// (after done: an end's markers are sent by then).
		defer func() {
			if p.txns[m.id] != m {
				p.release(m) // removed (Dead): each call finds out
			} else {
				p.wake(m)
			}
		}()
		p.inflight--
		if p.inflight == 0 {
			idle := p.idle
			p.idle = nil
			for _, fn := range idle {
				fn()
			}
		}
		if p.gen != gen || p.txns[m.id] != m {
			done(kerr.NotCoordinator.Code)
			return
		}
		if m.pending != t {
			// Cannot happen: one transition is pending at a time.
			p.c.log.Error("transaction coordinator: a write completed for a transition no longer pending", "id", m.id)
			done(kerr.UnknownServerError.Code)
			return
		}
		if err != nil {
			m.pending = nil
			p.c.log.Info("transaction coordinator: transition not written", "id", m.id, "to", t.state, "err", err)
			done(appendErrorCode(err))
			return
		}
		if t.state == stateDead {
			delete(p.txns, m.id)
			done(0)
			return
		}
		if err := m.complete(t); err != nil {
			m.pending = nil
			p.c.log.Error("transaction coordinator: transition", "err", err)
			done(kerr.UnknownServerError.Code)
			return
		}
		done(0)
	})
}

// afterWrites runs fn on the shard once no append is in flight.
func (p *partition) afterWrites(fn func()) {
	if p.inflight == 0 {
		fn()
		return
	}
	p.idle = append(p.idle, fn)
}

// appendErrorCode maps a failed write of transaction state as Kafka's
// TransactionStateManager.appendTransactionToLog does.
func appendErrorCode(err error) int16 {
	switch {
	case errors.Is(err, segment.ErrBatchTooBig):
		return kerr.UnknownServerError.Code
	case errors.Is(err, engine.ErrUnknownTopicOrPartition), errors.Is(err, engine.ErrNotEnoughReplicas):
		return kerr.CoordinatorNotAvailable.Code
	}
	// Not the leader any more, a storage error, a stopped engine.
	return kerr.NotCoordinator.Code
}

// gather counts outstanding parts of a request answered from several
// shards; the caller holds one count while it dispatches.
type gather struct {
	n     atomic.Int32
	reply func()
}

func newGather(reply func()) *gather {
	g := &gather{reply: reply}
	g.n.Store(1)
	return g
}

func (g *gather) add() { g.n.Add(1) }
func (g *gather) done() {
	if g.n.Add(-1) == 0 {
		g.reply()
	}
}

func (p *partition) String() string { return fmt.Sprintf("%s-%d", p.tp.Topic, p.tp.Partition) }
