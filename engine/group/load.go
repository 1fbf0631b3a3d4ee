package group

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// beforeInstall, when set (by tests), runs before each partition's groups
// are installed: it holds a partition in COORDINATOR_LOAD_IN_PROGRESS.
var beforeInstall func(partition int32)

// errClosed stops a replay when the coordinator closes.
var errClosed = errors.New("group: coordinator closed")

// loads counts the elections whose replay has not settled, for
// WaitLoaded. Elected counts one before it queues its work, so that a
// WaitLoaded that follows it waits for it.
type loads struct {
	mu      sync.Mutex
	pending int
	round   *loadRound // nil while pending is 0
}

// loadRound is a stretch of time with elections pending: it ends when the
// last of them settles, with the first replay error among them.
type loadRound struct {
	done chan struct{}
	err  error
}

// begin counts an election; the function it returns settles it, and must
// be called exactly once.
func (l *loads) begin() func(error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == 0 {
		l.round = &loadRound{done: make(chan struct{})}
	}
	l.pending++
	return l.settle
}

func (l *loads) settle(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.round
	if err != nil && r.err == nil {
		r.err = err
	}
	l.pending--
	if l.pending == 0 {
		close(r.done)
		l.round = nil
	}
}

func (l *loads) wait(ctx context.Context) error {
	l.mu.Lock()
	r := l.round
	l.mu.Unlock()
	if r == nil {
		return nil
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Elected tells the coordinator that this broker now leads partition part
// of __consumer_offsets at leaderEpoch; replication/node calls it (through
// its OnLeadership hook) once the engine's partition is the leader. The
// partition's groups are replayed from its log on a goroutine of the
// coordinator's, up to its LEO, and answer COORDINATOR_LOAD_IN_PROGRESS
// meanwhile. Every election at a newer epoch is a new term, replayed
// anew: the log may have moved while this broker followed. An election at
// an older epoch than the partition's last is stale and ignored, one at
// the same epoch a repeat. It only queues work to the partition's shard.
func (c *Coordinator) Elected(part, leaderEpoch int32) {
	settled := c.loads.begin()
	c.onTerm(part, "elected", leaderEpoch, settled, func(p *partition) {
		if !p.elect(leaderEpoch, settled) {
			settled(nil)
		}
	})
}

// Resigned tells the coordinator that this broker no longer leads
// partition part, since leaderEpoch (the epoch of its new role; -1 when the
// partition left this broker). The partition's groups are unloaded: timers
// stop, parked JoinGroup and SyncGroup requests are answered
// NOT_COORDINATOR, and so is every later request, so that clients look
// for the new coordinator. Writes still waiting for the high watermark
// were failed by the engine when it stopped leading (NOT_COORDINATOR too).
// A resignation older than the partition's last election is stale. It
// only queues work to the partition's shard.
func (c *Coordinator) Resigned(part, leaderEpoch int32) {
	c.onTerm(part, "resigned", leaderEpoch, func(error) {}, func(p *partition) { p.resign(leaderEpoch) })
}

// onTerm runs fn on the shard of partition i, unless the coordinator
// closed; skipped is called instead when fn will not run.
func (c *Coordinator) onTerm(i int32, what string, epoch int32, skipped func(error), fn func(p *partition)) {
	if c.closed.Load() {
		skipped(nil)
		return
	}
	if i < 0 || int(i) >= len(c.parts) {
		c.log.Error("group coordinator: leadership of a partition it does not know (offsets.topic.num.partitions differs from the topic's count?)",
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
		c.log.Warn("group coordinator: leadership change not applied", "change", what, "partition", i, "epoch", epoch, "err", err)
		skipped(fmt.Errorf("group: %s for %s-%d: %w", what, p.tp.Topic, i, err))
	}
}

// elect starts a term at epoch (shard only): unless the election is stale
// or a repeat, the partition's groups are dropped and replayed, once the
// previous term's writes have completed (they are in the log the replay
// reads). finished is called when the replay is installed, fails or is
// dropped (with the replay's error when it failed); elect reports whether
// it will be.
func (p *partition) elect(epoch int32, finished func(error)) bool {
	info, ok := p.c.eng.Topic(p.tp.Topic)
	if !ok {
		p.c.log.Warn("group coordinator: elected for a partition the engine does not have", "partition", p.tp.Partition)
		return false
	}
	if info.ID != p.topicID {
		// The topic was deleted and created again: its epochs start over.
		p.topicID, p.epoch = info.ID, -1
	}
	if epoch < p.epoch || (epoch == p.epoch && (p.state == partLoading || p.state == partLoaded)) {
		return false
	}
	if p.state != partUnloaded {
		p.unload() // a newer term without a resignation between
	}
	p.gen++
	p.epoch, p.state = epoch, partLoading
	gen := p.gen
	p.afterWrites(func(error) {
		go p.c.load(p, gen, epoch, finished)
	})
	return true
}

// resign ends the term (shard only).
func (p *partition) resign(epoch int32) {
	if epoch >= 0 && epoch < p.epoch {
		return
	}
	p.epoch = max(p.epoch, epoch)
	p.gen++
	if p.state != partUnloaded {
		p.unload()
		p.c.log.Info("group coordinator: resigned", "partition", p.tp.Partition, "epoch", epoch)
	}
}

// load replays one partition on the caller's goroutine (ReadAllToLEO
// works on the log's published views, not on the shard) and installs its groups
// on its shard, unless the term moved on meanwhile. Nothing writes to a
// partition before it is installed: its groups answer
// COORDINATOR_LOAD_IN_PROGRESS and expiry skips it.
func (c *Coordinator) load(p *partition, gen uint64, epoch int32, finished func(error)) {
	c.loadSem <- struct{}{}
	start := time.Now()
	st := newLoadState()
	// Up to the LEO: the new leader's high watermark may lag what the old
	// one acknowledged; its log has it all (it was in the ISR).
	err := c.eng.ReadAllToLEO(p.tp, func(b []byte) error {
		if c.closed.Load() {
			return errClosed
		}
		return replayBatch(b, st)
	})
	<-c.loadSem
	if err != nil {
		err = fmt.Errorf("group: replay %s-%d: %w", p.tp.Topic, p.tp.Partition, err)
		if !errors.Is(err, errClosed) {
			c.log.Error("group coordinator: partition unavailable", "err", err)
		}
	}
	if st.bad > 0 {
		c.log.Warn("group coordinator: skipped undecodable records", "partition", p.tp.Partition, "records", st.bad, "last_err", st.lastErr)
	}
	// The subscriptions' regexes are compiled here, on the replay's
	// goroutine, rather than by the shard's first assignment (regex.go).
	for _, cl := range st.consumers {
		for _, m := range cl.members {
			if m.regex != nil {
				_, _ = c.regexes.compile(*m.regex)
			}
		}
	}
	if beforeInstall != nil {
		beforeInstall(p.tp.Partition)
	}
	callErr := c.eng.OnShard(p.tp, func() {
		switch {
		case p.gen != gen || p.state != partLoading:
			// The term is over: what its replay found, or failed to
			// find, no longer matters.
			finished(nil)
			return
		case err != nil:
			p.state = partFailed
		default:
			p.install(st)
			p.state = partLoaded
			c.log.Info("group coordinator: loaded", "partition", p.tp.Partition, "epoch", epoch, "groups", len(p.groups), "took", time.Since(start).Round(time.Millisecond))
		}
		finished(err)
	})
	if callErr != nil {
		finished(errors.Join(err, callErr))
	}
}

// install builds the partition's groups from what replay found (Kafka's
// loadGroupsAndOffsets). A group with members comes back Stable with the
// generation, leader and assignments it had: its members keep consuming
// without a rebalance if they heartbeat within their session timeout,
// which starts now. Offsets without group metadata are a simple group's.
func (p *partition) install(st *loadState) {
	for id, v := range st.groups {
		g := p.newGroup(id)
		g.protocolType, g.generation, g.stateMs = v.ProtocolType, v.Generation, v.CurrentStateTimestamp
		g.state = stateEmpty
		if v.Protocol != nil && len(v.Members) > 0 {
			name := *v.Protocol
			g.protocol = &name
			g.state = stateStable
			for _, vm := range v.Members {
				if g.byID[vm.MemberID] != nil {
					continue
				}
				m := &member{id: vm.MemberID, instanceID: vm.InstanceID, clientID: vm.ClientID, clientHost: vm.ClientHost,
					protocolType: v.ProtocolType, protocols: []protocol{{name: name, metadata: vm.Subscription}},
					sessionTimeout: time.Duration(vm.SessionTimeoutMillis) * time.Millisecond, assignment: vm.Assignment}
				m.rebalanceTimeout = time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond
				if vm.RebalanceTimeoutMillis < 0 {
					m.rebalanceTimeout = m.sessionTimeout // a v0 record
				}
				g.add(m)
			}
			if v.Leader != nil && g.byID[*v.Leader] != nil {
				g.leader = *v.Leader
			}
			g.computeSubscribed()
			for _, m := range g.members {
				g.touch(m, m.sessionTimeout)
			}
			if len(g.members) > p.c.cfg.MaxSize {
				// group.max.size was lowered: rebalance, and the members
				// that rejoin last are left out.
				g.prepareRebalance()
			}
		}
	}
	p.installConsumers(st)
	p.commitSeq = st.seq
	defer p.installTxnPending(st)
	for id, offs := range st.offsets {
		g := p.groups[id]
		if g == nil {
			g = p.newGroup(id)
		}
		g.offsets = offs
	}
}
