package controller

import (
	"errors"
	"reflect"
	"slices"
	"testing"
)

func (s *fsmState) offline(id int32, tps ...TopicPartition) result {
	s.t.Helper()
	var set []TopicIDPartition
	for _, tp := range tps {
		set = append(set, TopicIDPartition{ID: s.img.Topic(tp.Topic).ID, Partition: tp.Partition})
	}
	return s.apply(&command{typ: cmdOfflineReplicas, brokerID: id, epoch: s.epoch(id), offline: set})
}

// TestOfflineReplicaMovesLeadership: a broker reporting a replica offline
// leaves its ISR and hands its leadership to the next in-sync replica; it
// is no candidate for leader afterwards (neither at an election after a
// fence nor for the preferred leader), it cannot rejoin the ISR, and
// Metadata's view lists it (Partition.Offline). Its next registration
// without the replica clears it.
func TestOfflineReplicaMovesLeadership(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 3; id++ {
		s.register(id, "")
	}
	s.create("t", nil, []int32{1, 2, 3}, []int32{2, 3, 1})
	s.ok(&command{typ: cmdOfflineReplicas, brokerID: 1, epoch: s.epoch(1),
		offline: []TopicIDPartition{{s.img.Topic("t").ID, 0}, {TopicID{9}, 0}, {s.img.Topic("t").ID, 7}}})
	p := s.part("t", 0)
	wantPartition(t, "t-0 after 1 reported it offline", p, 2, []int32{2, 3}, 1, 1)
	if !slices.Equal(p.Offline, []int32{1}) {
		t.Fatalf("offline replicas %v, want [1]", p.Offline)
	}
	wantPartition(t, "t-1 untouched", s.part("t", 1), 2, []int32{2, 3, 1}, 0, 0)
	if got := s.img.OfflineReplicas(1); !reflect.DeepEqual(got, []TopicIDPartition{{s.img.Topic("t").ID, 0}}) {
		t.Fatalf("OfflineReplicas(1) = %v", got)
	}
	// The same report again changes nothing.
	s.offline(1, TopicPartition{"t", 0})
	wantPartition(t, "t-0 after the same report", s.part("t", 0), 2, []int32{2, 3}, 1, 1)

	// Broker 1 may not rejoin the ISR, nor be elected preferred leader.
	res := s.apply(&command{typ: cmdAlterPartition, topic: "t", partitions: 0, brokerID: 2, epoch: s.epoch(2),
		leaderEpoch: 1, partitionEpoch: 1, isr: []int32{2, 3, 1}})
	if !errors.Is(res.err, ErrIneligibleReplica) {
		t.Fatalf("ISR expansion with an offline replica: %v, want INELIGIBLE_REPLICA", res.err)
	}
	s.ok(&command{typ: cmdElectPreferred})
	wantPartition(t, "t-0 after a preferred election", s.part("t", 0), 2, []int32{2, 3}, 1, 1)

	// Fencing 2 and 3 leaves t-0 leaderless rather than led by 1, even
	// with unclean election on.
	s.ok(&command{typ: cmdAlterConfigs, topic: "t", configs: map[string]string{configUncleanLeaderElection: "true"}})
	s.fence(2)
	s.fence(3)
	if p := s.part("t", 0); p.Leader != -1 {
		t.Fatalf("t-0 led by %d with every eligible replica fenced", p.Leader)
	}
	s.unfence(3)
	wantPartition(t, "t-0 after 3 is back", s.part("t", 0), 3, []int32{3}, 4, 4)

	// Broker 1 registers again without the replica offline: cleared.
	s.register(1, "")
	if p := s.part("t", 0); len(p.Offline) != 0 {
		t.Fatalf("offline replicas after a clean registration: %v", p.Offline)
	}
	if got := s.img.OfflineReplicas(1); len(got) != 0 {
		t.Fatalf("OfflineReplicas(1) after a clean registration = %v", got)
	}
}

// TestOfflineLastReplica: a single replica that goes offline stays the
// ISR's last member and the partition has no leader; a registration that
// still reports it offline keeps it so, and one that does not makes it
// lead again.
func TestOfflineLastReplica(t *testing.T) {
	s := newFSMState(t)
	s.register(1, "")
	s.create("t", nil, []int32{1}, []int32{1})
	s.offline(1, TopicPartition{"t", 1})
	wantPartition(t, "t-1 offline", s.part("t", 1), -1, []int32{1}, 1, 1)
	wantPartition(t, "t-0 online", s.part("t", 0), 1, []int32{1}, 0, 0)

	id := s.img.Topic("t").ID
	s.ok(&command{typ: cmdRegisterBroker, brokerID: 1, addr: "h:1", offline: []TopicIDPartition{{id, 1}}})
	if p := s.part("t", 1); p.Leader != -1 || !slices.Equal(p.Offline, []int32{1}) {
		t.Fatalf("t-1 after a registration reporting it offline: %+v", p)
	}
	if b, _ := s.img.Broker(1); b.Listeners != nil {
		t.Fatalf("listeners %v from a registration without any", b.Listeners)
	}
	if p := s.part("t", 0); p.Leader != 1 {
		t.Fatalf("t-0 after the registration: %+v", p)
	}
	// An empty report (repaired without a restart) brings it back too.
	s.offline(1)
	if p := s.part("t", 1); p.Leader != 1 || len(p.Offline) != 0 {
		t.Fatalf("t-1 after an empty report: %+v", p)
	}
	s.offline(1, TopicPartition{"t", 1})
	s.register(1, "")
	if p := s.part("t", 1); p.Leader != 1 || len(p.Offline) != 0 {
		t.Fatalf("t-1 after a clean registration: %+v", p)
	}
	// A stale epoch is refused.
	res := s.apply(&command{typ: cmdOfflineReplicas, brokerID: 1, epoch: 1, offline: []TopicIDPartition{{id, 0}}})
	if !errors.Is(res.err, ErrStaleBrokerEpoch) {
		t.Fatalf("report with a stale epoch: %v", res.err)
	}
}

// TestSnapshotKeepsOfflineReplicas: the offline replicas are state, in
// the snapshot; a version 3 snapshot (before them) still reads.
func TestSnapshotKeepsOfflineReplicas(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 3; id++ {
		s.register(id, "")
	}
	s.create("t", nil, []int32{1, 2, 3}, []int32{3, 2, 1})
	s.offline(3, TopicPartition{"t", 0}, TopicPartition{"t", 1})
	s.offline(2, TopicPartition{"t", 1})
	if p := s.part("t", 1); !slices.Equal(p.Offline, []int32{3, 2}) {
		t.Fatalf("offline replicas of t-1: %v, want replica order [3 2]", p.Offline)
	}
	img := roundTrip(t, s.img)
	if !reflect.DeepEqual(img.topics, s.img.topics) {
		t.Fatal("offline replicas lost in the snapshot")
	}
	// Version 3: no offline list after each partition.
	e := &encoder{}
	e.b = append(e.b, snapshotMagic...)
	e.u8(3)
	e.u64(5)
	e.i64(0)
	e.uvarint(1)
	e.i32(1)
	e.str("h:1")
	e.str("")
	e.i64(1)
	e.bool(false)
	e.stringMap(nil)
	e.uvarint(1)
	e.str("old")
	e.b = append(e.b, TopicID{7}.String()[:16]...)
	e.stringMap(nil)
	e.uvarint(1)
	e.int32s([]int32{1})
	e.int32s([]int32{1})
	e.i32(1)
	e.i32(0)
	e.i32(0)
	e.uvarint(0)
	old, err := decodeImage(e.b)
	if err != nil {
		t.Fatalf("version 3 snapshot: %v", err)
	}
	if p, _ := old.Partition("old", 0); p.Leader != 1 || p.Offline != nil {
		t.Fatalf("version 3 partition: %+v", p)
	}
}
