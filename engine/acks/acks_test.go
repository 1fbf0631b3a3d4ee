package acks

import (
	"math"
	"slices"
	"testing"
)

func TestEnough(t *testing.T) {
	for _, tc := range []struct {
		inSync, minInsync int32
		want              bool
	}{
		{3, 2, true},
		{2, 2, true},
		{1, 2, false},
		{1, 1, true},
		{1, 0, true},
		// min.insync.replicas is capped at the replica count, as Kafka 4
		// caps it (effectiveMinIsr): 5 over three replicas needs all three.
		{3, 5, true},
		{2, 5, false},
	} {
		if got := Enough(tc.inSync, tc.minInsync, 3); got != tc.want {
			t.Errorf("Enough(%d in sync, min %d, 3 replicas) = %v, want %v", tc.inSync, tc.minInsync, got, tc.want)
		}
	}
}

// A single-replica topic with min.insync.replicas 2 takes acks=all
// produces, as Kafka 4 takes them: min.insync.replicas above the replica
// count once refused every one (NOT_ENOUGH_REPLICAS, found by
// internal/difftest).
func TestEnoughMinInsyncAboveReplicationFactor(t *testing.T) {
	if !Enough(1, 2, 1) {
		t.Error("one replica in sync of one, min.insync.replicas 2: refused")
	}
	if Enough(1, 2, 2) {
		t.Error("one replica in sync of two, min.insync.replicas 2: taken")
	}
}

// Requests are answered exactly when the HW reaches the offset after their
// last record, in the order they were parked.
func TestDueExactlyWhenHWCovers(t *testing.T) {
	var q Queue[string]
	if got := q.Min(); got != math.MaxInt64 {
		t.Fatalf("empty queue: Min %d", got)
	}
	// Three produce requests: offsets 0-2, 3-4 and 5-8.
	q.Park(3, "A")
	q.Park(5, "B")
	q.Park(9, "C")
	if q.Min() != 3 || q.Len() != 3 {
		t.Fatalf("Min %d, Len %d", q.Min(), q.Len())
	}
	for _, step := range []struct {
		hw   int64
		want []string
	}{
		{0, nil},
		{2, nil}, // A ends at offset 2: HW 2 does not cover it
		{3, []string{"A"}},
		{4, nil},
		{5, []string{"B"}},
		{8, nil},
	} {
		if got := q.Due(step.hw); !slices.Equal(got, step.want) {
			t.Fatalf("HW %d: due %q, want %q", step.hw, got, step.want)
		}
	}
	if q.Min() != 9 || q.Len() != 1 {
		t.Fatalf("Min %d, Len %d after A and B", q.Min(), q.Len())
	}
	if got := q.Due(20); !slices.Equal(got, []string{"C"}) || q.Len() != 0 || q.Min() != math.MaxInt64 {
		t.Fatalf("HW 20: due %q, Len %d, Min %d", got, q.Len(), q.Min())
	}
}

// The retry of a duplicate waits for the original's end, below the ends
// of requests parked before it: nothing assumes ends in order.
func TestEndsOutOfOrder(t *testing.T) {
	var q Queue[string]
	q.Park(10, "late")
	q.Park(4, "duplicate")
	q.Park(12, "later")
	if q.Min() != 4 {
		t.Fatalf("Min %d", q.Min())
	}
	if got := q.Due(4); !slices.Equal(got, []string{"duplicate"}) {
		t.Fatalf("HW 4: due %q", got)
	}
	if q.Min() != 10 {
		t.Fatalf("Min %d after the duplicate", q.Min())
	}
	q.Park(6, "another duplicate")
	if got := q.Due(12); !slices.Equal(got, []string{"late", "later", "another duplicate"}) {
		t.Fatalf("HW 12: due %q, want the order they were parked in", got)
	}
}

// A truncation fails what it cut; losing the role fails everything.
func TestFail(t *testing.T) {
	var q Queue[string]
	q.Park(3, "A")
	q.Park(5, "B")
	q.Park(9, "C")
	if got := q.Fail(5); !slices.Equal(got, []string{"C"}) {
		t.Fatalf("truncation to 5 failed %q", got)
	}
	if got := q.Fail(5); got != nil {
		t.Fatalf("again: %q", got)
	}
	q.Park(7, "D")
	if got := q.Fail(-1); !slices.Equal(got, []string{"A", "B", "D"}) || q.Len() != 0 || q.Min() != math.MaxInt64 {
		t.Fatalf("fail all: %q, Len %d, Min %d", got, q.Len(), q.Min())
	}
	// The queue is usable again.
	q.Park(1, "E")
	if got := q.Due(1); !slices.Equal(got, []string{"E"}) {
		t.Fatalf("after failing all: due %q", got)
	}
}

// What leaves the queue is not kept alive by it.
func TestRemovedValuesAreReleased(t *testing.T) {
	var q Queue[*int]
	for i := range 4 {
		q.Park(int64(i+1), new(int))
	}
	backing := q.waiting[:cap(q.waiting)]
	q.Due(2)
	for i := q.Len(); i < len(backing); i++ {
		if backing[i].v != nil {
			t.Fatalf("slot %d still holds a removed value", i)
		}
	}
	q.Fail(-1)
	if q.waiting != nil {
		t.Fatal("an empty queue keeps its array")
	}
}
