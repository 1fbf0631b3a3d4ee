package controller

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// registerRecovered registers broker id again, reporting that it recovered
// partition i of topic "t" from an unclean shutdown, ending at (epoch, leo).
func (s *fsmState) registerRecovered(id int32, i int32, epoch int32, leo int64) {
	s.t.Helper()
	tp := s.img.Topic("t")
	s.ok(&command{typ: cmdRegisterBroker, brokerID: id, addr: "h:1",
		ends: []ReplicaLogEnd{{TopicIDPartition: TopicIDPartition{ID: tp.ID, Partition: i}, LastEpoch: epoch, LEO: leo}}})
}

// TestUncleanRecoveryElectsLongestLog: three brokers lose power together.
// Each returns with the partition's log recovered to a different length;
// the partition gets no leader until all three reported, then the longest
// log (the newest epoch first) leads alone, whatever the order of return,
// and again when that leader registers a second time at once (a retry
// after a lost reply; the cluster power-loss test hung on it).
// Registrations that recovered nothing (a clean shutdown) are elected at
// once, as before.
func TestUncleanRecoveryElectsLongestLog(t *testing.T) {
	type ret struct {
		id    int32
		epoch int32
		leo   int64
	}
	for name, c := range map[string]struct {
		order []ret
		want  int32
	}{
		"longest last":       {[]ret{{1, 0, 30}, {2, 0, 50}, {3, 0, 70}}, 3},
		"longest first":      {[]ret{{3, 0, 70}, {1, 0, 30}, {2, 0, 50}}, 3},
		"longest middle":     {[]ret{{2, 0, 30}, {1, 0, 90}, {3, 0, 70}}, 1},
		"newer epoch":        {[]ret{{1, 0, 90}, {2, 1, 40}, {3, 0, 70}}, 2},
		"tie, replica order": {[]ret{{3, 0, 60}, {2, 0, 60}, {1, 0, 10}}, 2},
	} {
		t.Run(name, func(t *testing.T) {
			s := newFSMState(t)
			for id := int32(1); id <= 3; id++ {
				s.register(id, "")
			}
			s.create("t", nil, []int32{1, 2, 3})
			for i, r := range c.order {
				s.registerRecovered(r.id, 0, r.epoch, r.leo)
				// Until the last returns, only an old incarnation (not
				// fenced yet: its session has not expired) may be named
				// leader; none of those that recovered leads.
				if p := s.part("t", 0); i < len(c.order)-1 && p.Leader != -1 &&
					slices.ContainsFunc(c.order[:i+1], func(o ret) bool { return o.id == p.Leader }) {
					t.Fatalf("after %d returned: led by %d, which recovered", i+1, p.Leader)
				}
			}
			p := s.part("t", 0)
			if p.Leader != c.want || !slices.Equal(p.ISR, []int32{c.want}) {
				t.Fatalf("after all returned: leader %d ISR %v recovering %v, want %d alone", p.Leader, p.ISR, p.Recovering, c.want)
			}
			// The leader registers again (its registration's reply was
			// lost and it retried): fenced, it is chosen again.
			var again ret
			for _, r := range c.order {
				if r.id == c.want {
					again = r
				}
			}
			s.registerRecovered(again.id, 0, again.epoch, again.leo)
			if p := s.part("t", 0); p.Leader != c.want || !slices.Equal(p.ISR, []int32{c.want}) {
				t.Fatalf("after the leader registered again: leader %d ISR %v recovering %v, want %d alone", p.Leader, p.ISR, p.Recovering, c.want)
			}
		})
	}
}

// TestUncleanRecoveryWaits: while a replica has not returned, a partition
// whose returned ISR members all recovered has no leader; the
// controller's cmdElectRecovery then elects the longest log among those
// there. A replica that returns cleanly (it reports nothing) and is in the
// ISR leads at once. An AlterPartition drops the reports, and a report
// survives a snapshot.
func TestUncleanRecoveryWaits(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 3; id++ {
		s.register(id, "")
	}
	s.create("t", nil, []int32{1, 2, 3}, []int32{1, 2, 3})
	// 3 never returns; 1 and 2 come back recovered. Old incarnations are
	// fenced by their sessions.
	s.fence(3)
	s.registerRecovered(1, 0, 0, 40)
	s.registerRecovered(2, 0, 0, 60)
	p := s.part("t", 0)
	if p.Leader != -1 {
		t.Fatalf("led by %d while replica 3 has not returned", p.Leader)
	}
	if !recovering(p, s.img.live) || recoveryComplete(p, s.img.live) {
		t.Fatalf("recovering %v complete %v: %+v", recovering(p, s.img.live), recoveryComplete(p, s.img.live), p)
	}
	if img := roundTrip(t, s.img); !reflect.DeepEqual(img.topics, s.img.topics) {
		t.Fatal("the recovery reports did not survive a snapshot")
	}
	tp := s.img.Topic("t")
	s.ok(&command{typ: cmdElectRecovery, offline: []TopicIDPartition{{ID: tp.ID, Partition: 0}}})
	if p := s.part("t", 0); p.Leader != 2 || !slices.Equal(p.ISR, []int32{2}) {
		t.Fatalf("after the timeout: %+v, want 2 alone", p)
	}
	if _, err := decodeCommand((&command{typ: cmdElectRecovery}).encode()); err == nil {
		t.Fatal("an ElectRecovery of no partition decoded")
	}

	// Partition 1: 1 returns clean (no report): an ISR member with every
	// committed record leads at once, even though 2 recovered.
	if p := s.part("t", 1); p.Leader == -1 {
		t.Fatalf("t-1 leaderless: %+v", p)
	}
	s2 := newFSMState(t)
	for id := int32(1); id <= 3; id++ {
		s2.register(id, "")
	}
	s2.create("t", nil, []int32{1, 2, 3})
	s2.fence(3)
	s2.registerRecovered(2, 0, 0, 60)
	s2.register(1, "") // clean
	if p := s2.part("t", 0); p.Leader != 1 {
		t.Fatalf("a clean ISR member did not lead at once: %+v", p)
	}
	// The leader serves: its AlterPartition drops the reports.
	p = s2.part("t", 0)
	s2.ok(&command{typ: cmdAlterPartition, topic: "t", partitions: 0, brokerID: 1, epoch: s2.epoch(1),
		leaderEpoch: p.LeaderEpoch, partitionEpoch: p.PartitionEpoch, isr: []int32{1, 2}})
	if p := s2.part("t", 0); p.Recovering != nil || !slices.Equal(p.ISR, []int32{1, 2}) {
		t.Fatalf("after AlterPartition: %+v", p)
	}
}

// TestRecoveryDue: the controller leader ends a partition's wait at once
// when every replica that did not report heartbeated since the wait began
// (up all along: its log is whole, and it was out of the ISR), and only
// after the timeout while one of them is silent (an incarnation that died
// and is not fenced yet may come back with a longer log).
func TestRecoveryDue(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 3; id++ {
		s.register(id, "")
	}
	s.create("t", nil, []int32{1, 2, 3})
	// The ISR shrinks to 1 (2 and 3 fell behind), then 1 crashes and
	// comes back.
	p := s.part("t", 0)
	s.ok(&command{typ: cmdAlterPartition, topic: "t", partitions: 0, brokerID: 1, epoch: s.epoch(1),
		leaderEpoch: p.LeaderEpoch, partitionEpoch: p.PartitionEpoch, isr: []int32{1}})
	s.registerRecovered(1, 0, 0, 50)
	if p := s.part("t", 0); p.Leader != -1 || !recovering(p, s.img.live) {
		t.Fatalf("not in recovery: %+v", p)
	}
	tip := TopicIDPartition{ID: s.img.Topic("t").ID, Partition: 0}
	start := time.Unix(1000, 0)
	for name, c := range map[string]struct {
		heard   map[int32]bool
		at      time.Duration
		due     bool
		timeout bool
	}{
		"others heartbeat":      {map[int32]bool{2: true, 3: true}, time.Second, true, false},
		"one silent":            {map[int32]bool{2: true}, time.Second, false, false},
		"one silent, timed out": {map[int32]bool{2: true}, 3 * time.Minute, true, true},
	} {
		t.Run(name, func(t *testing.T) {
			waiting := map[TopicIDPartition]time.Time{}
			seenAfter := func(id int32, since time.Time) bool { return c.heard[id] }
			if due, _ := recoveryDue(s.img, waiting, start, 2*time.Minute, seenAfter); len(due) != 0 {
				t.Fatalf("due at the first look: %v", due)
			}
			due, late := recoveryDue(s.img, waiting, start.Add(c.at), 2*time.Minute, seenAfter)
			if got := slices.Equal(due, []TopicIDPartition{tip}); got != c.due || (late > 0) != c.timeout {
				t.Fatalf("due %v late %d, want due %v timed out %v", due, late, c.due, c.timeout)
			}
		})
	}
	s.ok(&command{typ: cmdElectRecovery, offline: []TopicIDPartition{tip}})
	if p := s.part("t", 0); p.Leader != 1 || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("after the early election: %+v", p)
	}
}
