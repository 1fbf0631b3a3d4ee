package replication

import (
	"errors"
	"slices"
	"testing"
	"time"
)

var t0 = time.UnixMilli(1_700_000_000_000)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// testConfig has a short lag so that tests can step over it.
func testConfig() Config { return Config{LagTimeMax: ms(100), MinISR: 1} }

func mustLeader(t *testing.T, s LeaderState, cfg Config, now time.Time) *Leader {
	t.Helper()
	l, err := NewLeader(s, cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func fetch(t *testing.T, l *Leader, id int32, off int64, now time.Time) bool {
	t.Helper()
	moved, err := l.FollowerFetch(id, off, now)
	if err != nil {
		t.Fatalf("fetch by %d at %d: %v", id, off, err)
	}
	return moved
}

func appendTo(t *testing.T, l *Leader, leo int64, now time.Time) bool {
	t.Helper()
	moved, err := l.LeaderAppended(leo, now)
	if err != nil {
		t.Fatal(err)
	}
	return moved
}

func wantHW(t *testing.T, l *Leader, hw int64) {
	t.Helper()
	if l.HW() != hw {
		t.Fatalf("HW %d, want %d", l.HW(), hw)
	}
}

func wantISR(t *testing.T, l *Leader, isr, maximal []int32) {
	t.Helper()
	if !slices.Equal(l.ISR(), isr) || !slices.Equal(l.MaximalISR(), maximal) {
		t.Fatalf("ISR %v maximal %v, want %v and %v", l.ISR(), l.MaximalISR(), isr, maximal)
	}
}

func TestNewLeaderValidates(t *testing.T) {
	ok := LeaderState{ID: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, LEO: 10, HW: 5}
	for name, mod := range map[string]func(s *LeaderState){
		"leader not in ISR":     func(s *LeaderState) { s.ISR = []int32{2, 3} },
		"ISR outside replicas":  func(s *LeaderState) { s.ISR = []int32{1, 4} },
		"duplicate replica":     func(s *LeaderState) { s.Replicas = []int32{1, 2, 2} },
		"duplicate ISR member":  func(s *LeaderState) { s.ISR = []int32{1, 1} },
		"negative id":           func(s *LeaderState) { s.Replicas = []int32{1, -2}; s.ISR = []int32{1} },
		"no replicas":           func(s *LeaderState) { s.Replicas = nil },
		"too many replicas":     func(s *LeaderState) { s.Replicas = make([]int32, maxReplicas+1) },
		"HW above LEO":          func(s *LeaderState) { s.HW = 11 },
		"negative LEO":          func(s *LeaderState) { s.LEO, s.HW = -1, -1 },
		"leader not a replica":  func(s *LeaderState) { s.ID = 7 },
		"ISR of another leader": func(s *LeaderState) { s.ID = 3 },
	} {
		s := ok
		s.Replicas = slices.Clone(ok.Replicas)
		s.ISR = slices.Clone(ok.ISR)
		mod(&s)
		if _, err := NewLeader(s, testConfig(), t0); !errors.Is(err, ErrInvalidAssignment) && !errors.Is(err, ErrInvalidOffsets) {
			t.Errorf("%s: NewLeader error %v", name, err)
		}
	}
	if _, err := NewLeader(ok, testConfig(), t0); err != nil {
		t.Fatal(err)
	}
}

// The walkthrough from the issue, on the leader's state alone (the same
// walk runs on real logs in TestWalkthroughOnSegmentLogs).
func TestWalkthroughLEOAndHW(t *testing.T) {
	l := mustLeader(t, LeaderState{ID: 0, Replicas: []int32{0, 1, 2}, ISR: []int32{0, 1, 2}, LEO: 2, HW: 2}, testConfig(), t0)
	fetch(t, l, 1, 2, t0)
	fetch(t, l, 2, 2, t0)
	wantHW(t, l, 2)

	// The leader takes two records: LEO 4, HW 2.
	if appendTo(t, l, 4, t0.Add(ms(1))) {
		t.Fatal("HW moved on the leader's append alone")
	}
	wantHW(t, l, 2)

	// Follower 1 copies both, follower 2 one: LEOs 4, 4, 3, HW 3.
	if fetch(t, l, 1, 4, t0.Add(ms(2))) {
		t.Fatal("HW moved while follower 2 was at 2")
	}
	if !fetch(t, l, 2, 3, t0.Add(ms(3))) {
		t.Fatal("HW did not move to 3")
	}
	wantHW(t, l, 3)

	// All have copied: HW 4.
	if !fetch(t, l, 2, 4, t0.Add(ms(4))) {
		t.Fatal("HW did not move to 4")
	}
	wantHW(t, l, 4)
}

func TestNewLeaderKnowsNoFollowerLEO(t *testing.T) {
	l := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, LEO: 10, HW: 5}, testConfig(), t0)
	wantHW(t, l, 5)
	// Follower 3 had offsets up to 10 under the previous leader, but has
	// not fetched from this one: the HW waits for it.
	fetch(t, l, 2, 10, t0)
	wantHW(t, l, 5)
	if leo, ok := l.FollowerLEO(3); !ok || leo != -1 {
		t.Fatalf("follower 3 LEO %d %v, want unknown", leo, ok)
	}
	fetch(t, l, 3, 8, t0)
	wantHW(t, l, 8)

	// A leader alone in its ISR moves the HW to its LEO at once.
	solo := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, LEO: 10, HW: 5}, testConfig(), t0)
	wantHW(t, solo, 10)
	if solo.EpochStartOffset() != 10 {
		t.Fatalf("epoch start %d", solo.EpochStartOffset())
	}
}

func TestFollowerFetchRefusesBadFetches(t *testing.T) {
	l := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, LEO: 10}, testConfig(), t0)
	for _, tc := range []struct {
		id  int32
		off int64
		err error
	}{
		{9, 5, ErrNotReplica},
		{1, 5, ErrNotReplica}, // the leader does not fetch from itself
		{2, 11, ErrOffsetOutOfRange},
		{2, -1, ErrOffsetOutOfRange},
	} {
		if _, err := l.FollowerFetch(tc.id, tc.off, t0); !errors.Is(err, tc.err) {
			t.Errorf("fetch by %d at %d: %v, want %v", tc.id, tc.off, err, tc.err)
		}
	}
	if leo, _ := l.FollowerLEO(2); leo != -1 {
		t.Fatalf("a refused fetch changed the follower's LEO to %d", leo)
	}
	if _, err := l.LeaderAppended(9, t0); !errors.Is(err, ErrInvalidOffsets) {
		t.Fatalf("LEO going back: %v", err)
	}
}

// A follower whose fetches always trail a stream of appends by one, but
// always reach the LEO the leader had at its previous fetch, stays in the
// ISR (KAFKA-4485); one that trails by two leaves it after LagTimeMax.
func TestLastCaughtUpTimeFollowsThePreviousFetch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		behind int // appends the follower's fetch offset trails by
		shrunk bool
	}{
		{"one append behind", 1, false},
		{"two appends behind", 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, LEO: 0}, testConfig(), t0)
			leos := []int64{0}
			now := t0
			for round := 1; round <= 30; round++ {
				now = now.Add(ms(40))
				leo := int64(round * 2)
				appendTo(t, l, leo, now)
				leos = append(leos, leo)
				fetch(t, l, 2, leos[max(0, len(leos)-1-tc.behind)], now)
			}
			// 1.2 s passed, twelve times LagTimeMax.
			c, shrink := l.ShrinkProposal(now)
			if shrink != tc.shrunk {
				t.Fatalf("shrink %v (%v), want %v", shrink, c.ISR, tc.shrunk)
			}
		})
	}
}

func TestShrinkAfterLagTimeMax(t *testing.T) {
	l := mustLeader(t, LeaderState{ID: 1, LeaderEpoch: 4, PartitionEpoch: 7, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, LEO: 10, HW: 10}, testConfig(), t0)
	fetch(t, l, 2, 10, t0)
	fetch(t, l, 3, 10, t0)
	appendTo(t, l, 12, t0.Add(ms(10)))
	fetch(t, l, 2, 12, t0.Add(ms(20)))
	// Follower 3 last reached the LEO at t0. Exactly LagTimeMax later it is
	// still in sync; a millisecond more and it is not.
	if c, ok := l.ShrinkProposal(t0.Add(ms(100))); ok {
		t.Fatalf("shrink at exactly LagTimeMax: %v", c)
	}
	fetch(t, l, 2, 12, t0.Add(ms(90)))
	c, ok := l.ShrinkProposal(t0.Add(ms(101)))
	if !ok || !slices.Equal(c.ISR, []int32{1, 2}) || c.LeaderEpoch != 4 || c.PartitionEpoch != 7 {
		t.Fatalf("shrink proposal %v %v", c, ok)
	}
	if err := l.ProposalSent(c); err != nil {
		t.Fatal(err)
	}
	// The committed ISR does not change until the controller says so, and
	// a leaving member still holds the HW.
	wantISR(t, l, []int32{1, 2, 3}, []int32{1, 2, 3})
	appendTo(t, l, 14, t0.Add(ms(102)))
	fetch(t, l, 2, 14, t0.Add(ms(103)))
	wantHW(t, l, 10)
	if _, again := l.ShrinkProposal(t0.Add(ms(500))); again {
		t.Fatal("a second proposal while one is in flight")
	}
	moved, err := l.ISRCommitted(c, PartitionState{LeaderEpoch: 4, PartitionEpoch: 8, ISR: []int32{2, 1}}, t0.Add(ms(104)))
	if err != nil || !moved {
		t.Fatalf("commit: moved %v err %v", moved, err)
	}
	wantISR(t, l, []int32{1, 2}, []int32{1, 2})
	wantHW(t, l, 14)
	if l.PartitionEpoch() != 8 {
		t.Fatalf("partition epoch %d", l.PartitionEpoch())
	}
	// The leader never leaves its own ISR, however long its follower lags.
	appendTo(t, l, 15, t0.Add(ms(105)))
	if c, ok := l.ShrinkProposal(t0.Add(time.Hour)); !ok || !slices.Equal(c.ISR, []int32{1}) {
		t.Fatalf("shrink after an hour: %v %v", c, ok)
	}
}

// A follower with the leader's LEO is in sync however long ago it last
// fetched: there is nothing to fetch. The first append changes that.
func TestIdleFollowerAtTheLEOStaysInSync(t *testing.T) {
	l := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, LEO: 10, HW: 10}, testConfig(), t0)
	fetch(t, l, 2, 10, t0)
	if _, ok := l.ShrinkProposal(t0.Add(time.Minute)); ok {
		t.Fatal("an idle follower at the LEO was found out of sync")
	}
	appendTo(t, l, 11, t0.Add(time.Minute))
	if _, ok := l.ShrinkProposal(t0.Add(time.Minute)); !ok {
		t.Fatal("a follower that last caught up a minute ago was kept")
	}
}

func TestExpandWhenCaughtUp(t *testing.T) {
	// The leader took over at LEO 10 with HW 6; follower 2 has not fetched.
	l := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{3, 1, 2}, ISR: []int32{1, 2}, LEO: 10, HW: 6}, testConfig(), t0)
	fetch(t, l, 3, 5, t0)
	if c, ok := l.ExpandProposal(); ok {
		t.Fatalf("expansion of a follower below the HW: %v", c)
	}
	// At 8 the follower has the HW but not everything up to this epoch's
	// start: it could lack committed data between the two.
	fetch(t, l, 3, 8, t0)
	if c, ok := l.ExpandProposal(); ok {
		t.Fatalf("expansion of a follower below the epoch start: %v", c)
	}
	fetch(t, l, 3, 10, t0)
	if err := l.SetFenced(3, true); err != nil {
		t.Fatal(err)
	}
	if c, ok := l.ExpandProposal(); ok {
		t.Fatalf("expansion of a fenced follower: %v", c)
	}
	l.SetFenced(3, false)
	c, ok := l.ExpandProposal()
	if !ok || !slices.Equal(c.ISR, []int32{3, 1, 2}) {
		t.Fatalf("expansion %v %v, want the ISR in replicas order", c, ok)
	}
	if err := l.ProposalSent(c); err != nil {
		t.Fatal(err)
	}
	if err := l.ProposalSent(c); !errors.Is(err, ErrProposalInFlight) {
		t.Fatalf("second send: %v", err)
	}
	if p, ok := l.Pending(); !ok || !p.same(c) {
		t.Fatalf("pending %v %v", p, ok)
	}
	wantISR(t, l, []int32{1, 2}, []int32{3, 1, 2})
	if _, err := l.ISRCommitted(c, PartitionState{ISR: []int32{1, 2, 3}}, t0); err != nil {
		t.Fatal(err)
	}
	wantISR(t, l, []int32{3, 1, 2}, []int32{3, 1, 2})
}

// Kafka adds one follower per AlterPartition.
func TestExpandOneAtATime(t *testing.T) {
	l := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, LEO: 10, HW: 10}, testConfig(), t0)
	fetch(t, l, 2, 10, t0)
	fetch(t, l, 3, 10, t0)
	c, ok := l.ExpandProposal()
	if !ok || !slices.Equal(c.ISR, []int32{1, 2}) {
		t.Fatalf("first expansion %v", c)
	}
	l.ProposalSent(c)
	if _, ok := l.ExpandProposal(); ok {
		t.Fatal("a second expansion while one is in flight")
	}
	l.ISRCommitted(c, PartitionState{PartitionEpoch: 1, ISR: c.ISR}, t0)
	c, ok = l.ExpandProposal()
	if !ok || !slices.Equal(c.ISR, []int32{1, 2, 3}) || c.PartitionEpoch != 1 {
		t.Fatalf("second expansion %v", c)
	}
}

// While an expansion is in flight the joining follower holds the HW
// (maximal ISR); once the controller refuses it, the old ISR stands and the
// HW is free of it.
func TestPendingExpansionHoldsHWUntilRejected(t *testing.T) {
	l := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, LEO: 10, HW: 10}, testConfig(), t0)
	fetch(t, l, 2, 10, t0)
	fetch(t, l, 3, 10, t0)
	c, ok := l.ExpandProposal()
	if !ok {
		t.Fatal("no expansion")
	}
	l.ProposalSent(c)
	later := t0.Add(ms(500)) // follower 3 last caught up long before
	appendTo(t, l, 20, later)
	fetch(t, l, 2, 20, later)
	wantHW(t, l, 10)
	if l.MaybeIncrementHW(later) {
		t.Fatal("HW moved past a pending member")
	}
	if err := l.ISRRejected(ISRChange{PartitionEpoch: 9, ISR: []int32{1, 2, 3}}); !errors.Is(err, ErrStale) {
		t.Fatalf("rejection of another change: %v", err)
	}
	if err := l.ISRRejected(c); err != nil {
		t.Fatal(err)
	}
	wantISR(t, l, []int32{1, 2}, []int32{1, 2})
	if !l.MaybeIncrementHW(later) {
		t.Fatal("HW still held after the rejection")
	}
	wantHW(t, l, 20)
}

// A follower outside the ISR that is caught up (within LagTimeMax) holds
// the HW so that it can ever reach it and join; once it lags, or is
// fenced, it no longer does.
func TestCaughtUpFollowerOutsideISRHoldsHW(t *testing.T) {
	l := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2}, ISR: []int32{1}, LEO: 10, HW: 10}, testConfig(), t0)
	fetch(t, l, 2, 10, t0) // reaches the LEO: caught up at t0
	if appendTo(t, l, 15, t0.Add(ms(50))) {
		t.Fatal("HW moved past a caught-up follower")
	}
	if !appendTo(t, l, 16, t0.Add(ms(101))) {
		t.Fatal("HW held by a follower lagging more than LagTimeMax")
	}
	wantHW(t, l, 16)

	f := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2}, ISR: []int32{1}, LEO: 10, HW: 10}, testConfig(), t0)
	fetch(t, f, 2, 10, t0)
	f.SetFenced(2, true)
	if !appendTo(t, f, 15, t0.Add(ms(50))) {
		t.Fatal("HW held by a fenced follower outside the ISR")
	}
}

func TestStaleISRAnswers(t *testing.T) {
	l := mustLeader(t, LeaderState{ID: 1, LeaderEpoch: 3, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, LEO: 10, HW: 10}, testConfig(), t0)
	fetch(t, l, 3, 10, t0)
	c, _ := l.ExpandProposal()
	if _, err := l.ISRCommitted(c, PartitionState{LeaderEpoch: 3, PartitionEpoch: 6, ISR: c.ISR}, t0); !errors.Is(err, ErrStale) {
		t.Fatalf("answer to a change never sent: %v", err)
	}
	if err := l.ProposalSent(ISRChange{LeaderEpoch: 3, PartitionEpoch: 4, ISR: c.ISR}); !errors.Is(err, ErrStale) {
		t.Fatalf("sending a change based on an old partition epoch: %v", err)
	}
	if err := l.ProposalSent(ISRChange{LeaderEpoch: 3, PartitionEpoch: 5, ISR: []int32{2, 3}}); !errors.Is(err, ErrInvalidAssignment) {
		t.Fatalf("sending an ISR without the leader: %v", err)
	}
	l.ProposalSent(c)
	if _, err := l.ISRCommitted(c, PartitionState{LeaderEpoch: 4, PartitionEpoch: 6, ISR: c.ISR}, t0); !errors.Is(err, ErrLeaderEpoch) {
		t.Fatalf("answer from another leader epoch: %v", err)
	}
	if _, err := l.ISRCommitted(c, PartitionState{LeaderEpoch: 3, PartitionEpoch: 4, ISR: c.ISR}, t0); !errors.Is(err, ErrStale) {
		t.Fatalf("answer with an older partition epoch: %v", err)
	}
	if _, err := l.ISRCommitted(c, PartitionState{LeaderEpoch: 3, PartitionEpoch: 6, ISR: []int32{2, 3}}, t0); !errors.Is(err, ErrInvalidAssignment) {
		t.Fatalf("answer without the leader in the ISR: %v", err)
	}
	wantISR(t, l, []int32{1, 2}, []int32{1, 2, 3})

	// Metadata at the same partition epoch keeps the pending expansion
	// counted.
	if _, err := l.UpdateISR(PartitionState{LeaderEpoch: 3, PartitionEpoch: 5, ISR: []int32{1, 2}}, t0); err != nil {
		t.Fatal(err)
	}
	wantISR(t, l, []int32{1, 2}, []int32{1, 2, 3})
	// A newer partition epoch (the controller fenced broker 2) replaces
	// the committed ISR and drops the pending change, whose late answer is
	// then ignored.
	if _, err := l.UpdateISR(PartitionState{LeaderEpoch: 3, PartitionEpoch: 6, ISR: []int32{1}}, t0); err != nil {
		t.Fatal(err)
	}
	wantISR(t, l, []int32{1}, []int32{1})
	if _, err := l.ISRCommitted(c, PartitionState{LeaderEpoch: 3, PartitionEpoch: 7, ISR: c.ISR}, t0); !errors.Is(err, ErrStale) {
		t.Fatalf("late answer after metadata: %v", err)
	}
	if _, err := l.UpdateISR(PartitionState{LeaderEpoch: 3, PartitionEpoch: 5, ISR: []int32{1, 2}}, t0); !errors.Is(err, ErrStale) {
		t.Fatalf("older metadata: %v", err)
	}
	if _, err := l.UpdateISR(PartitionState{LeaderEpoch: 4, PartitionEpoch: 9, ISR: []int32{1}}, t0); !errors.Is(err, ErrLeaderEpoch) {
		t.Fatalf("metadata of another leader epoch: %v", err)
	}
	wantISR(t, l, []int32{1}, []int32{1})
}

// KIP-903: what the leader learnt from a follower's fetches belongs to the
// incarnation that sent them. A follower that restarted (a newer broker
// epoch, from the metadata or its own fetch) starts over: its
// predecessor's LEO neither proposes it for the ISR nor counts for the HW,
// and a fetch of the dead incarnation still in flight is refused.
func TestRestartedFollowerStartsOver(t *testing.T) {
	l := mustLeader(t, LeaderState{ID: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}, LEO: 10, HW: 10}, testConfig(), t0)
	if err := l.BrokerEpoch(2, 40); err != nil {
		t.Fatal(err)
	}
	fetch(t, l, 2, 10, t0)
	appendTo(t, l, 20, t0)
	fetch(t, l, 2, 20, t0)
	fetch(t, l, 3, 20, t0)
	wantHW(t, l, 20)
	if c, ok := l.ExpandProposal(); !ok || !slices.Equal(c.Epochs, []int64{-1, 40, -1}) {
		t.Fatalf("expansion %+v %v of the caught-up follower at epoch 40", c, ok)
	}
	// Broker 2 restarts as epoch 55 (which may have lost 10..20, or will
	// truncate them): the leader hears of it before its first fetch.
	if err := l.BrokerEpoch(2, 55); err != nil {
		t.Fatal(err)
	}
	if leo, _ := l.FollowerLEO(2); leo != -1 {
		t.Fatalf("follower LEO %d after a restart, want -1 (unknown)", leo)
	}
	if c, ok := l.ExpandProposal(); ok {
		t.Fatalf("expansion of a restarted follower on its predecessor's LEO: %v", c)
	}
	// The dead incarnation's last fetch arrives late.
	if err := l.BrokerEpoch(2, 40); !errors.Is(err, ErrStaleBrokerEpoch) {
		t.Fatalf("fetch of epoch 40 after 55: %v", err)
	}
	// The new incarnation catches up and is proposed with its epoch.
	if err := l.BrokerEpoch(2, 55); err != nil {
		t.Fatal(err)
	}
	fetch(t, l, 2, 20, t0)
	c, ok := l.ExpandProposal()
	if !ok || !slices.Equal(c.ISR, []int32{1, 2, 3}) || !slices.Equal(c.Epochs, []int64{-1, 55, -1}) {
		t.Fatalf("expansion %+v %v, want ISR [1 2 3] with epochs [-1 55 -1]", c, ok)
	}
	// Epochs travel with the ISR members when a caller's order differs.
	c2 := ISRChange{LeaderEpoch: c.LeaderEpoch, PartitionEpoch: c.PartitionEpoch, ISR: []int32{3, 2, 1}, Epochs: []int64{-1, 55, -1}}
	if err := l.ProposalSent(c2); err != nil {
		t.Fatal(err)
	}
	if p, _ := l.Pending(); !slices.Equal(p.ISR, []int32{1, 2, 3}) || !slices.Equal(p.Epochs, []int64{-1, 55, -1}) {
		t.Fatalf("pending %+v", p)
	}
	if err := l.ISRRejected(c); err != nil {
		t.Fatal(err)
	}
	if err := l.ProposalSent(ISRChange{LeaderEpoch: c.LeaderEpoch, PartitionEpoch: c.PartitionEpoch, ISR: []int32{1, 2}, Epochs: []int64{-1}}); !errors.Is(err, ErrInvalidAssignment) {
		t.Fatalf("epochs not matching the ISR: %v", err)
	}
	if err := l.BrokerEpoch(9, 1); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("epoch of a non-replica: %v", err)
	}
}

// TestReassignmentAddsFollower: a reassignment's new replica arrives in
// the metadata at the same leader epoch (KIP-455); the leader takes it as
// a follower that has not fetched yet (its fetches were refused as a non
// replica's before), keeps what it knew of the others, and proposes it
// for the ISR once it caught up.
func TestReassignmentAddsFollower(t *testing.T) {
	now := time.Unix(1000, 0)
	l := mustLeader(t, LeaderState{ID: 1, LeaderEpoch: 3, PartitionEpoch: 5, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, LEO: 10, HW: 10}, testConfig(), now)
	fetch(t, l, 2, 10, now)
	if _, err := l.FollowerFetch(3, 0, now); !errors.Is(err, ErrNotReplica) {
		t.Fatalf("fetch of a broker not yet a replica: %v", err)
	}
	if _, err := l.UpdateISR(PartitionState{LeaderEpoch: 3, PartitionEpoch: 6, ISR: []int32{2, 1}, Replicas: []int32{2, 3, 1}}, now); err != nil {
		t.Fatal(err)
	}
	if got := l.Replicas(); !slices.Equal(got, []int32{2, 3, 1}) {
		t.Fatalf("replicas %v", got)
	}
	if leo, _ := l.FollowerLEO(2); leo != 10 {
		t.Fatalf("follower 2's LEO forgotten: %d", leo)
	}
	if _, ok := l.ExpandProposal(); ok {
		t.Fatal("proposed a follower that has not fetched")
	}
	fetch(t, l, 3, 10, now.Add(ms(5)))
	c, ok := l.ExpandProposal()
	if !ok || !slices.Equal(c.ISR, []int32{2, 3, 1}) || c.PartitionEpoch != 6 {
		t.Fatalf("expansion %+v %v", c, ok)
	}
}
