package replication

import (
	"slices"
	"testing"
	"time"

	"ringlog/engine/acks"
)

// acks=all is two production rules working together: the leader's HW
// (Leader, here) and the engine's rule for the requests waiting on it
// (engine/acks). These tests drive both as the broker does: the node hands
// the leader's HW and committed ISR to the engine (engine.SetHW,
// engine.SetISR), which checks and answers with acks.Enough and acks.Queue.

// inSyncEnough is the engine's check of an acks=all produce against the
// count of the committed ISR that the node gives it.
func inSyncEnough(l *Leader, cfg Config) bool {
	return acks.Enough(int32(len(l.ISR())), int32(cfg.MinISR), int32(len(l.Replicas())))
}

func TestAcksAllCompletesInOrderExactlyWhenHWCovers(t *testing.T) {
	cfg := testConfig()
	cfg.MinISR = 2
	l := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, LEO: 0}, cfg, t0)
	var q acks.Queue[string]
	// Three produce requests: offsets 0-2, 3-4 and 5-8.
	for _, p := range []struct {
		name string
		leo  int64
	}{{"A", 3}, {"B", 5}, {"C", 9}} {
		if !inSyncEnough(l, cfg) {
			t.Fatalf("%s refused with ISR %v", p.name, l.ISR())
		}
		appendTo(t, l, p.leo, t0)
		q.Park(p.leo, p.name)
	}
	wantDue := func(want ...string) {
		t.Helper()
		if got := q.Due(l.HW()); !slices.Equal(got, want) {
			t.Fatalf("HW %d: due %q, want %q", l.HW(), got, want)
		}
	}
	wantDue()
	fetch(t, l, 2, 9, t0)
	fetch(t, l, 3, 2, t0)
	wantHW(t, l, 2)
	wantDue() // A ends at offset 2: HW 2 does not cover it
	fetch(t, l, 3, 3, t0)
	wantDue("A")
	fetch(t, l, 3, 4, t0)
	wantDue()
	fetch(t, l, 3, 5, t0)
	wantDue("B")
	if q.Len() != 1 {
		t.Fatalf("%d waiting", q.Len())
	}
	// The leader loses its role: what waits fails (engine.BecomeFollower).
	if got := q.Fail(-1); !slices.Equal(got, []string{"C"}) || q.Len() != 0 {
		t.Fatalf("failed %q, %d left", got, q.Len())
	}
}

// acks=all is refused once the committed ISR is below min.insync.replicas,
// and a pending expansion does not count (Kafka checks the committed ISR:
// the controller may yet refuse the expansion); it is taken again once the
// controller commits the expansion.
func TestAcksAllRefusedBelowMinISR(t *testing.T) {
	cfg := testConfig()
	cfg.MinISR = 2
	l := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, LEO: 0}, cfg, t0)
	if !inSyncEnough(l, cfg) {
		t.Fatalf("refused with ISR %v", l.ISR())
	}
	// The controller fences broker 2.
	if _, err := l.UpdateISR(PartitionState{PartitionEpoch: 1, ISR: []int32{1}}, t0); err != nil {
		t.Fatal(err)
	}
	if inSyncEnough(l, cfg) {
		t.Fatalf("acks=all taken with ISR %v, min.insync.replicas 2", l.ISR())
	}
	fetch(t, l, 3, 0, t0)
	c, ok := l.ExpandProposal()
	if !ok {
		t.Fatal("no expansion")
	}
	if err := l.ProposalSent(c); err != nil {
		t.Fatal(err)
	}
	if inSyncEnough(l, cfg) {
		t.Fatalf("acks=all taken on a pending expansion: ISR %v, maximal %v", l.ISR(), l.MaximalISR())
	}
	if _, err := l.ISRCommitted(c, PartitionState{PartitionEpoch: 2, ISR: c.ISR}, t0); err != nil {
		t.Fatal(err)
	}
	if !inSyncEnough(l, cfg) {
		t.Fatalf("refused with ISR %v", l.ISR())
	}
}

// Under min.insync.replicas the HW stays where it is whatever is appended
// (KAFKA-15583): consumers see nothing that is on fewer replicas than
// min.insync.replicas. It moves again once the ISR grows back.
func TestHWHoldsUnderMinISR(t *testing.T) {
	cfg := testConfig()
	cfg.MinISR = 2
	l := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, LEO: 4, HW: 4}, cfg, t0)
	if appendTo(t, l, 10, t0) {
		t.Fatal("HW moved with the ISR below min.insync.replicas")
	}
	now := t0.Add(time.Second) // follower 2 lagged long: it holds nothing
	fetch(t, l, 2, 10, now)
	wantHW(t, l, 4)
	c, ok := l.ExpandProposal()
	if !ok {
		t.Fatal("no expansion")
	}
	l.ProposalSent(c)
	// A pending expansion does not count towards min.insync.replicas.
	appendTo(t, l, 11, now)
	wantHW(t, l, 4)
	if moved, err := l.ISRCommitted(c, PartitionState{PartitionEpoch: 1, ISR: c.ISR}, now); err != nil || !moved {
		t.Fatalf("commit: moved %v err %v", moved, err)
	}
	wantHW(t, l, 10)
}
