package group

import (
	"bytes"
	"cmp"
	"slices"
)

// The server-side assignors of KIP-848 consumer groups ("Assignors"):
// the coordinator computes the target assignment of every member when the
// group epoch moves past the assignment epoch. A member picks one with
// server_assignor; the group uses the one most of its members ask for.
const (
	assignorUniform = "uniform"
	assignorRange   = "range"
)

// assignMember is what an assignor knows of a member.
type assignMember struct {
	id         string
	instanceID *string
	// topics are the ids of the existing topics the member subscribes
	// to, sorted.
	topics [][16]byte
	// current is the member's target assignment so far (the assignors
	// are sticky to it, Kafka's uniform assignor more than its range one).
	current assignment
}

// assignFunc computes a target assignment: for every member, the
// partitions it should own. topics gives the partition count of every
// topic any member subscribes to.
type assignFunc func(members []assignMember, topics map[[16]byte]int32) map[string]assignment

func assignorFor(name string) assignFunc {
	switch name {
	case assignorUniform:
		return assignUniform
	case assignorRange:
		return assignRange
	}
	return nil
}

type tpKey struct {
	id [16]byte
	p  int32
}

func compareTP(a, b tpKey) int {
	if c := bytes.Compare(a.id[:], b.id[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.p, b.p)
}

func sortedTopicIDs(topics map[[16]byte]int32) [][16]byte {
	ids := make([][16]byte, 0, len(topics))
	for id := range topics {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(x, y [16]byte) int { return bytes.Compare(x[:], y[:]) })
	return ids
}

// assignUniform spreads partitions so that every member owns as many as
// any other it could share them with (counts differ by at most one among
// members of the same subscription), while moving as few partitions as
// possible from the current target assignment, as Kafka's
// UniformAssignor promises:
//
//  1. every member keeps the partitions of its current target that still
//     exist and that it still subscribes to;
//  2. each partition nobody keeps goes to the least loaded member
//     subscribed to its topic;
//  3. while a member owns two partitions more than a member that could
//     take one of them (both subscribed to its topic), one moves.
//
// With the same subscription everywhere step 3 moves exactly the
// partitions the most loaded members have beyond their fair share: a
// member that gives never receives (the largest count only falls and the
// smallest only rises), so no partition moves twice. Members are taken in
// id order, so the result depends only on the input.
func assignUniform(members []assignMember, topics map[[16]byte]int32) map[string]assignment {
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b assignMember) int { return cmp.Compare(a.id, b.id) })
	subscribers := map[[16]byte][]int{}
	for i, m := range ms {
		for _, id := range m.topics {
			if _, ok := topics[id]; ok {
				subscribers[id] = append(subscribers[id], i)
			}
		}
	}
	owner := map[tpKey]int{}
	owned := make([][]tpKey, len(ms))
	give := func(i int, tp tpKey) {
		owner[tp] = i
		owned[i] = append(owned[i], tp)
	}
	// 1. Stickiness.
	for i, m := range ms {
		for _, id := range m.current.topicIDs() {
			if !slices.Contains(m.topics, id) {
				continue
			}
			for _, p := range m.current[id] {
				tp := tpKey{id, p}
				if _, taken := owner[tp]; !taken && p >= 0 && p < topics[id] {
					give(i, tp)
				}
			}
		}
	}
	// 2. Partitions nobody keeps (new topics and partitions, those of
	// members gone).
	leastLoaded := func(subs []int) int {
		best := -1
		for _, i := range subs {
			if best < 0 || len(owned[i]) < len(owned[best]) {
				best = i
			}
		}
		return best
	}
	for _, id := range sortedTopicIDs(topics) {
		subs := subscribers[id]
		if len(subs) == 0 {
			continue
		}
		for p := range topics[id] {
			tp := tpKey{id, p}
			if _, taken := owner[tp]; !taken {
				give(leastLoaded(subs), tp)
			}
		}
	}
	// 3. Balance. Every move lowers the sum of the squared counts, so the
	// loop ends; the bound only guards against a bug turning it into a
	// stall of the shard.
	order := make([]int, len(ms))
	for i := range order {
		order[i] = i
	}
	for budget := 4*len(owner) + len(ms); budget > 0; budget-- {
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(owned[b]), len(owned[a])) })
		moved := false
		for _, from := range order {
			parts := owned[from]
			for j := len(parts) - 1; j >= 0; j-- {
				to := leastLoaded(subscribers[parts[j].id])
				if to < 0 || len(owned[to]) > len(parts)-2 {
					continue
				}
				tp := parts[j]
				owned[from] = slices.Delete(parts, j, j+1)
				give(to, tp)
				moved = true
				break
			}
			if moved {
				break
			}
			if len(parts) <= 1 {
				break // nobody below can be two behind a later member
			}
		}
		if !moved {
			break
		}
	}
	out := make(map[string]assignment, len(ms))
	for i, m := range ms {
		a := assignment{}
		slices.SortFunc(owned[i], compareTP)
		for _, tp := range owned[i] {
			a[tp.id] = append(a[tp.id], tp.p)
		}
		out[m.id] = a
	}
	return out
}

// assignRange gives each member contiguous ranges of every topic it
// subscribes to, as Kafka's RangeAssignor does: for a topic of N
// partitions and M subscribed members, each member gets N/M partitions
// and the first N%M members one more, members ordered with static members
// first by instance id, then the others by member id. With the same
// subscription everywhere and the same partition count in every topic the
// assignment is co-partitioned (a member owns the same partition numbers
// of every topic), which joins of streams rely on. Ordering static
// members by instance id makes it stable across their restarts.
func assignRange(members []assignMember, topics map[[16]byte]int32) map[string]assignment {
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b assignMember) int {
		switch {
		case a.instanceID != nil && b.instanceID != nil:
			return cmp.Compare(*a.instanceID, *b.instanceID)
		case a.instanceID != nil:
			return -1
		case b.instanceID != nil:
			return 1
		}
		return cmp.Compare(a.id, b.id)
	})
	out := make(map[string]assignment, len(ms))
	for _, m := range ms {
		out[m.id] = assignment{}
	}
	for _, id := range sortedTopicIDs(topics) {
		var subs []string
		for _, m := range ms {
			if slices.Contains(m.topics, id) {
				subs = append(subs, m.id)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n := topics[id]
		quota, extra := n/int32(len(subs)), n%int32(len(subs))
		next := int32(0)
		for i, mid := range subs {
			size := quota
			if int32(i) < extra {
				size++
			}
			for p := next; p < next+size; p++ {
				out[mid][id] = append(out[mid][id], p)
			}
			next += size
		}
	}
	return out
}
