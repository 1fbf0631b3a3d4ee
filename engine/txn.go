package engine

import (
	"fmt"
	"math"

	"ringlog/engine/acks"
	"ringlog/segment"
	"ringlog/segment/batch"
)

// The log side of transactions (KIP-98). A producer's transactional
// batches open a transaction on the partition at the first one's offset;
// a marker (a control batch, which only the broker writes, on the
// coordinator's word: AppendMarker) ends it as committed or aborted. The
// partition's last stable offset (LSO) is the high watermark held below
// the first offset of every transaction not settled yet: open, or ended by
// a marker that is not below the high watermark (a marker that a leader
// change could still truncate). read_committed consumers read up to the
// LSO, and learn from the aborted-transactions index (segment's
// .txnindex) which producers' records between a first offset and an ABORT
// marker to drop.
//
// Non-obvious invariants:
//   - The LSO never passes an open transaction. The spans readers compute
//     it from are published by the shard after each round's producer
//     updates and before the round's write is submitted, so a transaction
//     is known as open before any of its batches can be replicated and
//     covered by the high watermark (which other goroutines move).
//   - An aborted transaction's span stays open (pending) until its
//     .txnindex entry is written: a reader that may read past its first
//     offset can always find it among the aborted transactions.
//   - A marker comes after every data batch of its transaction on the
//     partition: the coordinator writes it once the producer's EndTxn
//     arrived, and a producer batch after it starts a new transaction
//     (or, outside one, is refused while a transaction is open).

// Isolation is a consumer's isolation level (Fetch, ListOffsets).
type Isolation int8

const (
	// ReadUncommitted reads up to the high watermark, aborted records
	// and open transactions included.
	ReadUncommitted Isolation = 0
	// ReadCommitted reads up to the last stable offset and is told of the
	// aborted transactions in what it reads.
	ReadCommitted Isolation = 1
)

// Marker is the end of a producer's transaction on one partition, as the
// transaction coordinator asks for it (Kafka's WriteTxnMarkers entry).
type Marker struct {
	ProducerID    int64
	ProducerEpoch int16
	// Commit is true for COMMIT, false for ABORT.
	Commit bool
	// CoordinatorEpoch is the coordinator's epoch (its partition of
	// __transaction_state's leader epoch): a marker from an older one than
	// the producer's last marker is refused.
	CoordinatorEpoch int32
	// TransactionVersion is the transaction's version as its
	// coordinator knows it (KIP-1228: WriteTxnMarkers v2 carries it per
	// marker): 0 and 1 are transactions v1, whose markers come at the
	// producer's epoch, 2 transactions v2 (KIP-890), whose markers come at
	// the epoch EndTxn bumped to and so must be above the epoch of the
	// producer's batches (checkMarker).
	TransactionVersion int16
}

// txnSpan is a transaction not settled yet: [first, last], last being its
// marker's offset, math.MaxInt64 while it is open. A pending span's marker
// is written but its index entry may not be: it counts as open.
//
// An open span in the published list names its producer and the
// producer's epoch, for TxnOngoing; an ended one there has producer -1.
type txnSpan struct {
	first, last int64
	pending     bool
	epoch       int16
	producer    int64
}

// lastStable is the LSO for high watermark hw given the unsettled spans:
// hw, lowered to the first offset of any span whose marker is not below
// hw, never below the log start (retention may have deleted the start of
// an open transaction, as in Kafka).
func lastStable(hw, logStart int64, spans []txnSpan) int64 {
	lso := hw
	for _, s := range spans {
		if s.last >= hw && s.first < lso {
			lso = s.first
		}
	}
	return max(lso, min(logStart, hw))
}

// publishTxns recomputes the spans readers compute the LSO from: the open
// transactions and the ended ones whose marker the high watermark has not
// passed (shard only). Ended spans below the high watermark are forgotten,
// unless a round is in flight (its rollback counts them).
func (p *partition) publishTxns() {
	ps := p.producers
	if len(ps.open) == 0 && len(ps.ended) == 0 {
		// The common case, and the cost of a round without transactions.
		if p.txns.Load() != nil {
			p.txns.Store(nil)
		}
		return
	}
	hw := p.hw.Load()
	if ps.undo == nil {
		n := 0
		for _, s := range ps.ended {
			if s.pending || s.last >= hw {
				ps.ended[n] = s
				n++
			}
		}
		clear(ps.ended[n:])
		ps.ended = ps.ended[:n]
	}
	var spans []txnSpan
	for pid, first := range ps.open {
		spans = append(spans, txnSpan{first: first, last: math.MaxInt64, producer: pid, epoch: ps.entries[pid].epoch})
	}
	for _, s := range ps.ended {
		if s.pending {
			s.last = math.MaxInt64
		}
		s.producer = -1
		spans = append(spans, s)
	}
	if len(spans) == 0 && p.txns.Load() == nil {
		return
	}
	if len(spans) == 0 {
		p.txns.Store(nil)
		return
	}
	p.txns.Store(&spans)
}

// lso is p's last stable offset for high watermark hw (any goroutine).
func (p *partition) lso(hw, logStart int64) int64 {
	spans := p.txns.Load()
	if spans == nil {
		return hw
	}
	return lastStable(hw, logStart, *spans)
}

// AppendMarker writes the marker ending m.ProducerID's transaction on tp:
// a control batch as Kafka writes it (batch.MarkerBatch), stamped with
// the broker's clock. It is the transaction coordinator's one write to a
// data partition (WriteTxnMarkers); producers never write markers. A
// marker of an older producer epoch than the partition knows is
// ErrInvalidProducerEpoch, one of an older coordinator epoch
// ErrTransactionCoordinatorFenced. An ABORT adds the transaction to the
// segment's aborted-transactions index. Only a leader takes markers
// (ErrNotLeader): followers copy them with the rest of the log. opts and
// done are as for Append (RequireISR: answered once the high watermark
// covers the marker, which is when the transaction is settled here).
func (e *Core) AppendMarker(tp TP, m Marker, opts AppendOptions, done func(AppendResult, error)) {
	if r := e.newMarker(tp, m, opts, done); r != nil {
		r.p.shard.send(shardMsg{append: r})
	}
}

// MarkerItem is one partition of AppendMarkers and its answer.
type MarkerItem struct {
	TP   TP
	Done func(AppendResult, error)
}

// AppendMarkers is AppendMarker on every partition of items with the same
// marker, sent to each shard in one message: a transaction's markers join
// one round per shard rather than waking it once per partition.
func (e *Core) AppendMarkers(m Marker, items []MarkerItem, opts AppendOptions) {
	if len(items) == 1 {
		e.AppendMarker(items[0].TP, m, opts, items[0].Done)
		return
	}
	reqs := make([]*appendReq, 0, len(items))
	for _, it := range items {
		if r := e.newMarker(it.TP, m, opts, it.Done); r != nil {
			reqs = append(reqs, r)
		}
	}
	e.sendByShard(reqs)
}

// newMarker checks a marker append and returns the request to queue, or
// nil when it was refused (done has then been called).
func (e *Core) newMarker(tp TP, m Marker, opts AppendOptions, done func(AppendResult, error)) *appendReq {
	if e.closed.Load() {
		done(AppendResult{}, ErrClosed)
		return nil
	}
	p, err := e.partition(tp)
	if err != nil {
		done(AppendResult{}, err)
		return nil
	}
	if m.ProducerID < 0 {
		done(AppendResult{}, fmt.Errorf("%w: marker for producer id %d", ErrInvalidRequest, m.ProducerID))
		return nil
	}
	if Role(p.role.Load()) != RoleLeader {
		done(AppendResult{}, fmt.Errorf("%w: %s-%d", ErrNotLeader, tp.Topic, tp.Partition))
		return nil
	}
	cfg := &p.topic.config
	isr, replicas := p.isr.Load(), p.replicas.Load()
	if opts.RequireISR && !acks.Enough(isr, cfg.MinInsyncReplicas, replicas) {
		done(AppendResult{}, fmt.Errorf("%w: %d in sync of %d replicas, min.insync.replicas %d", ErrNotEnoughReplicas, isr, replicas, cfg.MinInsyncReplicas))
		return nil
	}
	bm := batch.Marker{Commit: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}
	b := batch.MarkerBatch(nil, m.ProducerID, m.ProducerEpoch, bm, e.cfg.Now().UnixMilli())
	h, err := batch.ParseHeader(b)
	if err != nil {
		done(AppendResult{}, fmt.Errorf("%w: marker batch: %w", segment.ErrInvalidBatch, err))
		return nil
	}
	return &appendReq{p: p, opts: opts, done: done, batches: [][]byte{b}, hdrs: []segmentHeader{h}, markers: []*batch.Marker{&bm},
		markerTV: m.TransactionVersion}
}

// marker returns the transaction marker of r's i-th batch, nil for a data
// batch.
func (r *appendReq) marker(i int) *batch.Marker {
	if r.markers == nil {
		return nil
	}
	return r.markers[i]
}

// writeAborted adds the aborted transactions of r's markers to the log's
// index (shard only, once the markers are written).
func (p *partition) writeAborted(r *appendReq) error {
	for _, a := range r.aborted {
		if err := p.log().AppendAbortedTxn(a); err != nil {
			return err
		}
	}
	return nil
}

// TxnOngoing reports whether producer pid, at epoch, has a transaction
// open on tp as of tp's last append round, from any goroutine without
// waiting for the shard (Kafka's hasOngoingTransaction, which spares a
// produce to such a partition the coordinator's verification). The answer
// may be stale by the time the caller acts on it: an append that relies on
// it says so with AppendOptions.OngoingTxn, and the shard checks again.
func (e *Core) TxnOngoing(tp TP, pid int64, epoch int16) bool {
	p, err := e.partition(tp)
	if err != nil {
		return false
	}
	spans := p.txns.Load()
	if spans == nil {
		return false
	}
	for _, s := range *spans {
		if s.producer == pid && s.epoch == epoch && s.last == math.MaxInt64 {
			return true
		}
	}
	return false
}
