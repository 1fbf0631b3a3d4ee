package node

import (
	"errors"

	"ringlog/engine"
)

// A reassignment (KIP-455) reaches a broker as a change of a partition's
// replica list. A broker added to it becomes a follower through the
// ordinary path (applyPartition) and catches up with its fetch stream; the
// leader learns of the new follower at the same leader epoch (its
// replication.Leader takes the new replicas in UpdateISR) and proposes it
// for the ISR once it caught up, which lets the controller complete the
// reassignment. A broker removed from it does what Kafka's StopReplica
// with delete does: it stops following or leading the partition (apply
// drops its part) and its log is emptied here. The engine hosts every
// partition of a topic that has a replica on this broker, so the
// partition stays, without a role and without records; when no partition
// of the topic is left here, apply deletes the topic itself.

// stopReplicas stops and empties the engine partitions of others (hosted
// topics' partitions this broker is no replica of, with their leader
// epochs) that were not stopped yet: a leader or follower role becomes a
// follower's at the partition's leader epoch (producer appends and
// acks=all waits fail with NOT_LEADER_OR_FOLLOWER, and no stream feeds
// it), and a log with records or a moved start is truncated fully to
// offset 0. It runs on the apply goroutine, and also after a restart, for
// replicas removed while the broker was away.
func (n *Node) stopReplicas(others map[engine.TP]int32) {
	for tp := range n.stopped {
		if _, ok := others[tp]; !ok {
			delete(n.stopped, tp) // a replica here again, or gone
		}
	}
	for tp, epoch := range others {
		if n.stopped[tp] {
			continue
		}
		if err := n.stopReplica(tp, epoch); err != nil {
			if !errors.Is(err, engine.ErrStorage) && n.ctx.Err() == nil {
				n.log.Warn("node: cannot stop a replica moved away", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			}
			continue
		}
		n.stopped[tp] = true
	}
}

func (n *Node) stopReplica(tp engine.TP, epoch int32) error {
	st, err := n.eng.State(tp)
	if err != nil {
		return err
	}
	if st.Role != engine.RoleNone {
		if err := n.eng.BecomeFollower(tp, max(epoch, st.LeaderEpoch)); err != nil {
			return err
		}
	}
	if st.LEO == 0 && st.LogStartOffset == 0 {
		return nil
	}
	if err := n.eng.TruncateFullyAndStartAt(tp, 0); err != nil {
		return err
	}
	n.log.Info("node: replica removed, log emptied", "topic", tp.Topic, "partition", tp.Partition, "leo", st.LEO)
	return nil
}
