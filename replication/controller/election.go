package controller

import (
	"slices"

	"ringlog/replication"
)

// Partition state changes, each a pure function of a partition and the
// liveness of brokers. They follow KRaft's PartitionChangeBuilder:
//
//   - the leader epoch grows by one with every change of leader (to or
//     from -1 too), and when a replica leaves the assignment (a
//     reassignment completing or cancelled); an ISR change alone does not
//     bump it;
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

// partitionUnclean elects a leader for a partition that has none, among
// its live replicas whether in the ISR or not (Kafka's ElectLeaders with
// election type UNCLEAN: it may lose committed records, as
// unclean.leader.election.enable does).
func partitionUnclean(p Partition, live func(int32) bool) (Partition, error) {
	if p.Leader != -1 {
		return p, ErrElectionNotNeeded
	}
	np, changed := partitionElect(p, live, true)
	if !changed || np.Leader == -1 {
		return p, ErrEligibleLeadersNotAvail
	}
	return np, nil
}

// electInto sets np.Leader (which is -1) and np.ISR as
// replication.ElectLeader chooses them among the eligible replicas (live,
// not offline); np stays leaderless when nobody can lead. A partition in
// recovery (every live ISR member recovered its log from an unclean
// shutdown) waits instead until every replica has come back and reported
// its log end, then the longest log leads (electRecovered).
func electInto(np Partition, live func(int32) bool, unclean bool) Partition {
	if recovering(np, live) {
		if recoveryComplete(np, live) {
			return electRecovered(np, live)
		}
		return np // the others, or the controller's timeout (cmdElectRecovery)
	}
	e, _ := replication.ElectLeader(np.Replicas, np.ISR, eligible(np, live), unclean)
	np.Leader, np.ISR = e.Leader, e.ISR
	if np.Leader != -1 {
		// Its log is the partition's now: whatever it reported is moot.
		np.Recovering = withoutLogEnd(np.Recovering, np.Leader)
		// An unclean election may leave an ISR that is a
		// reassignment's whole target (reassign.go).
		np = completeReassignment(np, live, unclean)
	}
	return np
}

// Unclean recovery, after KIP-966. Under -flush never (Kafka's default) an
// acknowledgement rests on the page caches of the ISR; when every member
// of the ISR loses power at once, each keeps a different part of what it
// had, and electing the first to return (the rule above) would truncate
// the others to it, losing what they kept. So the controller waits: a
// leaderless partition whose live ISR members all registered with a log
// recovered from an unclean shutdown (Partition.Recovering holds each
// one's reported end) gets no leader until every replica that is not
// offline has registered and reported, or until the controller's
// UncleanRecoveryTimeout passes (then cmdElectRecovery elects among those
// there). The replica whose log ends last (the newest last leader epoch,
// then the greatest LEO) leads and is the ISR alone: within one epoch the
// replicas' logs are prefixes of one another, so it holds what any of
// them kept; a longer log of an older epoch is a divergent tail the new
// epoch would cut anyway. Replicas that shut down cleanly report nothing
// and take part only as the rule above lets them: a clean ISR member
// holds every committed record and is elected at once.

// recovering reports whether leaderless np is in unclean recovery: it has
// live ISR members and each reported a recovered log end.
func recovering(np Partition, live func(int32) bool) bool {
	if len(np.Recovering) == 0 {
		return false
	}
	el := eligible(np, live)
	n := 0
	for _, r := range np.ISR {
		if !el(r) {
			continue
		}
		if _, ok := logEndOf(np.Recovering, r); !ok {
			return false
		}
		n++
	}
	return n > 0
}

// recoveryComplete reports whether every replica of np that is not
// offline is live and reported its log end.
func recoveryComplete(np Partition, live func(int32) bool) bool {
	for _, r := range np.Replicas {
		if slices.Contains(np.Offline, r) {
			continue
		}
		if _, ok := logEndOf(np.Recovering, r); !ok || !live(r) {
			return false
		}
	}
	return true
}

// electRecovered makes the eligible replica with the longest reported log
// np's leader and whole ISR (ties go to replica order), and drops its
// report. np stays leaderless if no eligible replica reported.
func electRecovered(np Partition, live func(int32) bool) Partition {
	el := eligible(np, live)
	best, bestEnd := int32(-1), LogEnd{}
	for _, r := range np.Replicas {
		end, ok := logEndOf(np.Recovering, r)
		if !ok || !el(r) {
			continue
		}
		if best == -1 || end.LastEpoch > bestEnd.LastEpoch || end.LastEpoch == bestEnd.LastEpoch && end.LEO > bestEnd.LEO {
			best, bestEnd = r, end
		}
	}
	if best == -1 {
		return np
	}
	// The others' reports stay until the leader's AlterPartition shows
	// it serving: a leader chosen so that registers again at once (its
	// registration's reply was lost, and it retried) is fenced and must be
	// chosen again, which needs them. A report that outlives a truncation
	// is of an older epoch than the leader's log, and loses to it.
	np.Leader, np.ISR = best, []int32{best}
	np.Recovering = withoutLogEnd(np.Recovering, best)
	return np
}

func logEndOf(v []LogEnd, broker int32) (LogEnd, bool) {
	for _, l := range v {
		if l.Broker == broker {
			return l, true
		}
	}
	return LogEnd{}, false
}

// withoutLogEnd returns v without broker's end (v itself when it has
// none; nil when nothing is left).
func withoutLogEnd(v []LogEnd, broker int32) []LogEnd {
	if _, ok := logEndOf(v, broker); !ok {
		return v
	}
	out := slices.DeleteFunc(slices.Clone(v), func(l LogEnd) bool { return l.Broker == broker })
	if len(out) == 0 {
		return nil
	}
	return out
}

// finish bumps the epochs of np against the old state p and reports
// whether anything changed.
func finish(p, np Partition) (Partition, bool) {
	changed := np.Leader != p.Leader || !slices.Equal(np.ISR, p.ISR) || !slices.Equal(np.Replicas, p.Replicas) ||
		!slices.Equal(np.Offline, p.Offline) || !slices.Equal(np.AddingReplicas, p.AddingReplicas) ||
		!slices.Equal(np.RemovingReplicas, p.RemovingReplicas)
	if !changed {
		if !slices.Equal(np.Recovering, p.Recovering) {
			// The controller's own bookkeeping: no epoch moves, brokers
			// see no change.
			return np, true
		}
		return p, false
	}
	// A replica leaving the assignment (a reassignment completing or
	// cancelled) bumps the leader epoch too, as KRaft's
	// PartitionChangeBuilder does: the removed replica's fetches are
	// fenced, and the leader starts its view of the followers afresh.
	if np.Leader != p.Leader || replicaRemoved(p.Replicas, np.Replicas) {
		np.LeaderEpoch = p.LeaderEpoch + 1
	}
	np.PartitionEpoch = p.PartitionEpoch + 1
	return np, true
}
