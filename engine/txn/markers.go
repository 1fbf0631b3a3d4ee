package txn

import (
	"time"

	"ringlog/engine"
)

// sendMarkers writes the markers of m's prepared transaction (shard only)
// to every partition it holds, and once all are written, the transaction's
// completion (CompleteCommit or CompleteAbort). Partitions whose leader was
// unavailable are sent again after MarkerRetryBackoff, for as long as this
// term lasts: a coordinator never gives up on a prepared transaction (the
// partitions' last stable offsets wait for it), and a coordinator that
// loses its partition leaves it to the next, which finds the transaction
// prepared in the log.
func (p *partition) sendMarkers(m *txnMeta) {
	m.markers++
	p.sendMarkersTo(m, m.markers, sortedPartitions(m.partitions))
}

func (p *partition) sendMarkersTo(m *txnMeta, seq uint64, tps []engine.TP) {
	gen := p.gen
	mk := Marker{ProducerID: m.producerID, ProducerEpoch: m.epoch, Commit: m.state == statePrepareCommit, CoordinatorEpoch: p.epoch,
		TransactionVersion: m.clientTV}
	if len(tps) == 0 {
		p.completeMarkers(m, seq)
		return
	}
	p.c.cfg.Markers.WriteMarkers(mk, tps, func(retry []engine.TP, fenced bool) {
		if p.c.closed.Load() {
			return
		}
		_ = p.c.eng.OnShard(p.tp, func() {
			if p.gen != gen || p.state != partLoaded || p.txns[m.id] != m || m.markers != seq {
				return // the term or the transaction moved on
			}
			switch {
			case fenced:
				p.c.log.Warn("transaction coordinator: markers refused, a newer coordinator epoch exists", "id", m.id, "epoch", p.epoch)
			case len(retry) > 0:
				p.after(p.c.cfg.MarkerRetryBackoff, gen, func() {
					if p.txns[m.id] == m && m.markers == seq {
						p.sendMarkersTo(m, seq, retry)
					}
				})
			default:
				p.completeMarkers(m, seq)
			}
		})
	})
}

// completeMarkers writes the transaction's completion once its markers
// are all written. A failed write is tried again after a backoff while the
// term lasts.
func (p *partition) completeMarkers(m *txnMeta, seq uint64) {
	t, err := m.prepareComplete(time.Now().UnixMilli())
	if err != nil {
		p.c.log.Error("transaction coordinator: complete", "err", err)
		return
	}
	gen := p.gen
	p.write(m, t, func(code int16) {
		if code == 0 || p.gen != gen {
			return
		}
		p.after(p.c.cfg.MarkerRetryBackoff, gen, func() {
			if p.txns[m.id] == m && m.markers == seq && m.pending == nil {
				p.completeMarkers(m, seq)
			}
		})
	})
}

// abortTimedOut aborts, on every partition this broker coordinates, the
// transactions open longer than their timeout (Kafka's
// abortTimedOutTransactions): the producer's epoch is bumped (fencing it)
// and the transaction aborted at the new epoch.
func (c *Coordinator) abortTimedOut() {
	if c.closed.Load() {
		return
	}
	for _, p := range c.parts {
		_ = c.eng.OnShard(p.tp, func() {
			if p.state != partLoaded {
				return
			}
			now := time.Now().UnixMilli()
			for _, m := range p.txns {
				if m.timedOut(now) {
					c.log.Info("transaction coordinator: aborting a transaction past its timeout", "id", m.id,
						"producer_id", m.producerID, "epoch", m.epoch, "timeout_ms", m.timeoutMs)
					p.fenceAndAbort(m, func(int16) {})
				}
			}
		})
	}
	c.mu.Lock()
	if !c.closed.Load() {
		c.abortTimer.Reset(c.cfg.AbortTimedOutInterval)
	}
	c.mu.Unlock()
}

// fenceAndAbort bumps the epoch of m's producer and aborts its ongoing
// transaction at the new epoch (shard only). done gets the write's code.
func (p *partition) fenceAndAbort(m *txnMeta, done func(code int16)) {
	t, err := m.prepareFenceAbort(time.Now().UnixMilli())
	if err != nil {
		p.c.log.Error("transaction coordinator: fence", "err", err)
		done(errCode(err))
		return
	}
	p.write(m, t, func(code int16) {
		if code != 0 {
			if p.txns[m.id] == m {
				m.failedEpochFence = true
			}
			done(code)
			return
		}
		p.sendMarkers(m)
		done(0)
	})
}

// removeExpired removes the transactional ids idle for longer than
// transactional.id.expiration.ms: a tombstone is written for each, and the
// id is forgotten once it is acknowledged.
func (c *Coordinator) removeExpired() {
	if c.closed.Load() {
		return
	}
	exp := c.cfg.IDExpiration.Milliseconds()
	for _, p := range c.parts {
		_ = c.eng.OnShard(p.tp, func() {
			if p.state != partLoaded {
				return
			}
			now := time.Now().UnixMilli()
			for _, m := range p.txns {
				if !m.expirable(now, exp) {
					continue
				}
				t, err := m.prepareDead(now)
				if err != nil {
					c.log.Error("transaction coordinator: expire", "err", err)
					continue
				}
				id := m.id
				p.write(m, t, func(code int16) {
					if code == 0 {
						c.log.Info("transaction coordinator: expired an idle transactional id", "id", id)
					}
				})
			}
		})
	}
	c.mu.Lock()
	if !c.closed.Load() {
		c.expirationTimer.Reset(c.cfg.RemoveExpiredInterval)
	}
	c.mu.Unlock()
}
