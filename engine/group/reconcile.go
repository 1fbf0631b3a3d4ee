package group

import (
	"bytes"
	"maps"
	"slices"
)

// assignment is a set of partitions by topic id, as KIP-848 names
// partitions (the ConsumerGroupHeartbeat API and the records speak in
// topic ids, so that a topic deleted and created again under the same
// name is another topic). Partitions are sorted and unique; a topic with
// no partition has no entry.
type assignment map[[16]byte][]int32

func (a assignment) clone() assignment {
	c := make(assignment, len(a))
	for id, ps := range a {
		c[id] = slices.Clone(ps)
	}
	return c
}

func (a assignment) equal(b assignment) bool {
	return maps.EqualFunc(a, b, slices.Equal)
}

func (a assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) has(id [16]byte, p int32) bool {
	_, ok := slices.BinarySearch(a[id], p)
	return ok
}

// topicIDs are a's topics in byte order, for deterministic encodings.
func (a assignment) topicIDs() [][16]byte {
	ids := make([][16]byte, 0, len(a))
	for id := range a {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(x, y [16]byte) int { return bytes.Compare(x[:], y[:]) })
	return ids
}

func (a assignment) add(id [16]byte, p int32) {
	ps := a[id]
	i, ok := slices.BinarySearch(ps, p)
	if !ok {
		a[id] = slices.Insert(ps, i, p)
	}
}

// memberState is where a member stands in its reconciliation (KIP-848,
// "Member Reconciliation"); the values are Kafka's MemberState, as the
// ConsumerGroupCurrentMemberAssignment record stores them.
type memberState int8

const (
	// memberStable: the member has its target assignment at the target
	// assignment epoch (or waits for nothing).
	memberStable memberState = 0
	// memberUnrevoked: the member must revoke partitions before it moves
	// to a newer epoch.
	memberUnrevoked memberState = 1
	// memberUnreleased: the member is at the target epoch but some of its
	// target partitions are still held by other members that have not
	// revoked them yet.
	memberUnreleased memberState = 2
	// memberUnknown: a state written by a newer version of the software.
	memberUnknown memberState = 127
)

func (s memberState) String() string {
	switch s {
	case memberStable:
		return "STABLE"
	case memberUnrevoked:
		return "UNREVOKED_PARTITIONS"
	case memberUnreleased:
		return "UNRELEASED_PARTITIONS"
	}
	return "UNKNOWN"
}

// reconciler computes one step of a member's reconciliation towards its
// target assignment. It is a pure function of its inputs, so that the
// state machine can be driven step by step in tests.
type reconciler struct {
	targetEpoch int32
	target      assignment
	// owned are the partitions the member reports owning in this
	// heartbeat; nil when it did not report them (an unchanged set).
	owned assignment
	// heldByOther reports whether another member still holds a partition
	// (assigned to it, or pending its revocation): such a partition can
	// be given to this member only once released.
	heldByOther func(id [16]byte, p int32) bool
}

// next returns the member's next state, or the current one when it
// cannot move (it still owns partitions it must revoke). fenced is set
// for a member in a state this version does not know that did not give
// up its partitions: it must rejoin (FENCED_MEMBER_EPOCH).
//
// The rules are KIP-848's: a member first revokes what it must give up,
// staying at its epoch until it reports those partitions gone; only then
// does it move to the target epoch, and it is given a partition only once
// no other member holds it, so a partition is never owned by two members.
func (rc *reconciler) next(cur *currentAssignment) (nxt *currentAssignment, fenced bool) {
	switch cur.state {
	case memberStable:
		if cur.epoch == rc.targetEpoch {
			return cur, false
		}
		return rc.compute(cur, cur.epoch), false
	case memberUnrevoked:
		if rc.ownsAny(cur.revoking) {
			return cur, false
		}
		// Revoked: the member leaves its epoch. If the target moved on
		// and asks for more revocations, it waits at the epoch after
		// its last one, which it never held partitions at.
		return rc.compute(cur, cur.epoch+1), false
	case memberUnreleased:
		return rc.compute(cur, cur.epoch), false
	}
	if rc.owned == nil || len(rc.owned) > 0 {
		return cur, true
	}
	return rc.compute(cur, rc.targetEpoch), false
}

// ownsAny reports whether the member still owns any of ps by its report;
// a member that did not report its partitions is assumed to own them.
func (rc *reconciler) ownsAny(ps assignment) bool {
	if rc.owned == nil {
		return len(ps) > 0
	}
	for id, owned := range rc.owned {
		for _, p := range owned {
			if ps.has(id, p) {
				return true
			}
		}
	}
	return false
}

func (rc *reconciler) compute(cur *currentAssignment, epoch int32) *currentAssignment {
	kept, revoking, adding := assignment{}, assignment{}, assignment{}
	unreleased := false
	ids := map[[16]byte]bool{}
	for id := range rc.target {
		ids[id] = true
	}
	for id := range cur.assigned {
		ids[id] = true
	}
	for id := range ids {
		for _, p := range cur.assigned[id] {
			if rc.target.has(id, p) {
				kept.add(id, p)
			} else {
				revoking.add(id, p)
			}
		}
		for _, p := range rc.target[id] {
			if cur.assigned.has(id, p) {
				continue
			}
			if rc.heldByOther(id, p) {
				unreleased = true
				continue
			}
			adding.add(id, p)
		}
	}
	next := &currentAssignment{prevEpoch: cur.prevEpoch, revoking: assignment{}, since: map[tpKey]int32{}}
	setEpoch := func(e int32) {
		// The previous epoch is the last one the member was told of
		// before this one: a member whose answer was lost comes back
		// with it (Kafka moves it even when the epoch stays the same,
		// which forgets the epoch the member may still hold).
		next.epoch = e
		if e != cur.epoch {
			next.prevEpoch = cur.epoch
		}
	}
	switch {
	case len(revoking) > 0 && rc.ownsAny(revoking):
		// Revocations first: the member keeps its epoch and gets only
		// what it keeps, so that it gives up the rest.
		next.state = memberUnrevoked
		setEpoch(epoch)
		next.assigned, next.revoking = kept, revoking
	default:
		for id, ps := range adding {
			for _, p := range ps {
				kept.add(id, p)
			}
		}
		next.state = memberStable
		if unreleased {
			next.state = memberUnreleased
		}
		setEpoch(rc.targetEpoch)
		next.assigned = kept
	}
	// A partition the member keeps (or still revokes) keeps the epoch it
	// was assigned at; one it gets now is assigned at its new epoch.
	for _, a := range []assignment{next.assigned, next.revoking} {
		for id, ps := range a {
			for _, p := range ps {
				if e, ok := cur.assignedSince(id, p); ok {
					next.since[tpKey{id, p}] = e
				} else {
					next.since[tpKey{id, p}] = next.epoch
				}
			}
		}
	}
	return next
}

// reconciledTo reports whether a member has nothing left to do at this
// target epoch.
func (c *currentAssignment) reconciledTo(targetEpoch int32) bool {
	return c.epoch == targetEpoch && c.state == memberStable
}

func (c *currentAssignment) equal(o *currentAssignment) bool {
	return c.epoch == o.epoch && c.prevEpoch == o.prevEpoch && c.state == o.state &&
		c.assigned.equal(o.assigned) && c.revoking.equal(o.revoking)
}
