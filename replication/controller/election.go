package controller

import (
	"slices"

	"ringlog/replication"
)

// Partition state changes, each a pure function of a partition and the
// liveness of brokers. They follow KRaft's PartitionChangeBuilder:
//
//   - the leader epoch grows by one with every change of leader (to or
//     from -1 too), and only then; an ISR change alone does not bump it;
//   - the partition epoch grows by one with every change at all;
//   - a leader is chosen from the live ISR in replica order; with
//     unclean.leader.election.enable=true and no live ISR member, the first
//     live replica leads and becomes the whole ISR (data may be lost, which
//     is what the operator asked for);
//   - a fenced broker leaves every ISR but stays as its last member, so that
//     the partition can be led again by the only replica known to have all
//     of its committed records when that broker returns;
//   - a replica its broker reported offline (Partition.Offline) leaves the
//     ISR the same way and is no candidate for leader, clean or unclean,
//     until its broker registers again without it.
//
// The choice of leader and the ISR that goes with it are the replication
// package's (replication.ElectLeader, replication.FencedISR), which the
// simulation of replication also calls; this file adds the epochs.

const configUncleanLeaderElection = "unclean.leader.election.enable"

// eligible is live without the replicas p holds offline: those neither
// lead nor join the ISR (KIP-858: a replica in an offline log directory
// is not an acceptable leader).
func eligible(p Partition, live func(int32) bool) func(int32) bool {
	if len(p.Offline) == 0 {
		return live
	}
	return func(id int32) bool { return live(id) && !slices.Contains(p.Offline, id) }
}

// partitionFenced returns p after broker id was fenced (live already
// reports id as not live).
func partitionFenced(p Partition, id int32, live func(int32) bool, unclean bool) (Partition, bool) {
	np := p.clone()
	np.ISR = replication.FencedISR(np.ISR, id)
	if np.Leader == id {
		np.Leader = -1
		np = electInto(np, live, unclean)
	}
	return finish(p, np)
}

// partitionOffline returns p after broker id reported its replica offline
// (off) or no longer offline. Going offline it leaves the ISR as a fenced
// broker does (replication.FencedISR: not as the last member) and, if it
// led, the partition gets the next eligible leader or none; back online,
// it may lead the partition if it has no leader.
func partitionOffline(p Partition, id int32, off bool, live func(int32) bool, unclean bool) (Partition, bool) {
	np := p.clone()
	np.Offline = slices.DeleteFunc(slices.Clone(p.Replicas), func(r int32) bool {
		if r == id {
			return !off
		}
		return !slices.Contains(p.Offline, r)
	})
	if len(np.Offline) == 0 {
		np.Offline = nil
	}
	if off {
		np.ISR = replication.FencedISR(np.ISR, id)
		if np.Leader == id {
			np.Leader = -1
		}
	}
	if np.Leader == -1 {
		np = electInto(np, live, unclean)
	}
	return finish(p, np)
}

// partitionElect gives a leaderless partition a leader if a replica can
// take it.
func partitionElect(p Partition, live func(int32) bool, unclean bool) (Partition, bool) {
	if p.Leader != -1 {
		return p, false
	}
	return finish(p, electInto(p.clone(), live, unclean))
}

// partitionPreferred moves leadership to the preferred replica
// (Replicas[0]) when it is in the ISR and live.
func partitionPreferred(p Partition, live func(int32) bool) (Partition, error) {
	pref := p.Replicas[0]
	if p.Leader == pref {
		return p, ErrElectionNotNeeded
	}
	if !slices.Contains(p.ISR, pref) || !eligible(p, live)(pref) {
		return p, ErrPreferredLeaderNotAvail
	}
	np := p.clone()
	np.Leader = pref
	np, _ = finish(p, np)
	return np, nil
}

// electInto sets np.Leader (which is -1) and np.ISR as
// replication.ElectLeader chooses them among the eligible replicas (live,
// not offline); np stays leaderless when nobody can lead.
func electInto(np Partition, live func(int32) bool, unclean bool) Partition {
	e, _ := replication.ElectLeader(np.Replicas, np.ISR, eligible(np, live), unclean)
	np.Leader, np.ISR = e.Leader, e.ISR
	return np
}

// finish bumps the epochs of np against the old state p and reports
// whether anything changed.
func finish(p, np Partition) (Partition, bool) {
	changed := np.Leader != p.Leader || !slices.Equal(np.ISR, p.ISR) || !slices.Equal(np.Replicas, p.Replicas) ||
		!slices.Equal(np.Offline, p.Offline)
	if !changed {
		return p, false
	}
	if np.Leader != p.Leader {
		np.LeaderEpoch = p.LeaderEpoch + 1
	}
	np.PartitionEpoch = p.PartitionEpoch + 1
	return np, true
}
