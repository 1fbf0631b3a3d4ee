package controller

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// What only the raft leader does: track broker liveness in memory, fence
// silent brokers, rebalance preferred leaders, and turn requests into log
// entries (choosing topic ids and replica placement first).

// liveness is the leader's memory of when each broker last heartbeated.
// It is not replicated: a new leader starts every broker's session afresh
// (KRaft does the same), so a failover never fences a live broker.
type liveness struct {
	mu       sync.Mutex
	lastSeen map[int32]time.Time
	// stopping holds the epoch of each broker incarnation in controlled
	// shutdown: a heartbeat of it still in flight must not unfence it.
	stopping map[int32]int64
}

func (l *liveness) stop(id int32, epoch int64) {
	l.mu.Lock()
	if l.stopping == nil {
		l.stopping = map[int32]int64{}
	}
	l.stopping[id] = epoch
	l.mu.Unlock()
}

func (l *liveness) isStopping(id int32, epoch int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.stopping[id]
	return ok && e == epoch
}

func (l *liveness) seen(id int32, now time.Time) {
	l.mu.Lock()
	if l.lastSeen == nil {
		l.lastSeen = map[int32]time.Time{}
	}
	l.lastSeen[id] = now
	l.mu.Unlock()
}

// seenAfter reports whether broker id heartbeated (or registered) after t
// as this leader saw it.
func (l *liveness) seenAfter(id int32, t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, ok := l.lastSeen[id]
	return ok && last.After(t)
}

// reset forgets everything: each broker's session restarts when it is
// next looked at.
func (l *liveness) reset() {
	l.mu.Lock()
	l.lastSeen = map[int32]time.Time{}
	l.mu.Unlock()
}

// expired returns the unfenced brokers of img silent for longer than
// timeout; a broker not seen yet starts its session now.
func (l *liveness) expired(img *Image, now time.Time, timeout time.Duration) []Broker {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastSeen == nil {
		l.lastSeen = map[int32]time.Time{}
	}
	var out []Broker
	for _, b := range img.Brokers() {
		if b.Fenced {
			continue
		}
		last, ok := l.lastSeen[b.ID]
		if !ok {
			l.lastSeen[b.ID] = now
			continue
		}
		if now.Sub(last) > timeout {
			out = append(out, b)
		}
	}
	return out
}

// leaderLoop runs on every node and acts while the node leads: it fences
// brokers whose session expired and rebalances preferred leaders.
func (c *Controller) leaderLoop() {
	defer c.wg.Done()
	tick := time.NewTicker(max(min(c.cfg.BrokerSessionTimeout/8, c.cfg.BrokerHeartbeatInterval), 10*time.Millisecond))
	defer tick.Stop()
	leading := false
	var rebalanceAt time.Time
	// Since when each partition in unclean recovery has waited, as this
	// leader saw it.
	waiting := map[TopicIDPartition]time.Time{}
	for {
		select {
		case <-c.ctx.Done():
			return
		case v := <-c.raft.LeaderCh():
			if !v {
				leading = false
			}
		case <-tick.C:
		}
		if c.raft.State() != raft.Leader {
			leading = false
			continue
		}
		if !leading {
			// Entries of earlier terms may not be applied yet: the image
			// must be current before it is judged.
			if err := waitFuture(c.raft.Barrier(c.cfg.ElectionTimeout), 4*c.cfg.ElectionTimeout); err != nil {
				continue
			}
			c.live.reset()
			clear(waiting)
			leading = true
			rebalanceAt = time.Now().Add(c.cfg.LeaderRebalanceInterval)
			c.log.Info("controller: leading the quorum")
		}
		now := time.Now()
		for _, b := range c.live.expired(c.Image(), now, c.cfg.BrokerSessionTimeout) {
			c.log.Warn("controller: fencing broker, session expired", "broker", b.ID, "epoch", b.Epoch,
				"session_timeout", c.cfg.BrokerSessionTimeout)
			c.proposeInternal(&command{typ: cmdFenceBroker, brokerID: b.ID, epoch: b.Epoch})
		}
		if due, late := recoveryDue(c.Image(), waiting, now, c.cfg.UncleanRecoveryTimeout, c.live.seenAfter); len(due) > 0 {
			if late > 0 {
				c.log.Warn("controller: partitions in unclean recovery waited for replicas that did not come back; electing the longest log among those that did",
					"partitions", len(due), "timed_out", late, "timeout", c.cfg.UncleanRecoveryTimeout)
			}
			c.proposeInternal(&command{typ: cmdElectRecovery, offline: due})
		}
		if c.cfg.LeaderRebalanceInterval > 0 && now.After(rebalanceAt) {
			rebalanceAt = now.Add(c.cfg.LeaderRebalanceInterval)
			if needsPreferredElection(c.Image()) {
				c.proposeInternal(&command{typ: cmdElectPreferred})
			}
		}
	}
}

// recoveryDue updates waiting, the partitions in unclean recovery (see
// election.go) and since when they wait, from img, and returns those whose
// wait may end: every replica that did not report its log is alive without
// having crashed (it heartbeated since the wait began, per seenAfter: it
// never lost its log, and was out of the ISR, so it is no candidate), or
// the wait passed timeout (late counts those). Without the first rule a
// partition whose ISR had shrunk to one broker that crashed would wait out
// the timeout for replicas that are up and have nothing more to give; an
// incarnation that died and was not fenced yet does not heartbeat, so the
// wait goes on for it.
func recoveryDue(img *Image, waiting map[TopicIDPartition]time.Time, now time.Time, timeout time.Duration,
	seenAfter func(id int32, t time.Time) bool) (due []TopicIDPartition, late int) {
	seen := map[TopicIDPartition]bool{}
	for _, t := range img.topics {
		for i, p := range t.Partitions {
			if p.Leader != -1 || !recovering(p, img.live) {
				continue
			}
			tip := TopicIDPartition{ID: t.ID, Partition: int32(i)}
			seen[tip] = true
			since, ok := waiting[tip]
			if !ok {
				waiting[tip] = now
				continue
			}
			known := true
			for _, r := range p.Replicas {
				if _, reported := logEndOf(p.Recovering, r); reported || slices.Contains(p.Offline, r) {
					continue
				}
				known = known && img.live(r) && seenAfter(r, since)
			}
			switch {
			case known:
				due = append(due, tip)
			case now.Sub(since) > timeout:
				due = append(due, tip)
				late++
			}
		}
	}
	for tip := range waiting {
		if !seen[tip] {
			delete(waiting, tip)
		}
	}
	sortTopicIDPartitions(due)
	return due, late
}

// proposeInternal proposes a command the leader decided on itself.
func (c *Controller) proposeInternal(cmd *command) {
	ctx, cancel := context.WithTimeout(c.ctx, 4*c.cfg.ElectionTimeout)
	defer cancel()
	if _, err := c.propose(ctx, cmd); err != nil && c.ctx.Err() == nil {
		c.log.Warn("controller: proposal failed", "command", cmd.typ.String(), "broker", cmd.brokerID, "error", err)
	}
}

// needsPreferredElection reports whether some partition is led by another
// replica than its preferred one while the preferred one could lead.
func needsPreferredElection(img *Image) bool {
	for _, t := range img.topics {
		for _, p := range t.Partitions {
			if _, err := partitionPreferred(p, img.live); err == nil {
				return true
			}
		}
	}
	return false
}

// lead executes a request on this node, which must be the raft leader:
// liveness requests in memory, the rest through the log.
func (c *Controller) lead(ctx context.Context, cmd *command) (reply, error) {
	if c.raft.State() != raft.Leader {
		return reply{}, errf(ErrNotController, "node %d is not the raft leader", c.cfg.NodeID)
	}
	switch cmd.typ {
	case cmdHeartbeat:
		return reply{}, c.heartbeatLeader(ctx, cmd)
	case cmdControlledShutdown:
		// Logged as the fence a session timeout would log, now.
		c.live.stop(cmd.brokerID, cmd.epoch)
		c.log.Info("controller: broker in controlled shutdown, fencing it", "broker", cmd.brokerID, "epoch", cmd.epoch)
		cmd = &command{typ: cmdFenceBroker, brokerID: cmd.brokerID, epoch: cmd.epoch}
	case cmdCreateTopic:
		if err := c.prepareCreateTopic(cmd); err != nil {
			return reply{}, err
		}
		if cmd.validateOnly {
			_, res := apply(c.Image(), 0, cmd)
			return reply{payload: res.payload}, res.err
		}
	case cmdCreatePartitions:
		if err := c.prepareCreatePartitions(cmd); err != nil {
			return reply{}, err
		}
	}
	r, err := c.propose(ctx, cmd)
	if err == nil && cmd.typ == cmdRegisterBroker {
		c.live.seen(cmd.brokerID, time.Now())
	}
	return r, err
}

// heartbeatLeader records a heartbeat; a fenced broker that heartbeats is
// unfenced (through the log).
func (c *Controller) heartbeatLeader(ctx context.Context, cmd *command) error {
	b, ok := c.Image().Broker(cmd.brokerID)
	if !ok {
		return errf(ErrBrokerIDNotRegistered, "broker %d", cmd.brokerID)
	}
	if b.Epoch != cmd.epoch {
		return errf(ErrStaleBrokerEpoch, "broker %d has epoch %d, not %d", b.ID, b.Epoch, cmd.epoch)
	}
	c.live.seen(b.ID, time.Now())
	if b.Fenced && c.live.isStopping(b.ID, b.Epoch) {
		return nil // a heartbeat sent before the controlled shutdown
	}
	if b.Fenced {
		c.log.Info("controller: unfencing broker", "broker", b.ID, "epoch", b.Epoch)
		_, err := c.propose(ctx, &command{typ: cmdUnfenceBroker, brokerID: b.ID, epoch: b.Epoch})
		return err
	}
	return nil
}

// propose appends cmd to the raft log and waits until it is applied here.
func (c *Controller) propose(ctx context.Context, cmd *command) (reply, error) {
	b := cmd.encode()
	if len(b) > maxCommandBytes {
		return reply{}, errf(ErrInvalidRequest, "%s of %d bytes, at most %d", cmd.typ, len(b), maxCommandBytes)
	}
	timeout := raftTimeout(ctx)
	submitted := time.Now()
	f := c.raft.Apply(b, timeout)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if err != nil {
			return reply{}, raftError(err)
		}
		c.observeQueueTime(submitted)
	case <-ctx.Done():
		return reply{}, fmt.Errorf("%w: %s not applied in time (it may still be): %w", ErrRequestTimedOut, cmd.typ, ctx.Err())
	}
	res, ok := f.Response().(result)
	if !ok {
		return reply{}, errf(ErrUnknown, "unexpected FSM response %T", f.Response())
	}
	return reply{index: f.Index(), payload: res.payload}, res.err
}

// raftError translates raft's errors: losing leadership means "ask the new
// leader", which is what NOT_CONTROLLER tells a client.
func raftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %w", ErrNotController, err)
	}
	return fmt.Errorf("%w: raft: %w", ErrUnknown, err)
}

// prepareCreateTopic fills in what the state machine must not choose
// itself: defaults, the placement (random start) and a random topic id.
func (c *Controller) prepareCreateTopic(cmd *command) error {
	if err := validateTopicName(cmd.topic); err != nil {
		return err
	}
	if len(cmd.assignments) > 0 {
		// Kafka: explicit assignments come with -1 for both counts.
		if (cmd.partitions != -1 && int(cmd.partitions) != len(cmd.assignments)) ||
			(cmd.rf != -1 && int(cmd.rf) != len(cmd.assignments[0])) {
			return errf(ErrInvalidRequest, "assignments given with partitions %d and replication factor %d (must be -1)", cmd.partitions, cmd.rf)
		}
	} else {
		if cmd.partitions == -1 {
			cmd.partitions = c.cfg.DefaultPartitions
		}
		if cmd.rf == -1 {
			cmd.rf = c.cfg.DefaultReplicationFactor
		}
		if cmd.partitions < 1 || cmd.partitions > maxPartitions {
			return errf(ErrInvalidPartitions, "%d partitions: must be 1 to %d", cmd.partitions, maxPartitions)
		}
		as, err := assignReplicas(liveBrokers(c.Image()), int(cmd.partitions), int(cmd.rf), 0, newRand())
		if err != nil {
			return err
		}
		cmd.assignments = as
	}
	if cmd.topicID == (TopicID{}) {
		cmd.topicID = newTopicID()
	}
	return nil
}

// prepareCreatePartitions places the new partitions when the request did
// not.
func (c *Controller) prepareCreatePartitions(cmd *command) error {
	img := c.Image()
	t := img.Topic(cmd.topic)
	if t == nil {
		return errf(ErrUnknownTopicOrPartition, "topic %q", cmd.topic)
	}
	n := int(cmd.partitions) - len(t.Partitions)
	if n <= 0 {
		return errf(ErrInvalidPartitions, "topic %q has %d partitions, cannot go to %d", cmd.topic, len(t.Partitions), cmd.partitions)
	}
	if len(cmd.assignments) > 0 {
		return nil
	}
	as, err := assignReplicas(liveBrokers(img), n, len(t.Partitions[0].Replicas), len(t.Partitions), newRand())
	if err != nil {
		return err
	}
	cmd.assignments = as
	return nil
}

func liveBrokers(img *Image) []Broker {
	var out []Broker
	for _, b := range img.Brokers() {
		if !b.Fenced {
			out = append(out, b)
		}
	}
	return out
}

func newRand() *mrand.Rand {
	return mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
}

// newTopicID draws a random id the way Kafka's Uuid.randomUuid does: never
// the zero id, never Uuid.ONE_UUID (reserved for the metadata topic), never
// one whose base64 form starts with '-' (command-line tools would take it
// for a flag).
func newTopicID() TopicID {
	for {
		var id TopicID
		rand.Read(id[:])
		one := TopicID{15: 1}
		if id != (TopicID{}) && id != one && id[0]>>2 != 62 {
			return id
		}
	}
}

// raftTimeout is how long a raft operation for a request may take: until
// the request's deadline, or defaultRequestTimeout without one.
func raftTimeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return time.Until(dl)
	}
	return defaultRequestTimeout
}
