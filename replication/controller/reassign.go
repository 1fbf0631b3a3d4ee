package controller

import (
	"context"
	"fmt"
	"slices"
)

// Partition reassignment (KIP-455), as KRaft's ReplicationControlManager
// does it. A reassignment to a target replica list starts by making the
// partition's replicas the target followed by the replicas leaving it:
//
//	replicas = target ++ removing      removing = current - target (sorted)
//	adding   = target - current (sorted)
//
// The ISR and the leader stay as they are; the adding replicas become
// followers on their brokers, copy the log from the leader and join the
// ISR through the leader's AlterPartition like any follower that caught
// up. The change that makes the ISR hold the whole target completes the
// reassignment in the same step: replicas = target, the removing replicas
// leave the ISR, and a leader that is no longer a replica hands over to
// the first target replica in the ISR (finish bumps the leader epoch
// whenever a replica leaves, as KRaft does, so the removed replicas'
// fetches are fenced). A new reassignment of a partition already moving
// is computed against its current, full replica list, which replaces
// the target (KRaft does the same). A cancellation reverts to the
// original replicas (replicas - adding) and drops the adding replicas
// from the ISR; if that leaves it empty, the revert needs an unclean
// election, refused unless the topic enables it.

// Reassignment is one partition of an AlterPartitionReassignments
// request: a new target replica list, or a cancellation of the
// reassignment in progress.
type Reassignment struct {
	Topic     string
	Partition int32
	// Replicas is the target, preferred leader first; ignored with Cancel.
	Replicas []int32
	// Cancel reverts the reassignment in progress (Kafka's null replicas).
	Cancel bool
}

// AlterPartitionReassignments starts, replaces or cancels the
// reassignments of the partitions listed (Kafka's
// AlterPartitionReassignments, KIP-455) in one entry, and returns one
// error per reassignment, in order: nil, or UNKNOWN_TOPIC_OR_PARTITION,
// INVALID_REPLICA_ASSIGNMENT (an empty target, a broker twice or not
// registered, a cancellation that would need an unclean election),
// INVALID_REPLICATION_FACTOR (allowRFChange false and the target's size
// differs, KIP-860), NO_REASSIGNMENT_IN_PROGRESS (a cancellation of a
// partition not moving). The error returned alone is the request's.
func (c *Controller) AlterPartitionReassignments(ctx context.Context, rs []Reassignment, allowRFChange bool) ([]error, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	cp := make([]Reassignment, len(rs))
	for i, r := range rs {
		cp[i] = Reassignment{Topic: r.Topic, Partition: r.Partition, Cancel: r.Cancel}
		if !r.Cancel {
			cp[i].Replicas = slices.Clone(r.Replicas)
		}
	}
	r, err := c.submit(ctx, &command{typ: cmdAlterReassignments, reassign: cp, allowRFChange: allowRFChange})
	if err != nil {
		return nil, err
	}
	return decodeReassignResults(r.payload, len(rs))
}

// alterReassignments applies each reassignment of c in order, each on its
// own: one that fails leaves the others applied. Payload: a count and,
// per reassignment in request order, error code i16 and message str.
func (t *tx) alterReassignments(c *command) result {
	e := &encoder{}
	e.uvarint(len(c.reassign))
	for _, r := range c.reassign {
		err := t.reassign(r, c.allowRFChange)
		e.i16(ErrorCode(err))
		if err != nil {
			e.str(err.Error())
		} else {
			e.str("")
		}
	}
	return result{payload: e.b}
}

func (t *tx) reassign(r Reassignment, allowRFChange bool) error {
	tp := t.topic(r.Topic)
	if tp == nil || r.Partition < 0 || int(r.Partition) >= len(tp.Partitions) {
		return errf(ErrUnknownTopicOrPartition, "%s-%d", r.Topic, r.Partition)
	}
	p := tp.Partitions[r.Partition]
	unclean := uncleanEnabled(tp)
	var np Partition
	if r.Cancel {
		var err error
		if np, err = partitionRevert(p, t.live, unclean); err != nil {
			return fmt.Errorf("%w (%s-%d)", err, r.Topic, r.Partition)
		}
	} else {
		if err := t.checkTarget(r.Replicas); err != nil {
			return err
		}
		if rf := len(p.Replicas) - len(p.RemovingReplicas); !allowRFChange && len(r.Replicas) != rf {
			return errf(ErrInvalidReplicationFactor, "The replication factor is changed from %d to %d", rf, len(r.Replicas))
		}
		np = partitionReassign(p, r.Replicas, t.live, unclean)
	}
	if np, changed := finish(p, np); changed {
		t.mutableTopic(r.Topic).Partitions[r.Partition] = np
	}
	return nil
}

// checkTarget validates a target replica list with Kafka's messages: not
// empty, no broker twice, every broker registered (fenced ones may be
// targets: they catch up once they return).
func (t *tx) checkTarget(target []int32) error {
	if len(target) == 0 {
		return errf(ErrInvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
	}
	if len(target) > maxReplicas {
		return errf(ErrInvalidReplicaAssignment, "%d replicas, at most %d", len(target), maxReplicas)
	}
	if hasDuplicates(target) {
		return errf(ErrInvalidReplicaAssignment, "The manual partition assignment includes the broker more than once: %v.", target)
	}
	for _, r := range target {
		if _, ok := t.broker(r); !ok {
			return errf(ErrInvalidReplicaAssignment, "The manual partition assignment includes broker %d, but no such broker is registered.", r)
		}
	}
	return nil
}

// partitionReassign returns p reassigned to target (validated), before
// finish: the full replica list, adding and removing as at the top of
// this file, completed at once when the ISR already holds the target.
func partitionReassign(p Partition, target []int32, live func(int32) bool, unclean bool) Partition {
	np := p.clone()
	removing := sortedDifference(p.Replicas, target)
	np.AddingReplicas = sortedDifference(target, p.Replicas)
	np.RemovingReplicas = removing
	np.Replicas = append(slices.Clone(target), removing...)
	// The ISR and the offline replicas are kept, in the new replica order.
	np.ISR = inReplicaOrder(np.Replicas, np.ISR)
	np.Offline = inReplicaOrder(np.Replicas, np.Offline)
	if np.Leader == -1 {
		// A leaderless partition tries an election with its new
		// replicas, as any change does in KRaft's PartitionChangeBuilder:
		// with unclean.leader.election.enable a live adding replica may
		// lead.
		np = electInto(np, live, unclean)
	}
	return completeReassignment(np, live, unclean)
}

// completeReassignment completes np's reassignment if its ISR holds every
// target replica (KRaft's maybeCompleteReassignment): the removing
// replicas leave the assignment and the ISR, and a leader that left hands
// over to the first target replica in the ISR. np is returned as it is
// when nothing is in progress or the target is not all in sync yet.
func completeReassignment(np Partition, live func(int32) bool, unclean bool) Partition {
	if !np.Reassigning() {
		return np
	}
	keep := func(v []int32) []int32 {
		return slices.DeleteFunc(slices.Clone(v), func(r int32) bool { return slices.Contains(np.RemovingReplicas, r) })
	}
	isr, target := keep(np.ISR), keep(np.Replicas)
	if len(isr) == 0 || len(target) == 0 {
		return np
	}
	for _, r := range target {
		if !slices.Contains(isr, r) {
			return np
		}
	}
	np = withReplicas(np, target)
	np.ISR = isr
	if !slices.Contains(np.ISR, np.Leader) {
		np.Leader = -1
		np = electInto(np, live, unclean)
	}
	return np
}

// partitionRevert cancels p's reassignment (KRaft's
// PartitionReassignmentRevert), before finish: back to the original
// replicas, without the adding ones in the ISR. When only adding replicas
// were in sync the first original replica becomes the ISR, which is an
// unclean election: refused (INVALID_REPLICA_ASSIGNMENT) unless the topic
// enables unclean.leader.election.enable.
func partitionRevert(p Partition, live func(int32) bool, unclean bool) (Partition, error) {
	if !p.Reassigning() {
		return p, ErrNoReassignmentInProgress
	}
	original := slices.DeleteFunc(slices.Clone(p.Replicas), func(r int32) bool { return slices.Contains(p.AddingReplicas, r) })
	if len(original) == 0 {
		return p, errf(ErrInvalidReplicaAssignment, "addingReplicas contains all replicas")
	}
	np := withReplicas(p.clone(), original)
	np.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return slices.Contains(p.AddingReplicas, r) })
	if len(np.ISR) == 0 {
		if !unclean {
			return p, errf(ErrInvalidReplicaAssignment, "Unable to revert partition assignment because it would require an unclean leader election.")
		}
		np.ISR = []int32{original[0]}
	}
	if !slices.Contains(np.ISR, np.Leader) {
		np.Leader = -1
		np = electInto(np, live, unclean)
	}
	return np, nil
}

// withReplicas makes replicas np's assignment, with no reassignment in
// progress: the ISR (by the caller), offline replicas and recovery log
// ends keep only members of it.
func withReplicas(np Partition, replicas []int32) Partition {
	np.Replicas = replicas
	np.AddingReplicas, np.RemovingReplicas = nil, nil
	np.Offline = inReplicaOrder(replicas, np.Offline)
	np.Recovering = slices.DeleteFunc(np.Recovering, func(l LogEnd) bool { return !slices.Contains(replicas, l.Broker) })
	if len(np.Recovering) == 0 {
		np.Recovering = nil
	}
	return np
}

// sortedDifference returns the members of a that are not in b, sorted
// (nil for none).
func sortedDifference(a, b []int32) []int32 {
	var out []int32
	for _, r := range a {
		if !slices.Contains(b, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// inReplicaOrder returns the members of set in the order of replicas (nil
// for none).
func inReplicaOrder(replicas, set []int32) []int32 {
	var out []int32
	for _, r := range replicas {
		if slices.Contains(set, r) {
			out = append(out, r)
		}
	}
	return out
}

// replicaRemoved reports whether a member of old is not in replicas.
func replicaRemoved(old, replicas []int32) bool {
	for _, r := range old {
		if !slices.Contains(replicas, r) {
			return true
		}
	}
	return false
}

// checkReassignment asserts the shape of a reassignment in progress:
// adding and removing sorted, disjoint, replicas, and the removing ones
// the tail of the replica list.
func checkReassignment(p Partition) error {
	if !p.Reassigning() {
		return nil
	}
	if !slices.IsSorted(p.AddingReplicas) || !slices.IsSorted(p.RemovingReplicas) || hasDuplicates(p.AddingReplicas) ||
		hasDuplicates(p.RemovingReplicas) || len(p.AddingReplicas)+len(p.RemovingReplicas) > len(p.Replicas) {
		return fmt.Errorf("adding %v, removing %v", p.AddingReplicas, p.RemovingReplicas)
	}
	for _, r := range p.AddingReplicas {
		if !slices.Contains(p.Replicas, r) || slices.Contains(p.RemovingReplicas, r) {
			return fmt.Errorf("adding replica %d of %v, removing %v", r, p.Replicas, p.RemovingReplicas)
		}
	}
	if !slices.Equal(p.Replicas[len(p.Replicas)-len(p.RemovingReplicas):], p.RemovingReplicas) {
		return fmt.Errorf("removing replicas %v are not the tail of %v", p.RemovingReplicas, p.Replicas)
	}
	return nil
}

// encodeReassignments writes an AlterReassignments command's fields.
//
//	allowRFChange u8 | count | (topic str | partition i32 | cancel u8 | replicas (count, i32...), unless cancel)...
func encodeReassignments(e *encoder, allowRFChange bool, rs []Reassignment) {
	e.bool(allowRFChange)
	e.uvarint(len(rs))
	for _, r := range rs {
		e.str(r.Topic)
		e.i32(r.Partition)
		e.bool(r.Cancel)
		if !r.Cancel {
			e.int32s(r.Replicas)
		}
	}
}

func decodeReassignments(d *decoder) (bool, []Reassignment) {
	allow := d.bool()
	n := d.count(6)
	if n == 0 {
		if d.err == nil {
			d.fail("no partition to reassign")
		}
		return allow, nil
	}
	rs := make([]Reassignment, n)
	for i := range rs {
		rs[i] = Reassignment{Topic: d.str(), Partition: d.i32(), Cancel: d.bool()}
		if !rs[i].Cancel {
			rs[i].Replicas = d.int32s()
		}
	}
	return allow, rs
}

// decodeReassignResults decodes alterReassignments' payload: one error
// (nil for success) per reassignment, in request order.
func decodeReassignResults(b []byte, want int) ([]error, error) {
	d := &decoder{b: b}
	n := d.count(3)
	if d.err == nil && n != want {
		d.fail("%d results for %d reassignments", n, want)
	}
	out := make([]error, 0, n)
	for range n {
		code, msg := d.i16(), d.str()
		out = append(out, errorFromCode(code, msg))
	}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("reassignment results: %w", err)
	}
	return out, nil
}
