package replication

import "slices"

// Election is the controller's choice of a partition leader.
type Election struct {
	Leader int32
	// Unclean is set when the leader came from outside the ISR: it may
	// lack committed data, which is then lost (and the ISR becomes the new
	// leader alone).
	Unclean bool
}

// ElectLeader chooses a leader as Kafka's controller does for an online or
// unclean election (PartitionChangeBuilder.electAnyLeader): the current
// leader if it is still a live ISR member (no needless change; -1 for
// none); else the first live ISR member in replicas order, so that the
// preferred replica wins when it can; else, only when unclean election is
// enabled for the topic (unclean.leader.election.enable, off by default),
// the first live replica. ok is false when no leader can be chosen: the
// partition stays offline until an ISR member returns.
func ElectLeader(current int32, replicas, isr []int32, live func(int32) bool, unclean bool) (Election, bool) {
	clean := func(id int32) bool { return slices.Contains(replicas, id) && slices.Contains(isr, id) && live(id) }
	if current >= 0 && clean(current) {
		return Election{Leader: current}, true
	}
	for _, id := range replicas {
		if clean(id) {
			return Election{Leader: id}, true
		}
	}
	if unclean {
		for _, id := range replicas {
			if live(id) {
				return Election{Leader: id, Unclean: true}, true
			}
		}
	}
	return Election{Leader: -1}, false
}
