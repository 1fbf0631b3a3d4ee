package group

import (
	"testing"
)

// The reconciliation state machine of one member (KIP-848, "Member
// Reconciliation"), step by step.

func asg(id [16]byte, ps ...int32) assignment {
	a := assignment{}
	for _, p := range ps {
		a.add(id, p)
	}
	return a
}

func heldBy(held assignment) func([16]byte, int32) bool {
	return func(id [16]byte, p int32) bool { return held.has(id, p) }
}

func TestReconcileRevokeFirst(t *testing.T) {
	t1 := tid(1)
	cur := &currentAssignment{epoch: 3, prevEpoch: 2, state: memberStable, assigned: asg(t1, 0, 1, 2), revoking: assignment{}}
	// The target takes 1 and 2 away and gives 3, which is free.
	rc := &reconciler{targetEpoch: 5, target: asg(t1, 0, 3), heldByOther: heldBy(nil)}

	// A keepalive (owned not reported): the member must revoke first; it
	// keeps its epoch and is told to keep only 0. Nothing is added
	// before the revocation.
	next, fenced := rc.next(cur)
	if fenced || next.state != memberUnrevoked || next.epoch != 3 || !next.assigned.equal(asg(t1, 0)) || !next.revoking.equal(asg(t1, 1, 2)) {
		t.Fatalf("first step: %+v", next)
	}
	cur = next

	// Still owning 1: no progress, whatever else it reports.
	rc.owned = asg(t1, 0, 1)
	if next, _ := rc.next(cur); next != cur {
		t.Fatalf("moved while still owning a revoked partition: %+v", next)
	}
	rc.owned = nil
	if next, _ := rc.next(cur); next != cur {
		t.Fatalf("moved on a keepalive: %+v", next)
	}

	// Revoked: the member moves to the target epoch and gets 3.
	rc.owned = asg(t1, 0)
	next, _ = rc.next(cur)
	if next.state != memberStable || next.epoch != 5 || next.prevEpoch != 3 || !next.assigned.equal(asg(t1, 0, 3)) || len(next.revoking) != 0 {
		t.Fatalf("after revoking: %+v", next)
	}
	if !next.reconciledTo(5) {
		t.Fatal("not reconciled")
	}
}

func TestReconcileUnreleased(t *testing.T) {
	t1 := tid(1)
	held := asg(t1, 1, 2) // another member still revoking them
	cur := &currentAssignment{epoch: 4, state: memberStable, assigned: asg(t1, 0), revoking: assignment{}}
	rc := &reconciler{targetEpoch: 6, target: asg(t1, 0, 1, 2, 3), heldByOther: heldBy(held), owned: asg(t1, 0)}

	// It moves to the target epoch at once, with what is free (3), and
	// waits for the rest.
	next, _ := rc.next(cur)
	if next.state != memberUnreleased || next.epoch != 6 || next.prevEpoch != 4 || !next.assigned.equal(asg(t1, 0, 3)) {
		t.Fatalf("first step: %+v", next)
	}
	cur = next
	if next, _ := rc.next(cur); !next.equal(cur) {
		t.Fatalf("moved while the partitions are held: %+v", next)
	}

	// One is released: given; then the other: stable. The previous epoch
	// stays the one before the target epoch.
	held = asg(t1, 2)
	rc.heldByOther = heldBy(held)
	next, _ = rc.next(cur)
	if next.state != memberUnreleased || !next.assigned.equal(asg(t1, 0, 1, 3)) || next.epoch != 6 || next.prevEpoch != 4 {
		t.Fatalf("one released: %+v", next)
	}
	cur = next
	rc.heldByOther = heldBy(nil)
	next, _ = rc.next(cur)
	if next.state != memberStable || !next.assigned.equal(asg(t1, 0, 1, 2, 3)) || next.prevEpoch != 4 {
		t.Fatalf("all released: %+v", next)
	}
}

// TestReconcileTargetMovesWhileRevoking: the target changes again while
// the member revokes: after the revocation it waits at its epoch + 1 for
// the new revocations, never at an epoch that gave it partitions.
func TestReconcileTargetMovesWhileRevoking(t *testing.T) {
	t1 := tid(1)
	cur := &currentAssignment{epoch: 2, state: memberUnrevoked, assigned: asg(t1, 0, 1), revoking: asg(t1, 2)}
	rc := &reconciler{targetEpoch: 7, target: asg(t1, 0), owned: asg(t1, 0, 1), heldByOther: heldBy(nil)}
	next, _ := rc.next(cur)
	if next.state != memberUnrevoked || next.epoch != 3 || !next.assigned.equal(asg(t1, 0)) || !next.revoking.equal(asg(t1, 1)) {
		t.Fatalf("%+v", next)
	}
	// A member that already dropped what the target takes goes straight
	// to the target.
	rc.owned = asg(t1, 0)
	next, _ = rc.next(cur)
	if next.state != memberStable || next.epoch != 7 || !next.assigned.equal(asg(t1, 0)) {
		t.Fatalf("%+v", next)
	}
}

func TestReconcileUnknownState(t *testing.T) {
	t1 := tid(1)
	cur := &currentAssignment{epoch: 2, state: memberUnknown, assigned: asg(t1, 0), revoking: assignment{}}
	rc := &reconciler{targetEpoch: 3, target: asg(t1, 0, 1), owned: asg(t1, 0), heldByOther: heldBy(nil)}
	if _, fenced := rc.next(cur); !fenced {
		t.Fatal("a member in a state of a newer version that owns partitions is not fenced")
	}
	rc.owned = assignment{}
	if next, fenced := rc.next(cur); fenced || next.state != memberStable || next.epoch != 3 {
		t.Fatalf("a member in an unknown state that gave everything up: %+v, fenced %v", next, fenced)
	}
}
