package engine

import (
	"errors"
	"fmt"
	"time"

	"ringlog/engine/acks"
	"ringlog/internal/fsutil"
	"ringlog/segment"
	"ringlog/segment/batch"
)

type segmentHeader = batch.Header

// AppendOptions qualify an append.
type AppendOptions struct {
	// RequireISR is acks=all: the append fails with ErrNotEnoughReplicas
	// when the in-sync replicas are fewer than min.insync.replicas capped
	// at the replica count (one of one on an engine that is not
	// replicated, SetISR's counts on one that is).
	// On a replicated engine the append is answered once the high
	// watermark covers it, not when it is written.
	RequireISR bool
	// Coordinator marks a coordinator's own write to its internal topic
	// (Kafka's AppendOrigin.COORDINATOR): a producer batch in it (the group
	// coordinator's transactional offset commits) is checked for its
	// producer's epoch and open transaction, not for sequence numbers,
	// which the coordinator does not keep (Kafka writes them at sequence 0
	// every time).
	Coordinator bool
	// OngoingTxn marks an append whose transactional batches skipped the
	// coordinator's verification (KIP-890) because TxnOngoing found their
	// producer's transaction open on the partition: the shard refuses,
	// with ErrInvalidTxnState, a transactional batch that no longer
	// continues an open transaction of its producer at its epoch (a
	// marker ended it in between), as Kafka's append does for a batch
	// without its verification guard.
	OngoingTxn bool
	// Written, when set, is called on the partition's shard for each
	// RequireISR append once it is written on this broker and starts
	// waiting for the high watermark (before its done, which may follow at
	// once): Kafka's RequestMetrics tell that LocalTime from RemoteTime.
	// It must not block.
	Written func()
}

// AppendResult is what a producer is told.
type AppendResult struct {
	// BaseOffset is the offset of the first record written (for a
	// duplicate, of the batch written before).
	BaseOffset int64
	// LogAppendTime is the broker's timestamp for LogAppendTime topics, else -1.
	LogAppendTime int64
	// LogStartOffset of the partition after the append.
	LogStartOffset int64
	// Duplicate is true when the batch had been written already (an
	// idempotent producer's retry).
	Duplicate bool
}

// ErrNotEnoughReplicas: acks=all with fewer in-sync replicas than
// min.insync.replicas.
var ErrNotEnoughReplicas = errors.New("engine: not enough in-sync replicas")

// maxDecompressed bounds what validation may decompress of one batch.
const maxDecompressed = 64 << 20

// Append writes the record batches in records (a produce request's
// records field: one or more RecordBatch v2) to tp. The caller's goroutine
// cuts the batches; the partition's shard checks them (checkProduced) as it
// stages them for the write. done is called exactly once, on the shard's
// goroutine, when the batches are written (and synced under the flush
// policy always; on a replicated engine with RequireISR, once the high
// watermark covers them), or with the error (on the caller's goroutine
// when the request is refused before it reaches the shard). done must not
// block. On a replicated engine only a leader takes appends (ErrNotLeader).
func (e *Core) Append(tp TP, records []byte, opts AppendOptions, done func(AppendResult, error)) {
	if r := e.newAppend(tp, records, opts, done); r != nil {
		r.p.shard.send(shardMsg{append: r})
	}
}

// AppendItem is one partition's part of a multi-partition append.
type AppendItem struct {
	TP      TP
	Records []byte
	Done    func(AppendResult, error)
}

// AppendBatch appends several partitions' records, as one produce request
// carries them: each item is validated and answered on its own, as by
// Append, but the items bound for one shard travel to it together, so that
// a request over many partitions wakes each shard once instead of once per
// partition.
func (e *Core) AppendBatch(items []AppendItem, opts AppendOptions) {
	if len(items) == 1 {
		e.Append(items[0].TP, items[0].Records, opts, items[0].Done)
		return
	}
	var buf [16]*appendReq // on the stack for most requests
	reqs := buf[:0]
	for i := range items {
		r := e.newAppend(items[i].TP, items[i].Records, opts, items[i].Done)
		if r != nil {
			reqs = append(reqs, r)
		}
	}
	e.sendByShard(reqs)
}

// sendByShard queues reqs on their partitions' shards, one message per
// shard, so that each shard is woken once and takes them in one round.
func (e *Core) sendByShard(reqs []*appendReq) {
	if len(reqs) == 0 {
		return
	}
	byShard := make([][]*appendReq, len(e.shards))
	for _, r := range reqs {
		id := r.p.shard.id
		byShard[id] = append(byShard[id], r)
	}
	for id, rs := range byShard {
		if len(rs) > 0 {
			e.shards[id].send(shardMsg{appends: rs})
		}
	}
}

// newAppend cuts an append's batches and returns the request to queue, or
// nil when it was refused (done has then been called). Only the batches'
// framing is read here: their CRC and records are checked on the shard, as
// they are staged (checkProduced).
func (e *Core) newAppend(tp TP, records []byte, opts AppendOptions, done func(AppendResult, error)) *appendReq {
	if e.closed.Load() {
		done(AppendResult{}, ErrClosed)
		return nil
	}
	p, err := e.partition(tp)
	if err != nil {
		done(AppendResult{}, err)
		return nil
	}
	cfg := &p.topic.config
	// Checked again on the shard, where roles change; this spares a
	// follower's shard the requests of producers with stale metadata.
	if Role(p.role.Load()) != RoleLeader {
		done(AppendResult{}, fmt.Errorf("%w: %s-%d", ErrNotLeader, tp.Topic, tp.Partition))
		return nil
	}
	isr, replicas := p.isr.Load(), p.replicas.Load()
	if opts.RequireISR && !acks.Enough(isr, cfg.MinInsyncReplicas, replicas) {
		done(AppendResult{}, fmt.Errorf("%w: %d in sync of %d replicas, min.insync.replicas %d", ErrNotEnoughReplicas, isr, replicas, cfg.MinInsyncReplicas))
		return nil
	}
	r := &appendReq{p: p, opts: opts, done: done, produced: true}
	it := batch.Split(records)
	for it.Next() {
		b := it.Batch()
		h, err := batch.ParseHeader(b)
		if err != nil {
			done(AppendResult{}, fmt.Errorf("%w: %w", segment.ErrInvalidBatch, err))
			return nil
		}
		r.batches = append(r.batches, b)
		r.hdrs = append(r.hdrs, h)
	}
	if err := it.Err(); err != nil {
		done(AppendResult{}, fmt.Errorf("%w: %w", segment.ErrInvalidBatch, err))
		return nil
	}
	if len(r.batches) == 0 {
		done(AppendResult{}, fmt.Errorf("%w: no record batch", segment.ErrInvalidBatch))
		return nil
	}
	return r
}

// send queues appends (m.append or m.appends) for the shard. A full inbox
// waits rather than fails: the network layer bounds the requests in flight
// per connection, so this blocks only under a flood, which is
// back-pressure working. On a shard's thread (a connection on its ring
// producing) it never waits: handOff. A stopped shard fails them with
// ErrClosed.
func (s *shard) send(m shardMsg) {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.stopped {
		m.fail()
		return
	}
	if s.handOff(m) {
		return
	}
	select {
	case s.inbox <- m:
		s.wake()
	case <-s.done:
		m.fail()
	}
}

// round prepares every queued partition's appends (one Prepare per
// partition, producer checks first, each request on its own) and hands
// them to the kernel in one submission. A partition whose previous write
// is still in flight keeps its queue for a later round: its next write
// rewrites the block the previous one ends in, so it must follow it, and
// its producer state has one round pending at a time. Where the shard's
// disk I/O is on its owner's ring (diskOwner) the writes stay in flight
// when round returns, and each partition is answered as its own write
// completes (reap): a request that arrives meanwhile is written at once
// unless its partition is the one in flight. Elsewhere round waits for
// its writes, as the portable path's complete within the submission.
func (s *shard) round() {
	if len(s.queued) == 0 {
		return
	}
	if s.broken != nil {
		for _, p := range s.queued {
			for _, r := range p.queue {
				r.fail(s.brokenErr())
			}
			p.queue = nil
		}
		clear(s.queued)
		s.queued = s.queued[:0]
		return
	}
	s.ops = s.ops[:0]
	tasks := 0
	// Swapped out before the loop: an append queued while it runs (a
	// done that appends on the shard) goes on the new list.
	queued := s.queued
	s.queued, s.requeued = s.requeued[:0], nil
	for _, p := range queued {
		if p.task != nil {
			s.queued = append(s.queued, p)
			continue
		}
		reqs := p.queue
		p.queue = nil
		if t := s.prepare(p, reqs); t != nil {
			s.ops = append(s.ops, t.Ops...)
			tasks++
		}
	}
	clear(queued)
	s.requeued = queued[:0]
	if tasks == 0 {
		return
	}
	s.inflight += tasks
	s.wrote = time.Now()
	if err := s.io.Submit(s.ops...); err != nil {
		// The ring is broken: the fate of these writes is unknown, and so
		// is every log's state on this shard.
		s.broken = err
		s.e.log.Error("shard ring failed", "shard", s.id, "err", err)
	}
	clear(s.ops)
	s.ops = s.ops[:0]
	if s.diskOwner == nil {
		s.waitInFlight()
	}
}

// waitInFlight waits until the shard's appends in flight completed and are
// answered (or failed with the ring). Where the disk I/O is on the owner's
// ring (diskOwner) it waits in the owner's turns, so that while the writes
// (and the syncs of the flush policy always) are in the kernel the
// connections' completions are dispatched and their hooks run (responses
// sent, requests cut and queued), and each turn is one io_uring_enter for
// the disk and the network. Writes copied inline without a sync have
// completed inside Submit: the first reap finds them.
func (s *shard) waitInFlight() {
	for s.inflight > 0 && s.broken == nil {
		if s.diskOwner == nil {
			s.reap(1)
			continue
		}
		s.reap(0)
		if s.inflight == 0 || s.broken != nil {
			break
		}
		s.roundWait = true
		err := s.diskOwner.Turn(-1)
		s.roundWait = false
		if err != nil {
			s.broken = err
			s.e.log.Error("shard ring failed", "shard", s.id, "err", err)
		}
	}
	s.abandon()
}

// settle writes everything queued and waits for it: control work (a
// call, retention, the stop) runs with nothing of the shard in flight, as
// it did when every round waited for its writes.
func (s *shard) settle() {
	for s.broken == nil {
		s.round()
		s.waitInFlight()
		if len(s.queued) == 0 {
			return
		}
	}
}

// abandon fails the appends in flight once the ring broke: their fate is
// unknown (shard only). ringFailed then takes the partitions offline.
func (s *shard) abandon() {
	if s.broken == nil || s.inflight == 0 {
		return
	}
	for p := range s.parts {
		if rc, ok := p.roundCtx(); ok {
			p.producers.rollback()
			for _, r := range rc {
				r.fail(s.brokenErr())
			}
		}
	}
	s.inflight = 0
}

// prepare checks each request against the producer state, then prepares
// one log append for all the requests that pass. Requests that fail, and
// duplicates, are answered at once.
func (s *shard) prepare(p *partition, reqs []*appendReq) *segment.Task {
	if p.deleted.Load() {
		for _, r := range reqs {
			r.fail(unknownPartition(p.tp))
		}
		return nil
	}
	if err := p.offlineErr(); err != nil {
		for _, r := range reqs {
			r.fail(err)
		}
		return nil
	}
	// The role is settled here, on the shard that changes it: a request
	// queued before a role change is judged by the new role.
	if reqs = p.admit(reqs); len(reqs) == 0 {
		return nil
	}
	if reqs[0].replica != nil {
		return s.prepareReplica(p, reqs)
	}
	leo := p.log().LEO()
	next := leo
	st, err := p.log().Stage(reqsSize(reqs))
	if err != nil {
		s.checkDisk(p, err)
		for _, r := range reqs {
			r.done(AppendResult{}, storageError(err))
		}
		return nil
	}
	nowMs := s.e.cfg.Now().UnixMilli()
	accepted := reqs[:0:0]
	logStart := p.log().LogStartOffset()
	for _, r := range reqs {
		mark := st.Len()
		if err := r.stage(st, nowMs); err != nil {
			r.done(AppendResult{}, err)
			continue
		}
		var dup *batchMeta
		var err error
		for i, h := range r.hdrs {
			if m := r.marker(i); m != nil {
				err = p.producers.checkMarker(h.ProducerID, h.ProducerEpoch, m.CoordinatorEpoch, r.markerTV)
			} else if r.opts.Coordinator {
				err = p.producers.checkEpoch(h)
			} else if r.opts.OngoingTxn && h.Transactional() && !p.producers.ongoing(h.ProducerID, h.ProducerEpoch) {
				err = fmt.Errorf("%w: producer %d at epoch %d has no transaction open on %s-%d and its batch was not verified by the coordinator",
					ErrInvalidTxnState, h.ProducerID, h.ProducerEpoch, p.tp.Topic, p.tp.Partition)
			} else {
				dup, err = p.producers.check(h)
			}
			if err != nil || dup != nil {
				break
			}
		}
		if err != nil || dup != nil {
			st.Truncate(mark)
		}
		switch {
		case err != nil:
			r.done(AppendResult{}, err)
			continue
		case dup != nil:
			res := AppendResult{BaseOffset: dup.firstOffset, LogAppendTime: -1, LogStartOffset: logStart, Duplicate: true}
			if !p.topic.config.LogAppendTime {
				// Kafka answers a duplicate with the timestamp its
				// producer state kept, the original batch's max
				// timestamp, as log_append_time even for CreateTime
				// topics (internal/difftest). For LogAppendTime topics
				// Kafka keeps the append time, which the state here does
				// not (it holds the producer's timestamp): -1 stays.
				res.LogAppendTime = dup.timestamp
			}
			if r.opts.RequireISR {
				// The original may not be committed yet: the retry
				// waits for it as the original would have (Kafka's
				// DelayedProduce does the same).
				r.written()
				p.parkAck(dup.lastOffset+1, pendingAck{res: res, done: r.done})
			} else {
				r.done(res, nil)
			}
			continue
		}
		r.base = next
		for i, h := range r.hdrs {
			if a := p.producers.update(h, next, r.marker(i), true); a != nil {
				r.aborted = append(r.aborted, *a)
			}
			next += int64(h.LastOffsetDelta) + 1
		}
		r.end = next
		accepted = append(accepted, r)
	}
	if len(accepted) == 0 {
		st.Release()
		return nil
	}
	// Before the write can be seen, replicated and covered by the high
	// watermark: the transactions it opens hold the LSO from now on.
	p.publishTxns()
	t, err := p.log().PrepareStaged(st, segment.AppendOptions{
		LeaderEpoch:   p.leaderEpoch.Load(),
		LogAppendTime: p.topic.config.LogAppendTime,
	})
	if err == nil && t.Result.BaseOffset != leo {
		err = fmt.Errorf("engine: log assigned offset %d, expected %d", t.Result.BaseOffset, leo)
	}
	if err != nil {
		p.producers.rollback()
		p.publishTxns()
		// Offline before anyone is answered: a retry finds it so.
		s.checkDisk(p, err)
		for _, r := range accepted {
			r.done(AppendResult{}, storageError(err))
		}
		return nil
	}
	t.Ctx = accepted
	p.task = t
	return t
}

// admit answers the requests that p's role does not allow (producer
// appends need a leader, replica appends a follower) and returns the rest,
// which are then all of one kind (replicated engine, shard only).
func (p *partition) admit(reqs []*appendReq) []*appendReq {
	role := Role(p.role.Load())
	ok := reqs[:0:0]
	for _, r := range reqs {
		switch {
		case r.replica == nil && role != RoleLeader:
			r.fail(fmt.Errorf("%w: %s-%d is %s", ErrNotLeader, p.tp.Topic, p.tp.Partition, role))
		case r.replica != nil && role != RoleFollower:
			r.fail(fmt.Errorf("%w: %s-%d is %s", ErrNotFollower, p.tp.Topic, p.tp.Partition, role))
		default:
			ok = append(ok, r)
		}
	}
	return ok
}

// roundCtx returns the requests of p's append in flight.
func (p *partition) roundCtx() ([]*appendReq, bool) {
	if p.task == nil {
		return nil, false
	}
	rc, ok := p.task.Ctx.([]*appendReq)
	p.task = nil
	return rc, ok
}

// finish answers the requests of a completed append.
func (s *shard) finish(t *segment.Task) {
	reqs := t.Ctx.([]*appendReq)
	p := reqs[0].p
	p.task = nil
	if t.Err != nil {
		p.producers.rollback()
		p.publishTxns()
		s.checkDisk(p, t.Err)
		for _, r := range reqs {
			r.fail(storageError(t.Err))
		}
		return
	}
	if err := p.offlineErr(); err != nil {
		// Taken offline while the write was in flight (a background sync
		// of the same log failed): nothing on it is acknowledged.
		p.producers.rollback()
		p.publishTxns()
		for _, r := range reqs {
			r.fail(err)
		}
		return
	}
	// A roll is the moment Kafka snapshots producer state: recovery then
	// replays at most the active segment. The snapshot is of the state
	// before this round, as of its first offset, the new segment's base
	// (the roll was made for the round's first batch), so that a crash
	// before the next roll replays exactly the active segment and can
	// rebuild its transaction index.
	var snapshot []byte
	if base := p.log().ActiveBase(); base != p.snapshotBase {
		p.snapshotBase = base
		snapshot = encodeSnapshot(p.producers.beforeRound(), reqs[0].base)
	}
	p.producers.commit()
	var abortErr error
	for _, r := range reqs {
		if abortErr = p.writeAborted(r); abortErr != nil {
			break
		}
	}
	if abortErr != nil {
		// The markers are written but an aborted transaction is not in
		// the index: the log stopped itself, and the partition goes
		// offline rather than let a read_committed consumer read aborted
		// records as committed. Recovery rebuilds the index.
		s.e.log.Error("aborted transaction index", "partition", p.dir, "err", abortErr)
		s.checkDisk(p, abortErr)
		s.takeOffline(p, abortErr) // an index out of order stops it too
		for _, r := range reqs {
			r.fail(storageError(abortErr))
		}
		return
	}
	p.publishTxns()
	leo := p.log().LEO()
	// Followers long-poll for what the leader wrote, committed or not:
	// wake the waiters. A consumer's finds nothing new below the high
	// watermark and waits on.
	p.notify()
	if s.e.cfg.OnAppended == nil {
		// No replication layer: the partition is alone in its ISR, so
		// what is written is committed, before anyone is answered.
		p.setHW(leo)
	} else {
		// Before anyone is answered: with a single in-sync replica the
		// layer moves the high watermark now, so that an acks=1 producer
		// finds its records committed (ListOffsets latest, a consumer),
		// as Kafka's leader does in its append path.
		s.e.cfg.OnAppended(p.tp, leo)
	}
	res := AppendResult{LogAppendTime: t.Result.LogAppendTime, LogStartOffset: p.log().LogStartOffset()}
	for _, r := range reqs {
		switch {
		case r.replica != nil:
			r.replica(r.end, nil)
		case r.opts.RequireISR:
			res.BaseOffset = r.base
			r.written()
			p.parkAck(r.end, pendingAck{res: res, done: r.done})
		default:
			res.BaseOffset = r.base
			r.done(res, nil)
		}
	}
	if snapshot != nil {
		if err := fsutil.WriteFileAtomic(p.dir, snapshotFile, snapshot); err != nil {
			s.e.log.Error("producer snapshot", "partition", p.dir, "err", err)
			s.checkDisk(p, err)
		}
	}
}

// reqsSize is the size of the batches of reqs.
func reqsSize(reqs []*appendReq) int64 {
	var n int64
	for _, r := range reqs {
		for _, b := range r.batches {
			n += int64(len(b))
		}
	}
	return n
}

// stage takes r's batches into st, each checked there: a producer's by
// checkProduced, a follower's as stored batches (intact; a leader's
// batches may have been compacted). On a failure nothing of r is taken and
// the error is r's answer.
func (r *appendReq) stage(st *segment.Staging, nowMs int64) error {
	mark := st.Len()
	var check func([]byte, uint32) error
	switch {
	case r.produced:
		cfg := &r.p.topic.config
		keys := cfg.Log.Cleanup.Compacts() && !r.internal
		check = func(b []byte, sum uint32) error { return checkProduced(cfg, b, sum, nowMs, keys) }
	case r.replica != nil:
		check = checkReplica
	}
	for _, b := range r.batches {
		if _, err := st.Add(b, check); err != nil {
			st.Truncate(mark)
			if errors.Is(err, segment.ErrStagingFull) {
				return storageError(err)
			}
			return err
		}
	}
	return nil
}

// checkProduced makes every check of a producer's batch, on the bytes the
// log will write: its size against max.message.bytes, the CRC (sum is the
// batch's Checksum) and every record, walked once (as Kafka's
// LogValidator does, a compressed batch is inflated, bounded, so that no
// corrupt record is stored for consumers to choke on); the timestamp
// rules, from the walk's bounds; with keys (a compacted topic's producer),
// a key for every record.
func checkProduced(cfg *TopicConfig, b []byte, sum uint32, nowMs int64, keys bool) error {
	// Kafka's order, batch by batch: the size, then the CRC.
	if int64(len(b)) > cfg.Log.MaxMessageBytes {
		return fmt.Errorf("%w: batch of %d bytes, max.message.bytes %d", segment.ErrBatchTooBig, len(b), cfg.Log.MaxMessageBytes)
	}
	h, ts, err := batch.ValidateProducedSum(b, maxDecompressed, sum)
	if err != nil {
		return fmt.Errorf("%w: %w", segment.ErrInvalidBatch, err)
	}
	if err := checkTimestamps(cfg, h, b, ts, nowMs); err != nil {
		return err
	}
	if keys {
		return keyed(h, b)
	}
	return nil
}

// checkReplica checks a follower's batch as stored (sum is its Checksum).
func checkReplica(b []byte, sum uint32) error {
	if _, err := batch.ValidateSum(b, batch.Stored, sum); err != nil {
		return fmt.Errorf("%w: replica batch: %w", segment.ErrInvalidBatch, err)
	}
	return nil
}
