package controller

import (
	"slices"
	"testing"
)

// TestLostAlterPartitionAnswerKeepsExpansionPending: the quorum applies a
// leader's ISR expansion but the answer never reaches it (the request
// timed out after the entry committed, or submit sent a forward again
// after its connection broke and the copy found the epoch it had bumped).
// replication/node used to drop the change on any error
// (Leader.ISRRejected): the quorum's ISR then held a follower the
// leader's HW no longer waited for, the leader acknowledged records the
// follower did not have, and the quorum could elect it without them. The
// controller simulation found it (a schedule seeds find only now and
// then, so it is scripted here); AlterPartitionOutcome is the rule now,
// which node and the simulation both call.
func TestLostAlterPartitionAnswerKeepsExpansionPending(t *testing.T) {
	s := newSim(t, 0, testing.Verbose())
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.check(); err != nil {
			t.Fatal(err)
		}
	}
	must(s.setup())
	tp := TopicPartition{"a", 0} // replicas [0 1 2], leader 0
	b0, b1, b2 := s.brokers[0], s.brokers[1], s.brokers[2]
	catchUp := func(fs ...*simBroker) {
		for range 2 { // the second fetch tells the leader the first's end
			for _, f := range fs {
				must(s.fetchN(f, tp, 1<<30))
			}
		}
	}
	alter := func() simAlter {
		t.Helper()
		must(s.isrCheck(b0, tp))
		if len(s.alters) != 1 {
			t.Fatalf("%d AlterPartitions in flight, want 1", len(s.alters))
		}
		a := s.alters[0]
		s.alters = nil
		return a
	}

	// Broker 2 lags and leaves the ISR.
	must(s.produce(b0, tp))
	catchUp(b1)
	s.now = s.now.Add(2 * simLagTimeMax)
	catchUp(b1)
	a := alter()
	s.alters = []simAlter{a}
	must(s.processAlter(0, false))
	if p, _ := s.img.Partition("a", 0); !slices.Equal(p.ISR, []int32{0, 1}) {
		t.Fatalf("ISR %v after the shrink", p.ISR)
	}

	// It catches up; the expansion is applied, its answer lost.
	catchUp(b2)
	a = alter()
	if !slices.Equal(a.change.ISR, []int32{0, 1, 2}) {
		t.Fatalf("proposed %v", a.change.ISR)
	}
	res, err := s.propose(a.command())
	must(err)
	if res.err != nil {
		t.Fatal(res.err)
	}
	s.alterFailed(a, ErrRequestTimedOut)

	// The leader appends; broker 1 fetches, broker 2 does not for longer
	// than replica.lag.time.max.ms (so it no longer holds the HW as a
	// caught-up follower would). The HW must wait for broker 2, which
	// the quorum has in the ISR.
	must(s.produce(b0, tp))
	s.now = s.now.Add(2 * simLagTimeMax)
	catchUp(b1)
	if hw, leo := b0.parts[tp].leader.HW(), len(b2.parts[tp].log); hw > int64(leo) {
		t.Fatalf("HW %d above the LEO %d of ISR member 2", hw, leo)
	}

	// The change goes again, finds the partition epoch it bumped, and the
	// metadata settles it; then the HW moves with broker 2.
	a = alter()
	s.alters = []simAlter{a}
	must(s.processAlter(0, false))
	must(s.deliver(b0))
	if isr := b0.parts[tp].leader.ISR(); !slices.Equal(isr, []int32{0, 1, 2}) {
		t.Fatalf("leader's ISR %v", isr)
	}
	catchUp(b2)
	if hw, leo := b0.parts[tp].leader.HW(), len(b0.parts[tp].log); hw != int64(leo) {
		t.Fatalf("HW %d, LEO %d", hw, leo)
	}
}

// TestReassignLeaderlessElectsUnclean: a reassignment that adds a live
// replica to a partition whose replicas are all fenced tries an election,
// as every partition change does in KRaft; with unclean leader election
// on, the new replica leads at once. The state machine used to leave the
// partition offline until some broker registered or was unfenced (the
// controller simulation, seed 19).
func TestReassignLeaderlessElectsUnclean(t *testing.T) {
	s := newFSMState(t)
	for id := range int32(3) {
		s.register(id, "")
	}
	s.create("t", map[string]string{configUncleanLeaderElection: "true"}, []int32{0, 1, 2})
	s.fence(1)
	s.fence(2)
	s.fence(0)
	s.register(3, "")
	wantPart(t, s.part("t", 0), []int32{0, 1, 2}, []int32{0}, -1, nil, nil)
	s.reassignOK([]int32{3, 0, 1})
	p := s.part("t", 0)
	wantPart(t, p, []int32{3, 0, 1, 2}, []int32{3}, 3, []int32{3}, []int32{2})
	if p.LeaderEpoch != 2 {
		t.Fatalf("leader epoch %d, want 2 (0, none, 3)", p.LeaderEpoch)
	}

	// Without unclean election the partition waits for its ISR.
	s = newFSMState(t)
	for id := range int32(3) {
		s.register(id, "")
	}
	s.create("t", nil, []int32{0, 1, 2})
	s.fence(1)
	s.fence(2)
	s.fence(0)
	s.register(3, "")
	s.reassignOK([]int32{3, 0, 1})
	wantPart(t, s.part("t", 0), []int32{3, 0, 1, 2}, []int32{0}, -1, []int32{3}, []int32{2})
}
