package txn

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
)

// The state machine of one transactional id, as Kafka's
// TransactionMetadata has it (see doc.go for the drawing). It is pure: the
// coordinator prepares a transition (a transit), writes it to the log,
// and completes it once the write is acknowledged; nothing here touches a
// shard, a clock or the log.

// States, Kafka's ids (TransactionLogValue's TransactionStatus).
const (
	stateEmpty             = kmsg.TransactionStateEmpty
	stateOngoing           = kmsg.TransactionStateOngoing
	statePrepareCommit     = kmsg.TransactionStatePrepareCommit
	statePrepareAbort      = kmsg.TransactionStatePrepareAbort
	stateCompleteCommit    = kmsg.TransactionStateCompleteCommit
	stateCompleteAbort     = kmsg.TransactionStateCompleteAbort
	stateDead              = kmsg.TransactionStateDead
	statePrepareEpochFence = kmsg.TransactionStatePrepareEpochFence
)

// validPrevious is, for each state, the states it may be entered from
// (Kafka's validPreviousStates).
var validPrevious = map[kmsg.TransactionState][]kmsg.TransactionState{
	stateEmpty:         {stateEmpty, stateCompleteCommit, stateCompleteAbort},
	stateOngoing:       {stateOngoing, stateEmpty, stateCompleteCommit, stateCompleteAbort},
	statePrepareCommit: {stateOngoing},
	// Transactions v2 (KIP-890 part 2, Kafka 4.1) may abort an empty
	// transaction, to bump the epoch: from Empty or a completed one.
	statePrepareAbort:      {stateOngoing, statePrepareEpochFence, stateEmpty, stateCompleteCommit, stateCompleteAbort},
	stateCompleteCommit:    {statePrepareCommit},
	stateCompleteAbort:     {statePrepareAbort},
	stateDead:              {stateEmpty, stateCompleteCommit, stateCompleteAbort},
	statePrepareEpochFence: {stateOngoing},
}

func validTransition(from, to kmsg.TransactionState) bool {
	for _, s := range validPrevious[to] {
		if s == from {
			return true
		}
	}
	return false
}

// Transaction versions (Kafka's TransactionVersion feature levels): TV_2
// (KIP-890 part 2) bumps the producer epoch at every EndTxn. A client's
// version comes from the EndTxn version it speaks: v5 and above is TV_2.
const (
	tv0 int16 = 0
	tv2 int16 = 2
)

func supportsEpochBump(tv int16) bool { return tv >= tv2 }

// epochExhausted: the coordinator never hands out math.MaxInt16, so that it
// can always fence a producer by bumping its epoch once more.
func epochExhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// txnMeta is one transactional id's state. Everything in it is touched
// only on the shard that owns its partition of __transaction_state.
type txnMeta struct {
	id string
	// producerID and epoch are the producer's current ones;
	// prevProducerID the one before a rotation (KIP-360, KIP-890: a retry
	// of the call that rotated it is recognised), nextProducerID the one a
	// TV_2 end of transaction rotates to once its markers are written.
	producerID, prevProducerID, nextProducerID int64
	epoch                                      int16
	// lastEpoch is the epoch before the last bump (-1: none), so that a
	// retried InitProducerId of KIP-360 or EndTxn of TV_2 is recognised.
	// Kafka does not write it to the log; neither does ringlog.
	lastEpoch int16
	timeoutMs int32
	state     kmsg.TransactionState
	// partitions are the partitions the transaction wrote to (or will:
	// AddPartitionsToTxn comes first), markers go to each.
	partitions       map[engine.TP]struct{}
	startMs          int64 // -1: no transaction since the last InitProducerId
	updateMs         int64
	clientTV         int16
	failedEpochFence bool // an epoch fence whose write failed: the next one does not bump again

	// pending is the transition being written (Kafka's pendingState): no
	// other transition starts meanwhile (CONCURRENT_TRANSACTIONS).
	pending *transit
	// markers is set while the markers of a PrepareCommit or PrepareAbort
	// are being written; its number tells a stale completion apart.
	markers uint64
	// waiters are calls that met a pending transition or a transaction
	// being ended, parked until it settles (see whenSettled).
	waiters []*waiter
}

// settled: no transition is being written and no transaction is between
// its end and its completion, so a call may go on.
func (m *txnMeta) settled() bool {
	return m.pending == nil && m.state != statePrepareCommit && m.state != statePrepareAbort
}

// transit is a transition to write (Kafka's TxnTransitMetadata).
type transit struct {
	producerID, prevProducerID, nextProducerID int64
	epoch, lastEpoch                           int16
	timeoutMs                                  int32
	state                                      kmsg.TransactionState
	partitions                                 []engine.TP // sorted
	startMs, updateMs                          int64
	clientTV                                   int16
}

func newTxnMeta(id string, producerID int64, timeoutMs int32, nowMs int64) *txnMeta {
	return &txnMeta{id: id, producerID: producerID, prevProducerID: -1, nextProducerID: -1, epoch: -1, lastEpoch: -1,
		timeoutMs: timeoutMs, state: stateEmpty, startMs: -1, updateMs: nowMs}
}

// prepare makes the transit to state with the given fields; the caller
// sets pending. It returns an error (a bug of ours) for a transition the
// state machine does not have.
func (m *txnMeta) prepare(state kmsg.TransactionState, producerID, nextProducerID int64, epoch, lastEpoch int16,
	timeoutMs int32, partitions []engine.TP, startMs, nowMs int64, clientTV int16) (*transit, error) {
	if m.pending != nil {
		return nil, fmt.Errorf("txn: %s: transition to %v while %v is pending", m.id, state, m.pending.state)
	}
	if producerID < 0 || (state != stateDead && epoch < 0) {
		return nil, fmt.Errorf("txn: %s: transition to %v with producer %d epoch %d", m.id, state, producerID, epoch)
	}
	if !validTransition(m.state, state) {
		return nil, fmt.Errorf("txn: %s: no transition from %v to %v", m.id, m.state, state)
	}
	return &transit{producerID: producerID, prevProducerID: m.producerID, nextProducerID: nextProducerID, epoch: epoch,
		lastEpoch: lastEpoch, timeoutMs: timeoutMs, state: state, partitions: partitions, startMs: startMs,
		updateMs: nowMs, clientTV: clientTV}, nil
}

// prepareFenceAbort fences the producer of an ongoing transaction (an
// InitProducerId from a new instance, or the transaction's timeout) and
// aborts the transaction at the bumped epoch: Kafka's PrepareEpochFence,
// which is never written, followed by PrepareAbort. The bump is made in
// memory at once, so that the old producer is refused from now on; a fence
// whose write fails is not bumped again by the next one (the bumped epoch
// was never handed out).
func (m *txnMeta) prepareFenceAbort(nowMs int64) (*transit, error) {
	if m.epoch == math.MaxInt16 {
		return nil, fmt.Errorf("txn: %s: cannot fence producer %d at epoch %d", m.id, m.producerID, m.epoch)
	}
	if m.pending != nil {
		return nil, fmt.Errorf("txn: %s: fence while %v is pending", m.id, m.pending.state)
	}
	if !m.failedEpochFence {
		m.epoch++
	}
	m.lastEpoch = -1
	return m.prepare(statePrepareAbort, m.producerID, -1, m.epoch, -1, m.timeoutMs, sortedPartitions(m.partitions),
		m.startMs, nowMs, tv0)
}

// prepareIncrementEpoch is InitProducerId's bump of an idle producer's
// epoch. expected is KIP-360's producer epoch from the request (-1: none):
// the current epoch (a producer recovering, bumped), the last one (a
// retry of a bump it never heard of, not bumped again), or anything else
// (another instance bumped since: PRODUCER_FENCED).
func (m *txnMeta) prepareIncrementEpoch(timeoutMs int32, expected int16, hasExpected bool, nowMs int64) (_ *transit, code int16, _ error) {
	if epochExhausted(m.epoch) {
		return nil, 0, fmt.Errorf("txn: %s: producer %d has no epoch left", m.id, m.producerID)
	}
	epoch, last := m.epoch+1, int16(-1)
	if hasExpected {
		switch {
		case m.epoch == -1 || expected == m.epoch:
			last = m.epoch
		case expected == m.lastEpoch:
			epoch, last = m.epoch, m.lastEpoch
		default:
			return nil, kerr.ProducerFenced.Code, nil
		}
	}
	t, err := m.prepare(stateEmpty, m.producerID, -1, epoch, last, timeoutMs, nil, -1, nowMs, tv0)
	return t, 0, err
}

// prepareRotate gives the id a new producer id at epoch 0 (the old one's
// epochs are exhausted).
func (m *txnMeta) prepareRotate(newProducerID int64, timeoutMs int32, nowMs int64, recordLastEpoch bool) (*transit, error) {
	last := int16(-1)
	if recordLastEpoch {
		last = m.epoch
	}
	return m.prepare(stateEmpty, newProducerID, -1, 0, last, timeoutMs, nil, -1, nowMs, tv0)
}

// prepareAddPartitions adds partitions (AddPartitionsToTxn, AddOffsetsToTxn):
// the transaction is Ongoing, and starts now unless it already had.
func (m *txnMeta) prepareAddPartitions(add []engine.TP, nowMs int64) (*transit, error) {
	start := m.startMs
	switch m.state {
	case stateEmpty, stateCompleteCommit, stateCompleteAbort:
		start = nowMs
	}
	set := make(map[engine.TP]struct{}, len(m.partitions)+len(add))
	for tp := range m.partitions {
		set[tp] = struct{}{}
	}
	for _, tp := range add {
		set[tp] = struct{}{}
	}
	return m.prepare(stateOngoing, m.producerID, -1, m.epoch, m.lastEpoch, m.timeoutMs, sortedPartitions(set), start, nowMs, m.clientTV)
}

// prepareEnd is EndTxn's PrepareCommit or PrepareAbort. A TV_2 client's
// epoch is bumped here (KIP-890): once the markers are written, nothing of
// the ended transaction's epoch can land in a later one. nextProducerID is
// the producer id to move to when the bumped epoch is exhausted (-1: none).
func (m *txnMeta) prepareEnd(state kmsg.TransactionState, clientTV int16, nextProducerID, nowMs int64) (*transit, error) {
	epoch, last := m.epoch, m.lastEpoch
	if supportsEpochBump(clientTV) {
		epoch, last = m.epoch+1, m.epoch
	}
	return m.prepare(state, m.producerID, nextProducerID, epoch, last, m.timeoutMs, sortedPartitions(m.partitions),
		m.startMs, nowMs, clientTV)
}

// prepareComplete is CompleteCommit or CompleteAbort, once every marker is
// written. A TV_2 transaction whose bumped epoch is exhausted moves to its
// next producer id at epoch 0 now.
func (m *txnMeta) prepareComplete(nowMs int64) (*transit, error) {
	state := stateCompleteAbort
	if m.state == statePrepareCommit {
		state = stateCompleteCommit
	}
	m.failedEpochFence = false
	pid, epoch := m.producerID, m.epoch
	if supportsEpochBump(m.clientTV) && m.nextProducerID >= 0 {
		pid, epoch = m.nextProducerID, 0
	}
	return m.prepare(state, pid, -1, epoch, m.epoch, m.timeoutMs, nil, m.startMs, nowMs, m.clientTV)
}

// prepareDead is the expiry of an idle transactional id (a tombstone).
func (m *txnMeta) prepareDead(nowMs int64) (*transit, error) {
	return m.prepare(stateDead, m.producerID, -1, m.epoch, m.lastEpoch, m.timeoutMs, nil, m.startMs, nowMs, m.clientTV)
}

// complete applies a transit whose write was acknowledged (Kafka's
// completeTransitionTo, with its checks: a mismatch is a bug of ours).
func (m *txnMeta) complete(t *transit) error {
	if m.pending != t {
		return fmt.Errorf("txn: %s: completing %v, which is not the pending transition", m.id, t.state)
	}
	switch t.state {
	case stateEmpty:
		m.timeoutMs, m.epoch, m.lastEpoch, m.producerID = t.timeoutMs, t.epoch, t.lastEpoch, t.producerID
		m.prevProducerID = t.prevProducerID
		m.partitions, m.startMs = nil, -1
	case stateOngoing:
		m.startMs = t.startMs
		m.partitions = make(map[engine.TP]struct{}, len(t.partitions))
		for _, tp := range t.partitions {
			m.partitions[tp] = struct{}{}
		}
	case statePrepareCommit, statePrepareAbort:
		if supportsEpochBump(t.clientTV) {
			m.epoch, m.lastEpoch, m.nextProducerID = t.epoch, t.lastEpoch, t.nextProducerID
		} else {
			// An abort after an epoch fence carries the fenced epoch.
			m.epoch = t.epoch
		}
	case stateCompleteCommit, stateCompleteAbort:
		m.startMs = t.startMs
		m.partitions = nil
		if supportsEpochBump(t.clientTV) {
			m.epoch, m.lastEpoch, m.prevProducerID, m.producerID, m.nextProducerID = t.epoch, t.lastEpoch, t.prevProducerID, t.producerID, -1
		}
	default:
		return fmt.Errorf("txn: %s: a transition to %v is never completed", m.id, t.state)
	}
	m.clientTV, m.updateMs, m.state, m.pending = t.clientTV, t.updateMs, t.state, nil
	return nil
}

// expirable reports whether an idle id may be removed
// (transactional.id.expiration.ms after its last update).
func (m *txnMeta) expirable(nowMs, expirationMs int64) bool {
	switch m.state {
	case stateEmpty, stateCompleteCommit, stateCompleteAbort:
		return m.pending == nil && m.updateMs+expirationMs <= nowMs
	}
	return false
}

// timedOut reports whether an ongoing transaction outlived its timeout.
func (m *txnMeta) timedOut(nowMs int64) bool {
	return m.state == stateOngoing && m.pending == nil && m.startMs+int64(m.timeoutMs) < nowMs
}
