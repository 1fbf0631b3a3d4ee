package controller

import (
	"math/rand/v2"
	"slices"
)

// Replica placement, run by the raft leader before it proposes a topic or
// new partitions (the state machine only checks the result). It is Kafka's
// AdminUtils.assignReplicasToBrokers: partition p's first replica (its
// preferred leader) is broker (p + start) mod n of the id-sorted brokers,
// the others follow at a shift that grows each time p wraps around the
// brokers, and start and the first shift are random per call, so that
// leaders and followers spread evenly over the brokers and over many topics.
//
// Rack-aware placement applies as soon as one broker has a rack (brokers
// without one form the rack ""): the brokers are listed alternating racks
// (a1, b1, c1, a2, b2, ...) and a partition's next replica skips brokers on
// a rack that already holds one of its replicas until every rack does, so a
// partition's replicas sit on distinct racks as far as the racks allow.

// assignReplicas returns the replica lists of n new partitions numbered
// from first, with rf replicas each, over brokers (the unfenced ones).
func assignReplicas(brokers []Broker, n, rf, first int, rng *rand.Rand) ([][]int32, error) {
	nb := len(brokers)
	if rf < 1 || rf > nb {
		// Kafka's words (its clients and tools show them as they are).
		return nil, errf(ErrInvalidReplicationFactor,
			"Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.", rf, rf, nb)
	}
	if n < 1 || first+n > maxPartitions {
		return nil, errf(ErrInvalidPartitions, "%d partitions from %d, at most %d in all", n, first, maxPartitions)
	}
	rackAware := slices.ContainsFunc(brokers, func(b Broker) bool { return b.Rack != "" })
	var list []int32
	rackOf := map[int32]string{}
	numRacks := 1
	if rackAware {
		list, numRacks = rackAlternated(brokers)
		for _, b := range brokers {
			rackOf[b.ID] = b.Rack
		}
	} else {
		for _, b := range brokers {
			list = append(list, b.ID)
		}
		slices.Sort(list)
	}
	start, shift := rng.IntN(nb), rng.IntN(nb)
	out := make([][]int32, 0, n)
	for p := first; p < first+n; p++ {
		if p > 0 && p%nb == 0 {
			shift++
		}
		firstIdx := (p + start) % nb
		replicas := make([]int32, 1, rf)
		replicas[0] = list[firstIdx]
		if !rackAware {
			for j := range rf - 1 {
				replicas = append(replicas, list[replicaIndex(firstIdx, shift, j, nb)])
			}
			out = append(out, replicas)
			continue
		}
		racks := map[string]bool{rackOf[replicas[0]]: true}
		k := 0
		for len(replicas) < rf {
			// Every broker but the first is visited once per nb-1 steps, so
			// two rounds always find a candidate; more means a bug.
			if k > 2*nb {
				return nil, errf(ErrUnknown, "rack-aware placement did not converge")
			}
			b := list[replicaIndex(firstIdx, shift*numRacks, k, nb)]
			k++
			rack := rackOf[b]
			if (!racks[rack] || len(racks) == numRacks) && !slices.Contains(replicas, b) {
				replicas = append(replicas, b)
				racks[rack] = true
			}
		}
		out = append(out, replicas)
	}
	return out, nil
}

// replicaIndex is Kafka's: the j-th follower of the partition whose first
// replica is at index first, never first itself.
func replicaIndex(first, shift, j, nb int) int {
	return (first + 1 + (shift+j)%(nb-1)) % nb
}

// rackAlternated lists broker ids taking one from each rack in turn (racks
// and the brokers within a rack in sorted order), and counts the racks.
func rackAlternated(brokers []Broker) ([]int32, int) {
	byRack := map[string][]int32{}
	for _, b := range brokers {
		byRack[b.Rack] = append(byRack[b.Rack], b.ID)
	}
	var racks []string
	for r, ids := range byRack {
		slices.Sort(ids)
		racks = append(racks, r)
	}
	slices.Sort(racks)
	out := make([]int32, 0, len(brokers))
	for i := 0; len(out) < len(brokers); i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out, len(racks)
}
