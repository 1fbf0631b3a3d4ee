package engine

import (
	"sync"
	"sync/atomic"

	"ringlog/engine/acks"
	"ringlog/segment"
)

// TP names a partition.
type TP struct {
	Topic     string
	Partition int32
}

// partition is one partition of a topic on this broker. Its log and
// producer state belong to its shard's goroutine; hw, role, epoch and the
// subscribers are shared.
type partition struct {
	tp    TP
	topic *topic
	shard *shard
	// ldir is the log directory p lives in (nil for a partition offline
	// because its directory was at start) and dir its folder there (then
	// a name in the first directory). A move changes both on the shard;
	// dir is read on the shard only.
	ldir atomic.Pointer[logDir]
	dir  string
	// move is the move to another log directory under way (move.go), set
	// and cleared on the shard.
	move atomic.Pointer[move]
	// cur is the log, set on the shard before p is published: nil only
	// for a partition offline since the start. It changes only when a
	// move between log directories (move.go) swaps in the copy, on the
	// shard, so code on the shard sees one log for the whole of a round;
	// readers on other goroutines load it once per call (log()).
	cur     atomic.Pointer[segment.Log]
	deleted atomic.Bool
	// offline, once set, is why p is offline (offline.go): it wraps
	// ErrStorage and is what every call on p answers from then on.
	offline atomic.Pointer[error]
	// recovered is where the log ended when this start recovered it from
	// an unclean shutdown (recovered.go); nil for a log closed cleanly.
	// Set on the shard before p is published.
	recovered *RecoveredLog

	// hw is the high watermark: consumers read below it. On a single node
	// it follows the LEO; in a replicated engine SetHW moves it.
	hw atomic.Int64
	// hwMu serialises the changes of hw in a replicated engine: SetHW on
	// any goroutine against truncation on the shard, so that hw never
	// passes the LEO. Readers load hw without it.
	hwMu sync.Mutex
	// leaderEpoch is the epoch of the partition's current role; a leader
	// stamps it on producer batches. role is a Role. Both are written on
	// the shard only.
	leaderEpoch atomic.Int32
	role        atomic.Int32
	// isr is the size of the in-sync replica set that acks=all checks
	// against min.insync.replicas, and replicas the size of the
	// partition's replica set, which caps min.insync.replicas (replicated
	// engine; SetISR).
	isr      atomic.Int32
	replicas atomic.Int32

	// txns are the transactions not settled yet, from which readers
	// compute the last stable offset (txn.go); nil when there are none.
	// Published by the shard.
	txns atomic.Pointer[[]txnSpan]

	// Owned by the shard.
	producers    *producerState
	queue        []*appendReq // appends waiting for the next round
	task         *segment.Task
	snapshotBase int64 // active segment base at the last producer snapshot
	// acks are acks=all appends written by a leader and waiting for the
	// high watermark to reach their end (replicated engine).
	acks acks.Queue[pendingAck]
	// acksMin is acks.Min() as of the shard's last change of acks, so
	// that SetHW knows without the shard whether an ack is due; acksDue is
	// set while p is on its shard's list of partitions with acks due.
	acksMin atomic.Int64
	acksDue atomic.Bool

	subMu sync.Mutex
	subs  map[*Waiter]struct{}
}

// Waiter is woken when any partition it watches gets new data: its high
// watermark moves (and with it the last stable offset, which moves only
// with the high watermark or, as a round commits, just before it does), or,
// on a replicated engine, its LEO (a follower fetches
// up to the LEO; a consumer's fetch woken by an append finds nothing new
// below the high watermark and waits on, as Kafka's delayed fetches are
// checked after every append). It is how a fetch long-polls.
type Waiter struct {
	C     chan struct{}
	parts []*partition
}

// NewWaiter watches the partitions in tps that exist on this broker; C
// receives (at most one pending signal) whenever one of them gets new data.
// Stop releases it.
func (e *Core) NewWaiter(tps []TP) *Waiter {
	w := &Waiter{C: make(chan struct{}, 1)}
	for _, tp := range tps {
		p, err := e.partition(tp)
		if err != nil {
			continue
		}
		p.subMu.Lock()
		if p.subs == nil {
			p.subs = map[*Waiter]struct{}{}
		}
		p.subs[w] = struct{}{}
		p.subMu.Unlock()
		w.parts = append(w.parts, p)
	}
	return w
}

// Stop unregisters the waiter.
func (w *Waiter) Stop() {
	for _, p := range w.parts {
		p.subMu.Lock()
		delete(p.subs, w)
		p.subMu.Unlock()
	}
	w.parts = nil
}

// notify wakes every waiter of p without blocking.
func (p *partition) notify() {
	p.subMu.Lock()
	for w := range p.subs {
		select {
		case w.C <- struct{}{}:
		default:
		}
	}
	p.subMu.Unlock()
}

// advanceHW publishes a new high watermark and wakes the waiters.
func (p *partition) advanceHW(hw int64) {
	if hw > p.hw.Load() {
		p.hw.Store(hw)
		p.notify()
	}
}

// log is p's current log (nil only for a partition offline since the
// start). Any goroutine.
func (p *partition) log() *segment.Log { return p.cur.Load() }
