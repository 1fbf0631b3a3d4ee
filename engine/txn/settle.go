package txn

import (
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A call that meets its transactional id busy (a transition being written,
// or the markers of the transaction just ended) is parked until the id
// settles, then run again from the start, rather than answered
// CONCURRENT_TRANSACTIONS at once. Kafka answers at once and its clients
// (and its brokers, for the adds of transactions v2 produces) retry after
// 20 ms and more; the markers of a transaction take well under a
// millisecond here, so the next transaction's first produce waited 20 ms
// for nothing, and a producer committing every 1,000 records of 1 KiB ran
// at a fraction of an idempotent one. A call parked longer than
// settleWait is answered CONCURRENT_TRANSACTIONS, as before.

// settleWait bounds a parked call: Kafka's
// add.partitions.to.txn.retry.backoff.max.ms (100), the longest its
// brokers retry an add for a produce.
const settleWait = 100 * time.Millisecond

type waiter struct {
	// fired is set by whichever of run and the give-up timer goes first:
	// exactly one answers.
	fired atomic.Bool
	timer *time.Timer
	run   func() // on the shard, when the id settled or the term ended
}

// whenSettled parks a call on m (shard only): retry runs it again on the
// shard once m settles (or the term ends: the partition then answers why
// it cannot serve); fail gets CONCURRENT_TRANSACTIONS after settleWait.
// Exactly one of them runs, once.
func (p *partition) whenSettled(m *txnMeta, retry func(p *partition), fail func(code int16)) {
	w := &waiter{}
	w.run = func() {
		if code := p.unavailable(); code != 0 {
			fail(code)
			return
		}
		retry(p)
	}
	w.timer = time.AfterFunc(settleWait, func() {
		err := p.c.eng.OnShard(p.tp, func() {
			if w.fired.CompareAndSwap(false, true) {
				fail(kerr.ConcurrentTransactions.Code)
			}
		})
		if err != nil && w.fired.CompareAndSwap(false, true) {
			// The engine is gone or no longer hosts the partition:
			// nothing runs on that shard again, the waiter included.
			fail(kerr.NotCoordinator.Code)
		}
	})
	m.waiters = append(m.waiters, w)
}

// wake runs m's parked calls if m settled (shard only).
func (p *partition) wake(m *txnMeta) {
	if len(m.waiters) == 0 || !m.settled() {
		return
	}
	p.release(m)
}

// release runs every parked call of m again, settled or not (shard only):
// the term ended, and each finds out what is left of it.
func (p *partition) release(m *txnMeta) {
	ws := m.waiters
	m.waiters = nil
	for _, w := range ws {
		if w.fired.CompareAndSwap(false, true) {
			// Most calls are released well within settleWait: the
			// timer would only wake the shard for nothing.
			w.timer.Stop()
			w.run()
		}
	}
}
