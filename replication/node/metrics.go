package node

import (
	"slices"
	"sync/atomic"

	"ringlog/engine"
	"ringlog/replication/controller"
)

// What an operator's dashboard reads from the replication of one broker:
// Kafka's kafka.server:type=ReplicaManager metrics. The gauges are counted
// when asked (ReplicaStats, on a metrics scrape) from the state the node
// keeps anyway; only the ISR changes are counted as they happen, where the
// node learns of them.

// isrCounters count the ISR changes of the partitions this broker leads.
type isrCounters struct {
	shrinks, expands, failed atomic.Int64
}

// ReplicaStats are one broker's replica counts, as Kafka's ReplicaManager
// reports them.
type ReplicaStats struct {
	// Partitions counts the partitions this broker holds a replica of,
	// offline ones included (PartitionCount); Leaders those it leads
	// (LeaderCount).
	Partitions, Leaders int
	// UnderReplicated counts the partitions this broker leads whose ISR
	// is smaller than their replica set (UnderReplicatedPartitions).
	UnderReplicated int
	// UnderMinISR and AtMinISR count the partitions this broker leads
	// whose ISR is below, and exactly at, min.insync.replicas
	// (UnderMinIsrPartitionCount, AtMinIsrPartitionCount).
	UnderMinISR, AtMinISR int
	// Reassigning counts the partitions this broker leads that are being
	// reassigned (ReassigningPartitions).
	Reassigning int
	// ISRShrinks and ISRExpands count the changes of a led partition's
	// committed ISR that removed, and that added, a member: from an
	// AlterPartition answer or from the metadata (the controller removes
	// a fenced broker itself). FailedISRUpdates counts the AlterPartition
	// requests the controller refused or did not answer. Since the start
	// of the process.
	ISRShrinks, ISRExpands, FailedISRUpdates int64
}

// ReplicaStats counts this broker's replicas now. It takes each
// partition's lock in turn, briefly: it is meant for a metrics scrape.
func (n *Node) ReplicaStats() ReplicaStats {
	st := ReplicaStats{
		ISRShrinks: n.isr.shrinks.Load(), ISRExpands: n.isr.expands.Load(), FailedISRUpdates: n.isr.failed.Load(),
	}
	n.mu.Lock()
	parts := make([]*part, 0, len(n.parts))
	for _, pt := range n.parts {
		parts = append(parts, pt)
	}
	n.mu.Unlock()
	st.Partitions = len(parts)
	img := n.Image()
	// min.insync.replicas by topic, looked up once per topic (the
	// engine copies a topic's overrides on every lookup).
	minISRs := map[string]int{}
	for _, pt := range parts {
		pt.mu.Lock()
		l := pt.leader
		var isr, replicas int
		if l != nil && pt.role == engine.RoleLeader {
			isr, replicas = len(l.ISR()), len(l.Replicas())
		}
		pt.mu.Unlock()
		if l == nil || replicas == 0 {
			continue
		}
		st.Leaders++
		if isr < replicas {
			st.UnderReplicated++
		}
		// min.insync.replicas capped at the replication factor, as the
		// leader's decisions and Kafka's effectiveMinIsr read it: a
		// partition of one replica is at its minimum, not under it.
		minISR, ok := minISRs[pt.tp.Topic]
		if !ok {
			minISR = n.topicConfig(pt.tp.Topic).MinISR
			minISRs[pt.tp.Topic] = minISR
		}
		minISR = max(1, min(minISR, replicas))
		switch {
		case isr < minISR:
			st.UnderMinISR++
		case isr == minISR:
			st.AtMinISR++
		}
		if reassigning(img, pt.tp) {
			st.Reassigning++
		}
	}
	return st
}

// reassigning reports whether img shows tp being reassigned (KIP-455:
// replicas being added or removed). Partitions cannot move yet: once
// controller.Partition has its adding and removing replicas, this is
// whether img.Partition(tp.Topic, tp.Partition) has either non-empty.
func reassigning(img *controller.Image, tp engine.TP) bool { return false }

// countISRChange counts a change of a led partition's committed ISR from
// before to after: a shrink if a member left, an expansion if one joined
// (both, for a change that did both).
func (n *Node) countISRChange(before, after []int32) {
	for _, id := range before {
		if !slices.Contains(after, id) {
			n.isr.shrinks.Add(1)
			break
		}
	}
	for _, id := range after {
		if !slices.Contains(before, id) {
			n.isr.expands.Add(1)
			break
		}
	}
}
