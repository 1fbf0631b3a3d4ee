package replication

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// acks renders Ready's answers for comparison.
func acks(as []Ack) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = fmt.Sprint(a.Token)
		if a.Err != nil {
			out[i] += ":" + a.Err.Error()
		}
	}
	return out
}

func wantReady(t *testing.T, l *Leader, now time.Time, want ...string) {
	t.Helper()
	if got := acks(l.Ready(now)); !slices.Equal(got, want) && (len(got) != 0 || len(want) != 0) {
		t.Fatalf("ready %q, want %q", got, want)
	}
}

func TestAcksAllCompletesInOrderExactlyWhenHWCovers(t *testing.T) {
	cfg := testConfig()
	cfg.MinISR = 2
	l := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, LEO: 0}, cfg, t0)
	deadline := t0.Add(time.Second)
	// Three produce requests: offsets 0-2, 3-4 and 5-8.
	for _, p := range []struct {
		name string
		leo  int64
	}{{"A", 3}, {"B", 5}, {"C", 9}} {
		if err := l.CanAppendAcksAll(); err != nil {
			t.Fatal(err)
		}
		appendTo(t, l, p.leo, t0)
		if err := l.WaitHW(p.leo, deadline, p.name); err != nil {
			t.Fatal(err)
		}
	}
	wantReady(t, l, t0)
	fetch(t, l, 2, 9, t0)
	fetch(t, l, 3, 2, t0)
	wantHW(t, l, 2)
	wantReady(t, l, t0) // A ends at offset 2: HW 2 does not cover it
	fetch(t, l, 3, 3, t0)
	wantReady(t, l, t0, "A")
	fetch(t, l, 3, 4, t0)
	wantReady(t, l, t0)
	fetch(t, l, 3, 5, t0)
	wantReady(t, l, t0, "B")
	if l.Waiting() != 1 {
		t.Fatalf("%d waiting", l.Waiting())
	}
	wantReady(t, l, deadline.Add(-time.Nanosecond))
	wantReady(t, l, deadline, "C:"+ErrRequestTimedOut.Error())

	// Requests are queued in append order, never for what is not appended.
	if err := l.WaitHW(10, deadline, "D"); !errors.Is(err, ErrInvalidOffsets) {
		t.Fatalf("wait beyond the LEO: %v", err)
	}
	l.WaitHW(9, deadline, "E")
	if err := l.WaitHW(8, deadline, "F"); !errors.Is(err, ErrInvalidOffsets) {
		t.Fatalf("wait going back: %v", err)
	}
	if got := l.DrainWaiters(); !slices.Equal(got, []any{"E"}) || l.Waiting() != 0 {
		t.Fatalf("drained %v, %d left", got, l.Waiting())
	}
}

func TestNotEnoughReplicas(t *testing.T) {
	for _, tc := range []struct {
		isr    []int32
		minISR int
		err    error
	}{
		{[]int32{1, 2, 3}, 2, nil},
		{[]int32{1, 2}, 2, nil},
		{[]int32{1}, 2, ErrNotEnoughReplicas},
		{[]int32{1}, 1, nil},
		{[]int32{1}, 0, nil},
		// min.insync.replicas above the replication factor is capped.
		{[]int32{1, 2, 3}, 5, nil},
		{[]int32{1, 2}, 5, ErrNotEnoughReplicas},
	} {
		cfg := testConfig()
		cfg.MinISR = tc.minISR
		l := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2, 3}, ISR: tc.isr, LEO: 0}, cfg, t0)
		if err := l.CanAppendAcksAll(); !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Errorf("ISR %v min %d: %v, want %v", tc.isr, tc.minISR, err, tc.err)
		}
	}
}

// The ISR shrank below min.insync.replicas after the append: the produce
// is answered NOT_ENOUGH_REPLICAS_AFTER_APPEND when the HW covers it, and
// the next acks=all produce is refused before it is appended.
func TestNotEnoughReplicasAfterAppend(t *testing.T) {
	cfg := testConfig()
	cfg.MinISR = 2
	l := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, LEO: 0}, cfg, t0)
	appendTo(t, l, 3, t0)
	l.WaitHW(3, t0.Add(time.Second), "A")
	fetch(t, l, 2, 3, t0)
	// The controller fences broker 2 before the waiter is looked at.
	l.UpdateISR(PartitionState{PartitionEpoch: 1, ISR: []int32{1}}, t0)
	wantReady(t, l, t0, "A:"+ErrNotEnoughReplicasAfterAppend.Error())
	if err := l.CanAppendAcksAll(); !errors.Is(err, ErrNotEnoughReplicas) {
		t.Fatalf("acks=all with ISR %v: %v", l.ISR(), err)
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

func TestWaitersAreBounded(t *testing.T) {
	l := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, LEO: 1}, testConfig(), t0)
	for i := range maxWaiters {
		if err := l.WaitHW(1, t0.Add(time.Second), i); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.WaitHW(1, t0.Add(time.Second), "one more"); !errors.Is(err, ErrTooManyWaiters) {
		t.Fatalf("wait past the limit: %v", err)
	}
	fetch(t, l, 2, 1, t0)
	if got := l.Ready(t0); len(got) != maxWaiters || got[0].Token != 0 || got[maxWaiters-1].Token != maxWaiters-1 {
		t.Fatalf("ready %d", len(got))
	}
}
