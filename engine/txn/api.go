package txn

import (
	"errors"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
)

// The requests the coordinator serves, as Kafka's TransactionCoordinator
// handles them. Each checks everything first, then prepares one
// transition and writes it; the answer leaves once the write is
// acknowledged (or refused).

// errCode is the code for an internal error: a transition the state
// machine refused is a bug of ours.
func errCode(error) int16 { return kerr.UnknownServerError.Code }

// allocErrorCode maps a failed producer id allocation: a broker waiting
// for a block from the quorum answers COORDINATOR_LOAD_IN_PROGRESS, as
// Kafka does (older clients take REQUEST_TIMED_OUT as fatal).
func allocErrorCode(err error) int16 {
	if errors.Is(err, engine.ErrNoProducerIDBlock) {
		return kerr.CoordinatorLoadInProgress.Code
	}
	return kerr.UnknownServerError.Code
}

// InitProducerID is InitProducerId with a transactional id: the id's
// producer id (a new one the first time) at a bumped epoch, which fences
// every older instance of the producer. expectedID and expectedEpoch are
// KIP-360's producer id and epoch from the request (-1: none), by which a
// producer recovers from an error keeping its id. An ongoing transaction
// is aborted first (its producer fenced), and the answer is then
// CONCURRENT_TRANSACTIONS: the client retries and gets the next epoch.
func (c *Coordinator) InitProducerID(id string, timeoutMs int32, expectedID int64, expectedEpoch int16, reply func(code int16, producerID int64, epoch int16)) {
	fail := func(code int16) { reply(code, -1, -1) }
	switch {
	case c == nil:
		fail(kerr.CoordinatorNotAvailable.Code)
		return
	case id == "":
		fail(kerr.InvalidRequest.Code)
		return
	case timeoutMs <= 0 || int64(timeoutMs) > c.cfg.MaxTimeout.Milliseconds():
		fail(kerr.InvalidTransactionTimeout.Code)
		return
	}
	c.onID(id, func(p *partition) {
		p.initProducerID(id, timeoutMs, expectedID, expectedEpoch, -1, reply)
	}, fail)
}

// withNewProducerID allocates a producer id off the shard (the allocator
// may wait on the quorum), then runs fn on p's shard with it if the
// partition still serves.
func (p *partition) withNewProducerID(fail func(code int16), fn func(id int64)) {
	go func() {
		id, err := p.c.cfg.AllocateProducerID()
		if err != nil {
			p.c.log.Warn("transaction coordinator: allocate producer id", "err", err)
			fail(allocErrorCode(err))
			return
		}
		p.c.onPartition(p, func(*partition) { fn(id) }, fail)
	}()
}

func (p *partition) initProducerID(id string, timeoutMs int32, expectedID int64, expectedEpoch int16, newID int64, reply func(int16, int64, int16)) {
	fail := func(code int16) { reply(code, -1, -1) }
	retry := func() {
		p.withNewProducerID(fail, func(newID int64) {
			p.initProducerID(id, timeoutMs, expectedID, expectedEpoch, newID, reply)
		})
	}
	now := time.Now().UnixMilli()
	m := p.txns[id]
	if m == nil {
		if newID < 0 {
			retry()
			return
		}
		m = newTxnMeta(id, newID, timeoutMs, now)
		p.txns[id] = m
		newID = -1
	}
	hasExpected := expectedID >= 0
	again := func(p *partition) { p.initProducerID(id, timeoutMs, expectedID, expectedEpoch, -1, reply) }
	if m.pending != nil {
		p.whenSettled(m, again, fail)
		return
	}
	if hasExpected && !(m.epoch == -1 || expectedID == m.producerID || (expectedID == m.prevProducerID && epochExhausted(expectedEpoch))) {
		fail(kerr.ProducerFenced.Code)
		return
	}
	var t *transit
	switch m.state {
	case statePrepareCommit, statePrepareAbort:
		p.whenSettled(m, again, fail)
		return
	case stateOngoing:
		// Fence the current producer and abort its transaction, then
		// go on once the abort completed (or answer
		// CONCURRENT_TRANSACTIONS, which the client retries).
		p.fenceAndAbort(m, func(code int16) {
			if code != 0 {
				fail(code)
				return
			}
			p.whenSettled(m, again, fail)
		})
		return
	case stateEmpty, stateCompleteCommit, stateCompleteAbort:
		var err error
		if epochExhausted(m.epoch) && (!hasExpected || expectedEpoch == m.epoch) {
			if newID < 0 {
				retry()
				return
			}
			t, err = m.prepareRotate(newID, timeoutMs, now, hasExpected)
		} else {
			var code int16
			t, code, err = m.prepareIncrementEpoch(timeoutMs, expectedEpoch, hasExpected, now)
			if code != 0 {
				fail(code)
				return
			}
		}
		if err != nil {
			p.c.log.Error("transaction coordinator: init producer id", "err", err)
			fail(errCode(err))
			return
		}
	default:
		p.c.log.Error("transaction coordinator: transactional id in a state it cannot be in", "id", id, "state", m.state)
		fail(kerr.UnknownServerError.Code)
		return
	}
	p.write(m, t, func(code int16) {
		if code != 0 {
			fail(code)
			return
		}
		p.c.log.Info("transaction coordinator: initialized", "id", id, "producer_id", m.producerID, "epoch", m.epoch, "partition", p.tp.Partition)
		reply(0, m.producerID, m.epoch)
	})
}

// checkProducer is the check every call of a producer on its transaction
// starts with.
func (m *txnMeta) checkProducer(producerID int64, epoch int16) int16 {
	switch {
	case m == nil || m.producerID != producerID:
		return kerr.InvalidProducerIDMapping.Code
	case m.epoch != epoch:
		return kerr.ProducerFenced.Code
	}
	return 0
}

// AddPartitions is AddPartitionsToTxn: the partitions join the producer's
// transaction (it becomes Ongoing). reply gets one code for all of them.
func (c *Coordinator) AddPartitions(id string, producerID int64, epoch int16, tps []engine.TP, reply func(code int16)) {
	if c != nil && id == "" {
		reply(kerr.InvalidRequest.Code)
		return
	}
	c.onID(id, func(p *partition) { p.addPartitions(id, producerID, epoch, tps, reply) }, reply)
}

func (p *partition) addPartitions(id string, producerID int64, epoch int16, tps []engine.TP, reply func(code int16)) {
	m := p.txns[id]
	if code := m.checkProducer(producerID, epoch); code != 0 {
		reply(code)
		return
	}
	switch {
	case !m.settled():
		p.whenSettled(m, func(p *partition) { p.addPartitions(id, producerID, epoch, tps, reply) }, reply)
		return
	case m.state == stateOngoing && m.holds(tps):
		reply(0)
		return
	case len(m.partitions)+len(tps) > maxPartitionsPerTxn:
		reply(kerr.InvalidRequest.Code)
		return
	}
	t, err := m.prepareAddPartitions(tps, time.Now().UnixMilli())
	if err != nil {
		p.c.log.Error("transaction coordinator: add partitions", "err", err)
		reply(errCode(err))
		return
	}
	p.write(m, t, reply)
}

func (m *txnMeta) holds(tps []engine.TP) bool {
	for _, tp := range tps {
		if _, ok := m.partitions[tp]; !ok {
			return false
		}
	}
	return true
}

// VerifyPartitions is AddPartitionsToTxn with verify_only (KIP-890 part
// 1): a partition leader asks whether a transactional produce's partition
// is in the producer's transaction. It writes nothing. reply gets a code
// for the whole transaction, or 0 and a code per partition (0, or
// TRANSACTION_ABORTABLE for a partition not added).
func (c *Coordinator) VerifyPartitions(id string, producerID int64, epoch int16, tps []engine.TP, reply func(code int16, per []int16)) {
	if c != nil && id == "" {
		reply(kerr.InvalidRequest.Code, nil)
		return
	}
	fail := func(code int16) { reply(code, nil) }
	var verify func(p *partition)
	verify = func(p *partition) {
		m := p.txns[id]
		if code := m.checkProducer(producerID, epoch); code != 0 {
			reply(code, nil)
			return
		}
		if m.state == statePrepareCommit || m.state == statePrepareAbort {
			p.whenSettled(m, verify, fail)
			return
		}
		per := make([]int16, len(tps))
		for i, tp := range tps {
			if _, ok := m.partitions[tp]; !ok || m.state != stateOngoing {
				per[i] = kerr.TransactionAbortable.Code
			}
		}
		reply(0, per)
	}
	c.onID(id, verify, fail)
}

// AddOffsets is AddOffsetsToTxn: the partition of __consumer_offsets that
// holds groupID joins the transaction, so that the transaction's offset
// commits get its markers.
func (c *Coordinator) AddOffsets(id string, producerID int64, epoch int16, groupID string, reply func(code int16)) {
	if c == nil {
		reply(kerr.CoordinatorNotAvailable.Code)
		return
	}
	tp := engine.TP{Topic: "__consumer_offsets", Partition: c.cfg.OffsetsPartitionFor(groupID)}
	c.AddPartitions(id, producerID, epoch, []engine.TP{tp}, reply)
}

// EndTxn ends the producer's transaction: PrepareCommit or PrepareAbort is
// written, the answer leaves, and the markers are written to every
// partition of the transaction, then the completion. version is the
// EndTxn request's: from v5 the client speaks transactions v2 (KIP-890
// part 2) and every end bumps the producer's epoch, which the answer
// carries.
func (c *Coordinator) EndTxn(id string, producerID int64, epoch int16, commit bool, version int16, reply func(code int16, producerID int64, epoch int16)) {
	fail := func(code int16) { reply(code, -1, -1) }
	if c != nil && id == "" {
		fail(kerr.InvalidRequest.Code)
		return
	}
	clientTV := tv0
	if version >= 5 {
		clientTV = tv2
	}
	c.onID(id, func(p *partition) { p.endTxn(id, producerID, epoch, commit, clientTV, -1, reply) }, fail)
}

func (p *partition) endTxn(id string, producerID int64, epoch int16, commit bool, clientTV int16, nextID int64, reply func(int16, int64, int16)) {
	fail := func(code int16) { reply(code, -1, -1) }
	m := p.txns[id]
	if m == nil {
		fail(kerr.InvalidProducerIDMapping.Code)
		return
	}
	v2 := supportsEpochBump(m.clientTV)
	retryOnOverflow := v2 && m.prevProducerID == producerID && epoch == math.MaxInt16-1 && m.epoch == 0
	retryOnBump := v2 && m.epoch == epoch+1
	retry := retryOnBump || retryOnOverflow
	validEpoch := epoch == m.epoch
	if v2 {
		switch m.state {
		case statePrepareCommit, statePrepareAbort:
			validEpoch = retryOnBump
		case stateCompleteCommit, stateCompleteAbort:
			validEpoch = retry || epoch == m.epoch
		}
	}
	// A transactions v2 client may abort a transaction that holds
	// nothing (its produces all failed, say): the epoch is bumped so that
	// nothing of it can land later, and no marker is needed.
	emptyAbort := !commit && supportsEpochBump(clientTV) && !retry
	want := statePrepareAbort
	done := stateCompleteAbort
	if commit {
		want, done = statePrepareCommit, stateCompleteCommit
	}
	switch {
	case m.producerID != producerID && !retryOnOverflow:
		fail(kerr.InvalidProducerIDMapping.Code)
		return
	case !m.settled():
		// A transition is being written, or the markers of the last end
		// (Kafka has its completion pending then). Before the epoch check
		// (KAFKA-18464): a v2 client whose commit was just answered at a
		// bumped epoch and that aborts at once must wait for the commit
		// to complete, not be fenced by it.
		p.whenSettled(m, func(p *partition) { p.endTxn(id, producerID, epoch, commit, clientTV, nextID, reply) }, fail)
		return
	case !validEpoch:
		fail(kerr.ProducerFenced.Code)
		return
	}
	switch {
	case m.state == stateOngoing:
	case m.state == done && (retry || !v2):
		// A retry of an end that completed.
		reply(0, m.producerID, m.epoch)
		return
	case emptyAbort && (m.state == stateEmpty || m.state == stateCompleteCommit || m.state == stateCompleteAbort):
	default:
		fail(kerr.InvalidTxnState.Code)
		return
	}
	if supportsEpochBump(clientTV) && epochExhausted(m.epoch) && nextID < 0 {
		p.withNewProducerID(fail, func(nextID int64) {
			p.endTxn(id, producerID, epoch, commit, clientTV, nextID, reply)
		})
		return
	}
	if !supportsEpochBump(clientTV) || !epochExhausted(m.epoch) {
		nextID = -1
	}
	t, err := m.prepareEnd(want, clientTV, nextID, time.Now().UnixMilli())
	if err != nil {
		p.c.log.Error("transaction coordinator: end transaction", "err", err)
		fail(errCode(err))
		return
	}
	p.write(m, t, func(code int16) {
		if code != 0 {
			fail(code)
			return
		}
		reply(0, m.producerID, m.epoch)
		p.sendMarkers(m)
	})
}

// Describe is DescribeTransactions: the state of each id, as far as this
// broker coordinates it.
func (c *Coordinator) Describe(ids []string, reply func([]kmsg.DescribeTransactionsResponseTransactionState)) {
	out := make([]kmsg.DescribeTransactionsResponseTransactionState, len(ids))
	g := newGather(func() { reply(out) })
	for i, id := range ids {
		s := &out[i]
		*s = kmsg.NewDescribeTransactionsResponseTransactionState()
		// An error answer leaves producer id, epoch and start time 0, as
		// Kafka's coordinator does (the schema's defaults; found by
		// difftest's TestACLs).
		s.TransactionalID = id
		if id == "" || c == nil {
			s.ErrorCode = kerr.InvalidRequest.Code
			if c == nil {
				s.ErrorCode = kerr.CoordinatorNotAvailable.Code
			}
			continue
		}
		g.add()
		c.onID(id, func(p *partition) {
			defer g.done()
			m := p.txns[id]
			if m == nil || m.state == stateDead {
				s.ErrorCode = kerr.TransactionalIDNotFound.Code
				return
			}
			s.ProducerID, s.ProducerEpoch, s.State = m.producerID, m.epoch, m.state.String()
			s.TimeoutMillis, s.StartTimestamp = m.timeoutMs, m.startMs
			for _, tp := range sortedPartitions(m.partitions) {
				if n := len(s.Topics); n > 0 && s.Topics[n-1].Topic == tp.Topic {
					s.Topics[n-1].Partitions = append(s.Topics[n-1].Partitions, tp.Partition)
					continue
				}
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
				s.Topics = append(s.Topics, t)
			}
		}, func(code int16) { s.ErrorCode = code; g.done() })
	}
	g.done()
}

// ListFilter is ListTransactions' filters: states by name, producer ids,
// and (v1, KIP-994) transactions whose last start is more than DurationMs
// ago (-1: any).
type ListFilter struct {
	States      []string
	ProducerIDs []int64
	DurationMs  int64
}

// List is ListTransactions over the partitions this broker coordinates.
// A partition still loading makes the answer COORDINATOR_LOAD_IN_PROGRESS,
// as in Kafka; unknown state names are reported back.
func (c *Coordinator) List(f ListFilter, reply func(*kmsg.ListTransactionsResponse)) {
	resp := kmsg.NewPtrListTransactionsResponse()
	states := map[kmsg.TransactionState]bool{}
	for _, name := range f.States {
		s, err := kmsg.ParseTransactionState(name)
		if err != nil || s.String() != name {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		states[s] = true
	}
	if len(f.States) > 0 && len(states) == 0 {
		reply(resp) // every filter unknown: nothing can match
		return
	}
	pids := map[int64]bool{}
	for _, id := range f.ProducerIDs {
		pids[id] = true
	}
	if c == nil || c.closed.Load() {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		reply(resp)
		return
	}
	type part struct {
		loading bool
		txns    []kmsg.ListTransactionsResponseTransactionState
	}
	parts := make([]part, len(c.parts))
	g := newGather(func() {
		for _, pt := range parts {
			if pt.loading {
				resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			}
			resp.TransactionStates = append(resp.TransactionStates, pt.txns...)
		}
		if resp.ErrorCode != 0 {
			resp.TransactionStates = nil
		}
		reply(resp)
	})
	for i, p := range c.parts {
		g.add()
		if err := c.eng.OnShard(p.tp, func() {
			defer g.done()
			switch p.state {
			case partLoading:
				parts[i].loading = true
				return
			case partLoaded:
			default:
				return
			}
			now := time.Now().UnixMilli()
			for _, m := range p.txns {
				if (len(states) > 0 && !states[m.state]) || (len(pids) > 0 && !pids[m.producerID]) || m.state == stateDead {
					continue
				}
				// Kafka's filter (TransactionStateManager): whatever the
				// state, a transaction is listed when its last start is more
				// than the duration ago; a completed one keeps its last
				// start, an Empty one has none (-1) and is always listed.
				if f.DurationMs >= 0 && now-m.startMs <= f.DurationMs {
					continue
				}
				t := kmsg.NewListTransactionsResponseTransactionState()
				t.TransactionalID, t.ProducerID, t.TransactionState = m.id, m.producerID, m.state.String()
				parts[i].txns = append(parts[i].txns, t)
			}
		}); err != nil {
			g.done() // a partition this broker hosts no replica of
		}
	}
	g.done()
}
