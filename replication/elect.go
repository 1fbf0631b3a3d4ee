package replication

import "slices"

// The controller's rules for a partition's leader and ISR when brokers come
// and go. replication/controller applies them in its state machine (its
// partitionFenced and partitionElect, election.go, which add the epochs);
// the simulation's controller (cluster_test.go) calls the same functions,
// so the elections it checks are the ones the quorum makes.

// Election is the controller's choice of a partition leader.
type Election struct {
	// Leader is the broker chosen, -1 for none.
	Leader int32
	// ISR is the ISR that goes with the choice: the one given, unless the
	// election was unclean.
	ISR []int32
	// Unclean is set when the leader came from outside the ISR: it may
	// lack committed data, which is then lost, and it becomes the whole
	// ISR (the only replica known to have what it has).
	Unclean bool
}

// ElectLeader chooses a leader for a partition that has none (its leader
// was fenced, or it was offline), as KRaft's PartitionChangeBuilder does:
// the first live ISR member in replicas order, so that the preferred
// replica wins when it can; else, only when unclean election is enabled for
// the topic (unclean.leader.election.enable, off by default), the first
// live replica, which becomes the ISR alone. ok is false when no leader can
// be chosen: the partition stays offline (Leader -1, the ISR as given)
// until an ISR member returns. isr is not modified; a clean election
// returns it as it is.
func ElectLeader(replicas, isr []int32, live func(int32) bool, unclean bool) (e Election, ok bool) {
	for _, id := range replicas {
		if slices.Contains(isr, id) && live(id) {
			return Election{Leader: id, ISR: isr}, true
		}
	}
	if unclean {
		for _, id := range replicas {
			if live(id) {
				return Election{Leader: id, ISR: []int32{id}, Unclean: true}, true
			}
		}
	}
	return Election{Leader: -1, ISR: isr}, false
}

// FencedISR is the ISR after broker id was fenced: without id, unless id
// is its last member. KRaft keeps the last member so that, when that broker
// returns, the partition can be led again by the only replica known to
// have all of its committed records. isr is not modified.
func FencedISR(isr []int32, id int32) []int32 {
	if len(isr) <= 1 || !slices.Contains(isr, id) {
		return isr
	}
	return slices.DeleteFunc(slices.Clone(isr), func(r int32) bool { return r == id })
}
