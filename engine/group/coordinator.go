package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringlog/engine"
	"ringlog/segment"
)

// OffsetsTopic is the internal topic holding group metadata and committed
// offsets.
const OffsetsTopic = "__consumer_offsets"

// Config is the coordinator's configuration; the names in comments are
// Kafka's broker settings.
type Config struct {
	// OffsetsTopicPartitions is offsets.topic.num.partitions (50): the
	// partition count groups are routed by (Partitions). The caller creates
	// __consumer_offsets with it; an existing topic keeps its count, which
	// the caller then passes instead.
	OffsetsTopicPartitions int32
	// OffsetsTopicReplicationFactor is offsets.topic.replication.factor
	// (3), capped by the live brokers when the topic is created.
	OffsetsTopicReplicationFactor int16
	// OffsetsTopicSegmentBytes is offsets.topic.segment.bytes (100 MiB).
	OffsetsTopicSegmentBytes int64
	// MinSessionTimeout and MaxSessionTimeout are
	// group.min.session.timeout.ms (6 s) and group.max.session.timeout.ms
	// (30 min): the session timeouts a member may ask for.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms (3 s): how
	// long the first rebalance of an empty group waits for more members.
	InitialRebalanceDelay time.Duration
	// MaxSize is group.max.size (Kafka's default, 2^31-1: no limit).
	MaxSize int
	// OffsetsRetention is offsets.retention.minutes (7 days, KIP-186).
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms
	// (10 min).
	OffsetsRetentionCheckInterval time.Duration
	// OffsetMetadataMaxBytes is offset.metadata.max.bytes (4096).
	OffsetMetadataMaxBytes int
	// MemberMetadataMaxBytes bounds the protocol metadata one member may
	// send in JoinGroup (all its protocols together); ringlog's own limit,
	// 1 MiB (a group's metadata record must fit max.message.bytes anyway).
	MemberMetadataMaxBytes int
	// GroupMetadataMaxBytes bounds the protocol metadata and assignments
	// one group holds, all members together; ringlog's own limit, 32 MiB.
	// A join beyond it is refused with GROUP_MAX_SIZE_REACHED.
	GroupMetadataMaxBytes int

	// Authorizing says an authorizer checks requests (authorizer.class.name
	// set): a regular-expression subscription then resolves only to the
	// topics the member whose heartbeat resolved it may DESCRIBE
	// (Client.DescribeTopic), as Kafka 4's coordinator does (KAFKA-18813).
	Authorizing bool

	// KIP-848 consumer groups (ConsumerGroupHeartbeat).
	//
	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms
	// (5 s): how often members heartbeat, which bounds how long a member
	// takes to learn of a new assignment.
	ConsumerHeartbeatInterval time.Duration
	// ConsumerSessionTimeout is group.consumer.session.timeout.ms (45 s):
	// a member that does not heartbeat for that long is removed.
	ConsumerSessionTimeout time.Duration
	// ConsumerMaxSize is group.consumer.max.size (2^31-1).
	ConsumerMaxSize int
	// ConsumerAssignors is group.consumer.assignors: the server-side
	// assignors members may ask for, the first being the default
	// ("uniform", "range").
	ConsumerAssignors []string

	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.OffsetsTopicPartitions <= 0 {
		c.OffsetsTopicPartitions = 50
	}
	if c.OffsetsTopicSegmentBytes <= 0 {
		c.OffsetsTopicSegmentBytes = 100 << 20
	}
	if c.OffsetsTopicReplicationFactor <= 0 {
		c.OffsetsTopicReplicationFactor = 3
	}
	if c.MinSessionTimeout <= 0 {
		c.MinSessionTimeout = 6 * time.Second
	}
	if c.MaxSessionTimeout <= 0 {
		c.MaxSessionTimeout = 30 * time.Minute
	}
	if c.InitialRebalanceDelay < 0 {
		c.InitialRebalanceDelay = 0
	}
	if c.MaxSize <= 0 {
		c.MaxSize = math.MaxInt32
	}
	if c.OffsetsRetention <= 0 {
		c.OffsetsRetention = 7 * 24 * time.Hour
	}
	if c.OffsetsRetentionCheckInterval <= 0 {
		c.OffsetsRetentionCheckInterval = 10 * time.Minute
	}
	if c.OffsetMetadataMaxBytes <= 0 {
		c.OffsetMetadataMaxBytes = 4096
	}
	if c.MemberMetadataMaxBytes <= 0 {
		c.MemberMetadataMaxBytes = 1 << 20
	}
	if c.GroupMetadataMaxBytes <= 0 {
		c.GroupMetadataMaxBytes = 32 << 20
	}
	if c.ConsumerHeartbeatInterval <= 0 {
		c.ConsumerHeartbeatInterval = 5 * time.Second
	}
	if c.ConsumerSessionTimeout <= 0 {
		c.ConsumerSessionTimeout = 45 * time.Second
	}
	if c.ConsumerMaxSize <= 0 {
		c.ConsumerMaxSize = math.MaxInt32
	}
	if len(c.ConsumerAssignors) == 0 {
		c.ConsumerAssignors = []string{assignorUniform, assignorRange}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// DefaultConfig is Kafka's defaults (InitialRebalanceDelay included: a
// zero Config means no delay).
func DefaultConfig() Config {
	c := Config{InitialRebalanceDelay: 3 * time.Second}
	c.setDefaults()
	return c
}

// Coordinator is the classic group coordinator. Its methods may be called
// from any goroutine; each answers through its reply function exactly
// once, from a shard goroutine or the caller's.
type Coordinator struct {
	eng   *engine.Core
	cfg   Config
	log   *slog.Logger
	parts []*partition // by partition of __consumer_offsets; fixed at Start

	closed  atomic.Bool
	loads   loads         // the elections not settled yet (WaitLoaded)
	loadSem chan struct{} // bounds the replays running at once

	mu     sync.Mutex // guards expiry
	expiry *time.Timer

	// regexes are the compiled KIP-848 subscriptions of every group here.
	regexes regexCache
}

// partition is one partition of __consumer_offsets and the groups that
// hash to it. Everything in it is touched only on the goroutine of the
// shard that owns the partition (inside engine.OnShard, a timer's OnShard,
// or an append's done callback), so it needs no lock.
type partition struct {
	c      *Coordinator
	tp     engine.TP
	state  partState
	groups map[string]*group
	// txnGroups are, per producer id, the groups holding its pending
	// transactional offsets (TxnCompleted settles them).
	txnGroups map[int64]map[string]bool
	// commitSeq is the seq of the last offset record written or
	// replayed here (committed.seq).
	commitSeq uint64
	// loadTxnEnds are the markers written while the partition loads,
	// settled at the install.
	loadTxnEnds []txnEnd
	// lastWrite is the last append issued to the partition: an answer
	// that writes nothing itself but reports state changed by a write
	// still in flight waits for it (afterWrites).
	lastWrite *writeBarrier

	// The term: the leader epoch this broker was last elected at or
	// resigned at (-1: none yet), of the topic incarnation topicID (a
	// topic deleted and created again starts its epochs over), and a
	// counter that every election and resignation moves, so that a replay
	// finishing for an older term is dropped.
	epoch   int32
	topicID [16]byte
	gen     uint64
}

// writeBarrier lets answers wait for an append to complete.
type writeBarrier struct {
	done    bool
	err     error
	waiters []func(error)
}

type partState int8

const (
	// partUnloaded: not coordinated here: a partition this broker does
	// not lead (never elected, or resigned), and every partition after
	// Close.
	partUnloaded partState = iota
	partLoading
	partLoaded
	partFailed // replay failed: the partition's groups are unavailable
)

// maxParallelLoads bounds the partitions replayed at once: a broker
// elected for many partitions together (a start, a peer's failure) reads
// them a few at a time rather than all their logs at once.
const maxParallelLoads = 4

// Start starts the coordinator. It creates nothing and coordinates
// nothing until Elected: the caller creates __consumer_offsets (through
// the controller, with Partitions, ReplicationFactor and TopicConfigs, as
// Kafka creates it at the first FindCoordinator) and reports each
// partition this broker leads, which may be every one (a single broker)
// or none.
func Start(eng *engine.Core, cfg Config) (*Coordinator, error) {
	cfg.setDefaults()
	if cfg.MinSessionTimeout > cfg.MaxSessionTimeout {
		return nil, fmt.Errorf("group: group.min.session.timeout.ms %v above group.max.session.timeout.ms %v", cfg.MinSessionTimeout, cfg.MaxSessionTimeout)
	}
	for _, name := range cfg.ConsumerAssignors {
		if assignorFor(name) == nil {
			return nil, fmt.Errorf("group: group.consumer.assignors: unknown assignor %q (uniform and range exist)", name)
		}
	}
	if cfg.ConsumerHeartbeatInterval >= cfg.ConsumerSessionTimeout {
		return nil, fmt.Errorf("group: group.consumer.heartbeat.interval.ms %v must be below group.consumer.session.timeout.ms %v", cfg.ConsumerHeartbeatInterval, cfg.ConsumerSessionTimeout)
	}
	c := &Coordinator{eng: eng, cfg: cfg, log: cfg.Logger, loadSem: make(chan struct{}, maxParallelLoads)}
	for i := range cfg.OffsetsTopicPartitions {
		c.parts = append(c.parts, &partition{c: c, tp: engine.TP{Topic: OffsetsTopic, Partition: i}, groups: map[string]*group{}, epoch: -1})
	}
	c.mu.Lock()
	c.expiry = time.AfterFunc(cfg.OffsetsRetentionCheckInterval, c.expireAll)
	c.mu.Unlock()
	return c, nil
}

// topicConfigs are the overrides __consumer_offsets is created with.
func topicConfigs(cfg *Config) map[string]string {
	return map[string]string{
		"cleanup.policy": "compact",
		"segment.bytes":  strconv.FormatInt(cfg.OffsetsTopicSegmentBytes, 10),
		// One index entry per 4 KiB of a 100 MiB segment is 200 KiB of
		// offset index; Kafka's 10 MiB preallocation is 98% unused here,
		// times two files, times 50 partitions.
		"segment.index.bytes": strconv.FormatInt(indexBytesFor(cfg.OffsetsTopicSegmentBytes), 10),
	}
}

// TopicConfigs are the topic overrides to create __consumer_offsets with
// (compacted, as Kafka creates it).
func (c *Coordinator) TopicConfigs() map[string]string { return topicConfigs(&c.cfg) }

// ReplicationFactor is offsets.topic.replication.factor.
func (c *Coordinator) ReplicationFactor() int16 { return c.cfg.OffsetsTopicReplicationFactor }

// indexBytesFor sizes the offset and time indexes of a segment of
// segmentBytes: the time index's 12-byte entries at the default
// index.interval.bytes, with room to spare.
func indexBytesFor(segmentBytes int64) int64 {
	n := segmentBytes / 4096 * 12 * 2
	return min(max(n, 64<<10), segment.DefaultConfig().SegmentIndexBytes)
}

// Partitions is the partition count of __consumer_offsets.
func (c *Coordinator) Partitions() int32 { return int32(len(c.parts)) }

// PartitionOf is the partition of __consumer_offsets that holds groupID.
func (c *Coordinator) PartitionOf(groupID string) int32 {
	return PartitionFor(groupID, int32(len(c.parts)))
}

// WaitLoaded waits until every election reported so far (Elected, and
// those reported while it waits) has settled: its partition replayed and
// serving its groups, or its term over (a newer election, a resignation,
// Close). It returns the first replay error among them (that partition
// answers COORDINATOR_NOT_AVAILABLE until its next election), and nil at
// once when no election is pending. Partitions this broker was never
// elected for are not waited for: they are coordinated elsewhere.
func (c *Coordinator) WaitLoaded(ctx context.Context) error {
	return c.loads.wait(ctx)
}

// Close stops the coordinator: parked JoinGroup and SyncGroup requests are
// answered NOT_COORDINATOR (clients look for the coordinator again, as
// after a Kafka coordinator moves), timers are stopped, and later requests
// get NOT_COORDINATOR. Call it before closing the network and the engine,
// so that the network layer can drain.
func (c *Coordinator) Close() {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	c.mu.Lock()
	if c.expiry != nil {
		c.expiry.Stop()
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range c.parts {
		wg.Add(1)
		if err := c.eng.OnShard(p.tp, func() { defer wg.Done(); p.unload() }); err != nil {
			wg.Done()
		}
	}
	// Close must come before the engine's: a shard that stops meanwhile
	// drops the calls queued behind its stop, so the wait is bounded.
	waited := make(chan struct{})
	go func() { wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		c.log.Error("group coordinator: shards did not unload in 10s (engine closed first?)")
	}
}

// unload answers what is parked and forgets the partition's groups; a
// replay under way is dropped when it finishes.
func (p *partition) unload() {
	p.state = partUnloaded
	p.gen++
	for _, g := range p.groups {
		g.shutdown()
	}
	p.groups = map[string]*group{}
	p.txnGroups, p.loadTxnEnds = nil, nil
}

// PartitionFor is the partition of __consumer_offsets that holds a group:
// Kafka's abs(groupId.hashCode()) % partitions, with Java's String
// hashCode over UTF-16 code units, so that a data directory maps groups as
// Kafka would.
func PartitionFor(groupID string, partitions int32) int32 {
	var h int32
	for _, r := range groupID {
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			h = 31*h + int32(r1)
			h = 31*h + int32(r2)
			continue
		}
		h = 31*h + int32(r)
	}
	// Kafka's Utils.abs maps MIN_VALUE to 0.
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % partitions
}

func (c *Coordinator) partitionOf(groupID string) *partition {
	return c.parts[PartitionFor(groupID, int32(len(c.parts)))]
}

// onGroupPartition runs fn on the shard that owns groupID's partition, once
// the partition serves; otherwise fail gets the code that says why:
// COORDINATOR_LOAD_IN_PROGRESS while it replays, NOT_COORDINATOR once the
// coordinator closed, COORDINATOR_NOT_AVAILABLE when the partition cannot
// be used. A nil coordinator (a broker without groups) is
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) onGroupPartition(groupID string, fn func(p *partition), fail func(code int16)) {
	if c == nil {
		fail(kerr.CoordinatorNotAvailable.Code)
		return
	}
	c.onPartition(c.partitionOf(groupID), fn, fail)
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
		fail(c.shardErrorCode(err))
	}
}

// unavailable is the code for a partition that cannot serve its groups.
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

// shardErrorCode maps a failed OnShard: a stopped engine is a coordinator
// going away, a missing partition one this broker hosts no replica of (the
// coordinator is elsewhere, or __consumer_offsets is not created yet).
func (c *Coordinator) shardErrorCode(err error) int16 {
	if errors.Is(err, engine.ErrClosed) || errors.Is(err, engine.ErrUnknownTopicOrPartition) {
		return kerr.NotCoordinator.Code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// after runs fn on p's shard after d, if the partition still serves.
// Timers never spin and never touch group state off the shard: the
// callback only queues fn to the shard, where fn checks that it is not
// stale (a sequence number or generation it captured).
func (p *partition) after(d time.Duration, fn func()) *time.Timer {
	return time.AfterFunc(d, func() {
		p.c.eng.OnShard(p.tp, func() {
			if p.state == partLoaded {
				fn()
			}
		})
	})
}

// appendRecords writes recs to p's partition; done runs on p's shard with
// the result. It must be called on p's shard. The result comes once the
// partition's high watermark covers the records (Kafka writes its
// internal topics with acks=all): an acknowledged commit survives the loss
// of this broker. If this broker stops leading first, the engine fails the
// write with ErrNotLeader (NOT_COORDINATOR). On an engine without a
// replication layer the high watermark covers a write once it is written.
func (p *partition) appendRecords(recs []record, done func(error)) {
	b, err := buildBatches(recs, time.Now())
	if err != nil {
		done(err)
		return
	}
	p.appendBuilt(b, engine.AppendOptions{RequireISR: true}, done)
}

// appendBuilt is appendRecords for batches already built.
func (p *partition) appendBuilt(b []byte, opts engine.AppendOptions, done func(error)) {
	wb, prev := &writeBarrier{}, p.lastWrite
	p.lastWrite = wb
	p.c.eng.AppendOnShard(p.tp, b, opts, func(_ engine.AppendResult, err error) {
		done(err)
		wb.done, wb.err = true, err
		for _, fn := range wb.waiters {
			fn(err)
		}
		wb.waiters = nil
	})
	if wb.done && p.lastWrite == wb {
		// Refused at once: the appends before it may still be in flight.
		p.lastWrite = prev
	}
}

// afterWrites runs fn on p's shard once every append issued so far has
// completed (appends complete in log order, so waiting for the last one
// is enough), with the last one's error. It must be called on p's shard.
func (p *partition) afterWrites(fn func(error)) {
	wb := p.lastWrite
	switch {
	case wb == nil:
		fn(nil)
	case !wb.done:
		wb.waiters = append(wb.waiters, fn)
	default:
		fn(wb.err)
	}
}

// storeErrorCode maps a failed write of offsets as Kafka's
// GroupMetadataManager.storeOffsets does.
func storeErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, segment.ErrBatchTooBig):
		return kerr.InvalidCommitOffsetSize.Code
	case errors.Is(err, engine.ErrUnknownTopicOrPartition), errors.Is(err, engine.ErrNotEnoughReplicas):
		return kerr.CoordinatorNotAvailable.Code
	}
	// A storage error, a stopped engine: this broker cannot coordinate the
	// group now; NOT_COORDINATOR makes the client look again and retry.
	return kerr.NotCoordinator.Code
}

// groupStoreErrorCode maps a failed write of group metadata as Kafka's
// GroupMetadataManager.storeGroup does (a record too large is
// UNKNOWN_SERVER_ERROR there).
func groupStoreErrorCode(err error) int16 {
	if errors.Is(err, segment.ErrBatchTooBig) || errors.Is(err, segment.ErrInvalidBatch) {
		return kerr.UnknownServerError.Code
	}
	return storeErrorCode(err)
}

// gather counts outstanding parts of a request answered from several
// shards: each part writes its own slot, and the last one to finish
// replies. The caller holds one count of its own while it dispatches, so
// that a part finishing at once cannot reply before the others are sent.
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
