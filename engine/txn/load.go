package txn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// errClosed stops a replay when the coordinator closes.
var errClosed = errors.New("txn: coordinator closed")

// loads counts the elections whose replay has not settled (WaitLoaded), as
// the group coordinator's does.
type loads struct {
	mu      sync.Mutex
	pending int
	done    chan struct{}
	err     error
}

func (l *loads) begin() func(error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == 0 {
		l.done, l.err = make(chan struct{}), nil
	}
	l.pending++
	return l.settle
}

func (l *loads) settle(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil && l.err == nil {
		l.err = err
	}
	l.pending--
	if l.pending == 0 {
		close(l.done)
	}
}

// WaitLoaded waits until every election reported so far has settled (its
// partition replayed and serving, or its term over), and returns the
// first replay error among them.
func (c *Coordinator) WaitLoaded(ctx context.Context) error {
	c.loads.mu.Lock()
	if c.loads.pending == 0 {
		c.loads.mu.Unlock()
		return nil
	}
	done := c.loads.done
	c.loads.mu.Unlock()
	select {
	case <-done:
		c.loads.mu.Lock()
		defer c.loads.mu.Unlock()
		return c.loads.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Elected tells the coordinator that this broker now leads partition part
// of __transaction_state at leaderEpoch (the coordinator epoch of what it
// does there). The partition's transactional ids are replayed from its
// log, up to its LEO, and answer COORDINATOR_LOAD_IN_PROGRESS meanwhile;
// then the markers of every transaction found prepared (PrepareCommit,
// PrepareAbort) are sent again. It only queues work to the partition's
// shard.
func (c *Coordinator) Elected(part, leaderEpoch int32) {
	settled := c.loads.begin()
	c.onTerm(part, "elected", leaderEpoch, settled, func(p *partition) {
		if !p.elect(leaderEpoch, settled) {
			settled(nil)
		}
	})
}

// Resigned tells the coordinator that this broker no longer leads
// partition part, since leaderEpoch (-1: the partition left this broker).
// Its ids are forgotten; later requests answer NOT_COORDINATOR, and
// markers being written are dropped when they complete (the new leader
// sends them again).
func (c *Coordinator) Resigned(part, leaderEpoch int32) {
	c.onTerm(part, "resigned", leaderEpoch, func(error) {}, func(p *partition) { p.resign(leaderEpoch) })
}

func (c *Coordinator) onTerm(i int32, what string, epoch int32, skipped func(error), fn func(p *partition)) {
	if c.closed.Load() {
		skipped(nil)
		return
	}
	if i < 0 || int(i) >= len(c.parts) {
		c.log.Error("transaction coordinator: leadership of a partition it does not know (transaction.state.log.num.partitions differs from the topic's count?)",
			"change", what, "partition", i, "partitions", len(c.parts))
		skipped(nil)
		return
	}
	p := c.parts[i]
	err := c.eng.OnShard(p.tp, func() {
		if c.closed.Load() {
			skipped(nil)
			return
		}
		fn(p)
	})
	if err != nil {
		c.log.Warn("transaction coordinator: leadership change not applied", "change", what, "partition", i, "epoch", epoch, "err", err)
		skipped(fmt.Errorf("txn: %s for %s: %w", what, p, err))
	}
}

// elect starts a term at epoch (shard only), unless the election is stale
// or a repeat; the replay starts once the previous term's writes completed
// (they are in the log it reads).
func (p *partition) elect(epoch int32, finished func(error)) bool {
	info, ok := p.c.eng.Topic(p.tp.Topic)
	if !ok {
		p.c.log.Warn("transaction coordinator: elected for a partition the engine does not have", "partition", p.tp.Partition)
		return false
	}
	if info.ID != p.topicID {
		p.topicID, p.epoch = info.ID, -1
	}
	if epoch < p.epoch || (epoch == p.epoch && (p.state == partLoading || p.state == partLoaded)) {
		return false
	}
	if p.state != partUnloaded {
		p.unload()
	}
	p.gen++
	p.epoch, p.state = epoch, partLoading
	gen := p.gen
	p.afterWrites(func() {
		go p.c.load(p, gen, epoch, finished)
	})
	return true
}

func (p *partition) resign(epoch int32) {
	if epoch >= 0 && epoch < p.epoch {
		return
	}
	p.epoch = max(p.epoch, epoch)
	p.gen++
	if p.state != partUnloaded {
		p.unload()
		p.c.log.Info("transaction coordinator: resigned", "partition", p.tp.Partition, "epoch", epoch)
	}
}

// load replays one partition on the caller's goroutine and installs its
// ids on its shard, unless the term moved on meanwhile.
func (c *Coordinator) load(p *partition, gen uint64, epoch int32, finished func(error)) {
	c.loadSem <- struct{}{}
	start := time.Now()
	st := newLoadState()
	err := c.eng.ReadAllToLEO(p.tp, func(b []byte) error {
		if c.closed.Load() {
			return errClosed
		}
		return replayBatch(b, st)
	})
	<-c.loadSem
	if err != nil {
		err = fmt.Errorf("txn: replay %s: %w", p, err)
		if !errors.Is(err, errClosed) {
			c.log.Error("transaction coordinator: partition unavailable", "err", err)
		}
	}
	if st.bad > 0 {
		c.log.Warn("transaction coordinator: skipped undecodable records", "partition", p.tp.Partition, "records", st.bad, "last_err", st.lastErr)
	}
	callErr := c.eng.OnShard(p.tp, func() {
		switch {
		case p.gen != gen || p.state != partLoading:
			finished(nil)
			return
		case err != nil:
			p.state = partFailed
		default:
			p.install(st)
			p.state = partLoaded
			c.log.Info("transaction coordinator: loaded", "partition", p.tp.Partition, "epoch", epoch, "transactional_ids", len(p.txns),
				"took", time.Since(start).Round(time.Millisecond))
			p.resumeMarkers()
		}
		finished(err)
	})
	if callErr != nil {
		finished(errors.Join(err, callErr))
	}
}

// install takes what replay found (Kafka's loadTransactionMetadata). A
// PrepareEpochFence or Dead record is never written by a coordinator; one
// found (written by hand) is dropped. Ids are kept as they were, Ongoing
// transactions included: their timeout still runs from their start.
func (p *partition) install(st *loadState) {
	for id, m := range st.txns {
		switch m.state {
		case stateDead, statePrepareEpochFence:
			continue
		}
		p.txns[id] = m
	}
}

// resumeMarkers sends the markers of every prepared transaction found by a
// replay: the previous coordinator wrote PrepareCommit or PrepareAbort and
// may have died before every marker was written (Kafka's
// addTxnMarkersToSend at load).
func (p *partition) resumeMarkers() {
	for _, m := range p.txns {
		if m.state == statePrepareCommit || m.state == statePrepareAbort {
			p.sendMarkers(m)
		}
	}
}
