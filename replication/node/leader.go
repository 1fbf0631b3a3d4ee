package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"ringlog/engine"
	"ringlog/replication"
	"ringlog/replication/controller"
)

// Errors of the leader side, which the kafka package maps to Kafka's codes.
var (
	// ErrNotLeader: this broker does not lead the partition
	// (NOT_LEADER_OR_FOLLOWER).
	ErrNotLeader = errors.New("node: not the leader of the partition")
	// ErrFencedLeaderEpoch: the fetcher knows an older leader epoch.
	ErrFencedLeaderEpoch = errors.New("node: fenced leader epoch")
	// ErrUnknownLeaderEpoch: the fetcher knows a newer leader epoch than
	// this broker has applied yet.
	ErrUnknownLeaderEpoch = errors.New("node: unknown leader epoch")
)

// FollowerFetch records a follower's fetch at fetchOffset (its LEO) before
// the leader reads for it: it may move the high watermark and makes the
// follower a candidate to join the ISR. brokerEpoch is the follower's
// registration epoch (Fetch v15's replica state, KIP-903; -1 unknown): a
// fetch of an incarnation older than one already seen is refused with
// replication.ErrStaleBrokerEpoch. currentEpoch is the leader epoch the
// follower knows (-1: unchecked).
func (n *Node) FollowerFetch(tp engine.TP, replicaID int32, brokerEpoch, fetchOffset int64, currentEpoch int32) error {
	pt := n.part(tp)
	if pt == nil {
		return ErrNotLeader
	}
	pt.mu.Lock()
	l := pt.leader
	if l == nil || pt.role != engine.RoleLeader {
		pt.mu.Unlock()
		return ErrNotLeader
	}
	switch {
	case currentEpoch >= 0 && currentEpoch < l.LeaderEpoch():
		pt.mu.Unlock()
		return ErrFencedLeaderEpoch
	case currentEpoch > l.LeaderEpoch():
		pt.mu.Unlock()
		return ErrUnknownLeaderEpoch
	}
	// A broker epoch above the one the quorum registered for the replica
	// is no incarnation of it: honouring it would fence the real
	// follower's fetches as stale (the reviewers' forged fetch with epoch
	// MaxInt64).
	// (A broker the quorum does not know is no replica: the leader's own
	// check below answers that.)
	if b, ok := n.Image().Broker(replicaID); ok && brokerEpoch > b.Epoch {
		pt.mu.Unlock()
		return fmt.Errorf("%w: broker %d fetches with epoch %d, above the %d the quorum registered", replication.ErrStaleBrokerEpoch, replicaID, brokerEpoch, b.Epoch)
	}
	if err := l.BrokerEpoch(replicaID, brokerEpoch); err != nil {
		pt.mu.Unlock()
		if errors.Is(err, replication.ErrNotReplica) {
			return ErrNotLeader
		}
		return err
	}
	inISR := false
	for _, r := range l.MaximalISR() {
		inISR = inISR || r == replicaID
	}
	now := time.Now()
	var appended bool
	if fetchOffset > l.LEO() {
		// The follower copied what the log published before the engine's
		// OnAppended told the leader (the shard wakes waiting fetches
		// first, and a fetch in flight reads whatever is published): take
		// the LEO from the engine rather than answer OFFSET_OUT_OF_RANGE,
		// which would make the follower truncate what it just copied.
		if st, err := n.eng.State(tp); err == nil && st.LEO > l.LEO() {
			appended, _ = l.LeaderAppended(st.LEO, now)
		}
	}
	moved, err := l.FollowerFetch(replicaID, fetchOffset, now)
	moved = moved || appended
	hw := l.HW()
	_, expand := l.ExpandProposal()
	pt.mu.Unlock()
	switch {
	case errors.Is(err, replication.ErrNotReplica):
		return ErrNotLeader
	case err != nil:
		return err
	}
	if moved {
		_ = n.eng.SetHW(tp, hw)
	}
	if !inISR && expand {
		// A follower caught up: propose it now rather than at the next
		// tick, as Kafka does from the fetch.
		select {
		case n.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// OnAppended is the engine's hook after a round of writes: the leader's
// LEO moved, which may move the high watermark (with a single in-sync
// replica, or followers already ahead). It runs on a shard and does not
// block.
func (n *Node) OnAppended(tp engine.TP, leo int64) {
	pt := n.part(tp)
	if pt == nil {
		return
	}
	pt.mu.Lock()
	l := pt.leader
	if l == nil {
		pt.mu.Unlock()
		return
	}
	moved, err := l.LeaderAppended(leo, time.Now())
	hw := l.HW()
	pt.mu.Unlock()
	if err == nil && moved {
		_ = n.eng.SetHW(tp, hw)
	}
}

// checkISRs proposes ISR changes: followers that lag longer than
// LagTimeMax leave, caught-up ones join (one AlterPartition in flight per
// partition).
func (n *Node) checkISRs() {
	now := time.Now()
	n.mu.Lock()
	parts := make([]*part, 0, len(n.parts))
	for _, pt := range n.parts {
		parts = append(parts, pt)
	}
	n.mu.Unlock()
	for _, pt := range parts {
		pt.mu.Lock()
		l := pt.leader
		if l == nil {
			pt.mu.Unlock()
			continue
		}
		if l.MaybeIncrementHW(now) {
			_ = n.eng.SetHW(pt.tp, l.HW())
		}
		c, ok := l.Pending()
		if ok {
			// A pending change goes again only when it got no answer: one
			// the quorum answered waits for the metadata
			// (controller.AlterPartitionOutcome).
			ok = pt.alterResend && pt.alterSent != l
		} else {
			c, ok = l.ShrinkProposal(now)
			if !ok {
				c, ok = l.ExpandProposal()
			}
			if ok {
				if err := l.ProposalSent(c); err != nil {
					ok = false
				}
			}
		}
		if ok {
			pt.alterSent, pt.alterResend = l, false
		}
		pt.mu.Unlock()
		if ok {
			n.wg.Add(1)
			go n.alterPartition(pt, l, c)
		}
	}
}

// alterPartition sends one ISR change to the controller and applies its
// answer to the leader that proposed it.
func (n *Node) alterPartition(pt *part, l *replication.Leader, c replication.ISRChange) {
	defer n.wg.Done()
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.AlterPartitionTimeout)
	defer cancel()
	var epoch int64
	if b, ok := n.ctl.Image().Broker(n.cfg.NodeID); ok {
		epoch = b.Epoch
	}
	res, err := n.ctl.AlterPartition(ctx, controller.AlterPartitionRequest{Topic: pt.tp.Topic, Partition: pt.tp.Partition,
		BrokerID: n.cfg.NodeID, BrokerEpoch: epoch, LeaderEpoch: c.LeaderEpoch, PartitionEpoch: c.PartitionEpoch, ISR: c.ISR, ISREpochs: c.Epochs})
	pt.mu.Lock()
	if pt.alterSent == l {
		pt.alterSent = nil
	}
	if pt.leader != l {
		pt.mu.Unlock()
		return // deposed meanwhile
	}
	var moved bool
	if err != nil {
		// Only a refusal at the change's own partition epoch drops it: an
		// expansion the quorum applied and the leader dropped would leave
		// in the ISR a follower the HW no longer waits for.
		switch controller.AlterPartitionOutcome(err) {
		case controller.AlterRefused:
			_ = l.ISRRejected(c)
		case controller.AlterUnknown:
			pt.alterResend = true
		}
		if n.ctx.Err() == nil {
			n.isr.failed.Add(1)
		}
	} else {
		before := l.ISR()
		var cerr error
		moved, cerr = l.ISRCommitted(c, replication.PartitionState{LeaderEpoch: res.LeaderEpoch, PartitionEpoch: res.PartitionEpoch, ISR: res.ISR}, time.Now())
		if cerr == nil {
			// Counted here or by leaderUpdate, whichever applies the
			// change: the other then finds the ISR it already has.
			n.countISRChange(before, l.ISR())
		}
	}
	hw, isr, replicas := l.HW(), len(l.ISR()), len(l.Replicas())
	pt.mu.Unlock()
	if err != nil {
		if n.ctx.Err() == nil {
			n.log.Warn("node: ISR change refused", "topic", pt.tp.Topic, "partition", pt.tp.Partition, "isr", c.ISR, "err", err)
		}
		return
	}
	n.log.Info("node: ISR changed", "topic", pt.tp.Topic, "partition", pt.tp.Partition, "isr", res.ISR, "partition_epoch", res.PartitionEpoch)
	_ = n.eng.SetISR(pt.tp, int32(isr), int32(replicas))
	if moved {
		_ = n.eng.SetHW(pt.tp, hw)
	}
}
