package replication

import (
	"fmt"
	"slices"
	"time"
)

// ISRChange is an AlterPartition request for one partition: the ISR the
// leader proposes, and the epochs it is based on, which the controller
// checks (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION) before applying it.
type ISRChange struct {
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
	// Epochs holds, for each member of ISR, the broker epoch of the
	// incarnation the leader judged (-1: the leader itself, or a follower
	// that fetched without one). The controller refuses to add a member
	// whose registration has moved on (INELIGIBLE_REPLICA, KIP-903's
	// NewIsrWithEpochs): the leader judged a process that is gone.
	Epochs []int64
}

// same reports whether c and o are the same request. Two requests with the
// same base epochs and ISR are interchangeable: the controller applies
// either at most once, so an answer to one answers the other.
func (c ISRChange) same(o ISRChange) bool {
	return c.LeaderEpoch == o.LeaderEpoch && c.PartitionEpoch == o.PartitionEpoch && slices.Equal(c.ISR, o.ISR) && slices.Equal(c.Epochs, o.Epochs)
}

// PartitionState is the controller's word on the partition: an
// AlterPartition answer, or a metadata update.
type PartitionState struct {
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
	// Replicas, when set, is the assignment (UpdateISR only): a
	// reassignment adds replicas without a new leader epoch (KIP-455).
	Replicas []int32
}

// ShrinkProposal returns the ISR without the followers that are no longer
// caught up at now (Kafka's getOutOfSyncReplicas): a follower whose LEO is
// the leader's is in sync; any other whose last caught-up time is more
// than LagTimeMax ago is out, whether it is stuck (no fetch) or slow
// (fetching, never reaching the LEO). The leader never removes itself.
// ok is false when nothing is out of sync or a change is in flight (Kafka
// sends one AlterPartition at a time and re-evaluates after the answer).
func (l *Leader) ShrinkProposal(now time.Time) (ISRChange, bool) {
	if l.pending != nil {
		return ISRChange{}, false
	}
	isr := make([]int32, 0, len(l.isr))
	for _, id := range l.isr {
		if f := l.follower(id); f != nil && !l.caughtUp(f, now) {
			continue
		}
		isr = append(isr, id)
	}
	if len(isr) == len(l.isr) {
		return ISRChange{}, false
	}
	return l.change(isr), true
}

// ExpandProposal returns the ISR with one more follower (the first in
// replicas order that qualifies): not fenced, and with a LEO at least the
// HW and at least the start offset of this leader's epoch. The second
// condition matters: a follower that has not fetched from this epoch yet
// may lack committed data between the HW and the epoch start, and must
// not become electable before it has it (Kafka's isFollowerInSync).
// Kafka adds one replica per request; so does this.
func (l *Leader) ExpandProposal() (ISRChange, bool) {
	if l.pending != nil {
		return ISRChange{}, false
	}
	for i := range l.followers {
		f := &l.followers[i]
		if slices.Contains(l.isr, f.id) || f.fenced {
			continue
		}
		if f.leo >= l.hw && f.leo >= l.epochStart {
			return l.change(append(slices.Clone(l.isr), f.id)), true
		}
	}
	return ISRChange{}, false
}

func (l *Leader) change(isr []int32) ISRChange {
	c := ISRChange{LeaderEpoch: l.epoch, PartitionEpoch: l.partitionEpoch, ISR: inReplicaOrder(l.replicas, isr)}
	c.Epochs = make([]int64, len(c.ISR))
	for i, id := range c.ISR {
		c.Epochs[i] = -1
		if f := l.follower(id); f != nil {
			c.Epochs[i] = f.brokerEpoch
		}
	}
	return c
}

// ProposalSent marks c as sent to the controller. Until it is answered
// the leader computes the HW over the maximal ISR, and makes no other
// proposal. The committed ISR does not change: only the controller's
// answer changes it.
func (l *Leader) ProposalSent(c ISRChange) error {
	if l.pending != nil {
		return ErrProposalInFlight
	}
	if c.LeaderEpoch != l.epoch || c.PartitionEpoch != l.partitionEpoch {
		return fmt.Errorf("%w: change based on epochs %d/%d, leader at %d/%d", ErrStale, c.LeaderEpoch, c.PartitionEpoch, l.epoch, l.partitionEpoch)
	}
	if err := checkAssignment(l.id, l.replicas, c.ISR); err != nil {
		return err
	}
	if len(c.Epochs) != 0 && len(c.Epochs) != len(c.ISR) {
		return fmt.Errorf("%w: %d broker epochs for ISR %v", ErrInvalidAssignment, len(c.Epochs), c.ISR)
	}
	ordered := inReplicaOrder(l.replicas, c.ISR)
	if len(c.Epochs) != 0 {
		epochs := make([]int64, len(ordered))
		for i, id := range ordered {
			epochs[i] = c.Epochs[slices.Index(c.ISR, id)]
		}
		c.Epochs = epochs
	}
	c.ISR = ordered
	l.pending = &c
	l.updateMaximal()
	return nil
}

// Pending returns the ISR change in flight, if any, for a caller that
// retries it after a retriable error.
func (l *Leader) Pending() (ISRChange, bool) {
	if l.pending == nil {
		return ISRChange{}, false
	}
	c := *l.pending
	c.ISR, c.Epochs = slices.Clone(c.ISR), slices.Clone(c.Epochs)
	return c, true
}

// ISRCommitted applies the controller's successful answer to c: the
// partition now has st's ISR (the controller's, which may differ from the
// one proposed) at st's partition epoch. It reports whether the HW moved,
// which it may after a shrink. An answer to anything but the pending
// change, or with an older partition epoch, is ignored with ErrStale
// (Kafka: the state was changed by other means meanwhile); one for
// another leader epoch with ErrLeaderEpoch.
func (l *Leader) ISRCommitted(c ISRChange, st PartitionState, now time.Time) (hwMoved bool, err error) {
	if l.pending == nil || !c.same(*l.pending) {
		return false, fmt.Errorf("%w: answer to ISR change %v, pending %v", ErrStale, c, l.pending)
	}
	if st.LeaderEpoch != l.epoch {
		return false, fmt.Errorf("%w: answer at leader epoch %d, leader at %d", ErrLeaderEpoch, st.LeaderEpoch, l.epoch)
	}
	if st.PartitionEpoch < l.partitionEpoch {
		return false, fmt.Errorf("%w: answer at partition epoch %d, leader at %d", ErrStale, st.PartitionEpoch, l.partitionEpoch)
	}
	if err := checkAssignment(l.id, l.replicas, st.ISR); err != nil {
		return false, err
	}
	l.pending = nil
	l.partitionEpoch = st.PartitionEpoch
	l.setISR(st.ISR)
	return l.maybeIncrementHW(now), nil
}

// ISRRejected drops the pending change c after the controller said it did
// not apply it (OPERATION_NOT_ATTEMPTED, INELIGIBLE_REPLICA): the leader is
// back to its committed ISR, and may propose again. For errors that leave
// the outcome unknown (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION) the
// caller keeps the change pending until UpdateISR brings the controller's
// state; for retriable ones it resends Pending.
func (l *Leader) ISRRejected(c ISRChange) error {
	if l.pending == nil || !c.same(*l.pending) {
		return fmt.Errorf("%w: rejection of ISR change %v, pending %v", ErrStale, c, l.pending)
	}
	l.pending = nil
	l.updateMaximal()
	return nil
}

// UpdateISR applies the partition state from the cluster metadata (the
// controller may shrink the ISR itself, when it fences a broker, and a
// reassignment changes the replicas: see setReplicas). A newer
// partition epoch replaces the committed ISR and drops the pending change,
// whose answer is then ignored: the controller has moved on, and either
// applied it (st shows it) or will refuse it. At the same partition epoch
// the ISR is the one already committed and a pending change stays pending
// (Kafka would drop it; see doc.go). An older partition epoch is ignored
// with ErrStale, another leader epoch refused with ErrLeaderEpoch.
func (l *Leader) UpdateISR(st PartitionState, now time.Time) (hwMoved bool, err error) {
	if st.LeaderEpoch != l.epoch {
		return false, fmt.Errorf("%w: metadata at leader epoch %d, leader at %d", ErrLeaderEpoch, st.LeaderEpoch, l.epoch)
	}
	if st.PartitionEpoch < l.partitionEpoch {
		return false, fmt.Errorf("%w: metadata at partition epoch %d, leader at %d", ErrStale, st.PartitionEpoch, l.partitionEpoch)
	}
	replicas := l.replicas
	if st.Replicas != nil {
		replicas = st.Replicas
	}
	if err := checkAssignment(l.id, replicas, st.ISR); err != nil {
		return false, err
	}
	if !slices.Equal(replicas, l.replicas) {
		l.setReplicas(replicas)
	}
	if st.PartitionEpoch > l.partitionEpoch {
		l.pending = nil
	}
	l.partitionEpoch = st.PartitionEpoch
	l.setISR(st.ISR)
	return l.maybeIncrementHW(now), nil
}

// setReplicas makes replicas (checked) the assignment at the same leader
// epoch, as a reassignment's start does (KIP-455): followers that stay
// keep what the leader knows of them, new ones start as replicas that
// have not fetched from this leader (outside the ISR, they hold the HW
// back only once caught up), and removed ones are forgotten. (The
// controller bumps the leader epoch whenever a replica leaves, so a
// leader normally sees only additions here.)
func (l *Leader) setReplicas(replicas []int32) {
	l.replicas = slices.Clone(replicas)
	followers := make([]follower, 0, len(replicas))
	for _, id := range replicas {
		if id == l.id {
			continue
		}
		if f := l.follower(id); f != nil {
			followers = append(followers, *f)
			continue
		}
		followers = append(followers, follower{id: id, leo: -1, lastFetchLeaderLEO: -1, brokerEpoch: -1})
	}
	l.followers = followers
	// A new assignment comes with a new partition epoch, so a change in
	// flight was based on the old one: the controller will refuse it.
	l.pending = nil
	l.setISR(l.isr)
}
