package controller

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"testing"
)

// reassign applies one AlterReassignments command and returns its
// per-partition errors.
func (s *fsmState) reassign(allowRF bool, rs ...Reassignment) []error {
	s.t.Helper()
	res := s.ok(&command{typ: cmdAlterReassignments, allowRFChange: allowRF, reassign: rs})
	errs, err := decodeReassignResults(res.payload, len(rs))
	if err != nil {
		s.t.Fatal(err)
	}
	return errs
}

func (s *fsmState) reassignOK(target []int32) {
	s.t.Helper()
	if errs := s.reassign(true, Reassignment{Topic: "t", Partition: 0, Replicas: target}); errs[0] != nil {
		s.t.Fatalf("reassign to %v: %v", target, errs[0])
	}
}

func (s *fsmState) alterISR(name string, i int32, isr ...int32) error {
	s.t.Helper()
	p := s.part(name, i)
	return s.apply(&command{typ: cmdAlterPartition, topic: name, partitions: i, brokerID: p.Leader, epoch: s.epoch(p.Leader),
		leaderEpoch: p.LeaderEpoch, partitionEpoch: p.PartitionEpoch, isr: isr}).err
}

// wantPart compares the replication fields of a partition with a compact
// description.
func wantPart(t *testing.T, p Partition, replicas, isr []int32, leader int32, adding, removing []int32) {
	t.Helper()
	if !slices.Equal(p.Replicas, replicas) || !slices.Equal(p.ISR, isr) || p.Leader != leader ||
		!slices.Equal(p.AddingReplicas, adding) || !slices.Equal(p.RemovingReplicas, removing) {
		t.Fatalf("partition %+v, want replicas %v ISR %v leader %d adding %v removing %v", p, replicas, isr, leader, adding, removing)
	}
}

// TestReassignMovesLeaderOff: {1,2} to {2,3}, Kafka's way. The start
// lists the target first and the removing replica last, keeps leader and
// ISR (the leader epoch stays: the followers need not truncate); the
// leader's AlterPartition adding 3 completes it in the same step: 1 leaves
// replicas and ISR, the leadership goes to 2 (the first target replica in
// the ISR), and the leader epoch moves on.
func TestReassignMovesLeaderOff(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 3; id++ {
		s.register(id, "")
	}
	s.create("t", nil, []int32{1, 2})
	p0 := s.part("t", 0)
	s.reassignOK([]int32{2, 3})
	p := s.part("t", 0)
	wantPart(t, p, []int32{2, 3, 1}, []int32{2, 1}, 1, []int32{3}, []int32{1})
	if p.LeaderEpoch != p0.LeaderEpoch || p.PartitionEpoch != p0.PartitionEpoch+1 {
		t.Fatalf("epochs after the start: %d/%d, were %d/%d", p.LeaderEpoch, p.PartitionEpoch, p0.LeaderEpoch, p0.PartitionEpoch)
	}
	// The leader may add 3 to the ISR: it is a replica now.
	if err := s.alterISR("t", 0, 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	p = s.part("t", 0)
	wantPart(t, p, []int32{2, 3}, []int32{2, 3}, 2, nil, nil)
	if p.LeaderEpoch != p0.LeaderEpoch+1 {
		t.Fatalf("leader epoch after the completion: %d, want %d", p.LeaderEpoch, p0.LeaderEpoch+1)
	}
}

// TestReassignLeaderStaysBumpsEpoch: {1,2,3} to {1,2} completes at once
// (the ISR holds the target); the leader stays, but a replica left, so
// the leader epoch moves on (KRaft's rule: the removed replica's fetches
// are fenced).
func TestReassignLeaderStaysBumpsEpoch(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 3; id++ {
		s.register(id, "")
	}
	s.create("t", nil, []int32{1, 2, 3})
	p0 := s.part("t", 0)
	s.reassignOK([]int32{1, 2})
	p := s.part("t", 0)
	wantPart(t, p, []int32{1, 2}, []int32{1, 2}, 1, nil, nil)
	if p.LeaderEpoch != p0.LeaderEpoch+1 {
		t.Fatalf("leader epoch %d, want %d", p.LeaderEpoch, p0.LeaderEpoch+1)
	}
	// The same target again is no change at all.
	s.reassignOK([]int32{1, 2})
	if q := s.part("t", 0); q.PartitionEpoch != p.PartitionEpoch {
		t.Fatalf("a no-op reassignment moved the partition epoch: %+v", q)
	}
}

// TestReassignCancelReverts: a cancellation half way reverts to the
// original replicas (Kafka's order: the replica list without the adding
// ones) and takes the adding replicas out of the ISR; a second one finds
// nothing in progress.
func TestReassignCancelReverts(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 4; id++ {
		s.register(id, "")
	}
	s.create("t", nil, []int32{1, 2})
	s.reassignOK([]int32{3, 4})
	// 3 caught up, 4 not yet: nothing completes.
	if err := s.alterISR("t", 0, 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	p := s.part("t", 0)
	wantPart(t, p, []int32{3, 4, 1, 2}, []int32{3, 1, 2}, 1, []int32{3, 4}, []int32{1, 2})
	errs := s.reassign(false, Reassignment{Topic: "t", Partition: 0, Cancel: true})
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	q := s.part("t", 0)
	wantPart(t, q, []int32{1, 2}, []int32{1, 2}, 1, nil, nil)
	if q.LeaderEpoch != p.LeaderEpoch+1 {
		t.Fatalf("leader epoch after the revert %d, want %d", q.LeaderEpoch, p.LeaderEpoch+1)
	}
	errs = s.reassign(false, Reassignment{Topic: "t", Partition: 0, Cancel: true})
	if !errors.Is(errs[0], ErrNoReassignmentInProgress) {
		t.Fatalf("second cancel: %v", errs[0])
	}
}

// TestReassignReplacesTarget: a new reassignment of a partition already
// moving is computed against its full replica list (KRaft's
// changePartitionReassignment), and the first target's replicas that the
// second drops are removed at its completion.
func TestReassignReplacesTarget(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 4; id++ {
		s.register(id, "")
	}
	s.create("t", nil, []int32{1, 2})
	s.reassignOK([]int32{2, 3})
	s.reassignOK([]int32{3, 4})
	wantPart(t, s.part("t", 0), []int32{3, 4, 1, 2}, []int32{1, 2}, 1, []int32{4}, []int32{1, 2})
	if err := s.alterISR("t", 0, 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	if err := s.alterISR("t", 0, 1, 2, 3, 4); err != nil {
		t.Fatal(err)
	}
	wantPart(t, s.part("t", 0), []int32{3, 4}, []int32{3, 4}, 3, nil, nil)
}

// TestReassignErrors: Kafka's codes, each partition on its own: one
// failing leaves the others applied.
func TestReassignErrors(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 3; id++ {
		s.register(id, "")
	}
	s.create("t", nil, []int32{1, 2}, []int32{2, 3})
	errs := s.reassign(false,
		Reassignment{Topic: "nope", Partition: 0, Replicas: []int32{1}},
		Reassignment{Topic: "t", Partition: 2, Replicas: []int32{1, 2}},
		Reassignment{Topic: "t", Partition: -1, Replicas: []int32{1, 2}},
		Reassignment{Topic: "t", Partition: 0, Replicas: []int32{}},
		Reassignment{Topic: "t", Partition: 0, Replicas: []int32{2, 2}},
		Reassignment{Topic: "t", Partition: 0, Replicas: []int32{2, 9}},
		Reassignment{Topic: "t", Partition: 0, Cancel: true},
		Reassignment{Topic: "t", Partition: 0, Replicas: []int32{1, 2, 3}},
		Reassignment{Topic: "t", Partition: 1, Replicas: []int32{3, 1}},
	)
	want := []error{ErrUnknownTopicOrPartition, ErrUnknownTopicOrPartition, ErrUnknownTopicOrPartition,
		ErrInvalidReplicaAssignment, ErrInvalidReplicaAssignment, ErrInvalidReplicaAssignment,
		ErrNoReassignmentInProgress, ErrInvalidReplicationFactor, nil}
	for i := range want {
		if (want[i] == nil) != (errs[i] == nil) || want[i] != nil && !errors.Is(errs[i], want[i]) {
			t.Errorf("reassignment %d: %v, want %v", i, errs[i], want[i])
		}
	}
	wantPart(t, s.part("t", 0), []int32{1, 2}, []int32{1, 2}, 1, nil, nil)
	wantPart(t, s.part("t", 1), []int32{3, 1, 2}, []int32{3, 2}, 2, []int32{1}, []int32{2})
}

// TestReassignCancelNeedsUnclean: when only adding replicas are in the
// ISR, reverting needs an unclean election, refused unless the topic
// enables it (KRaft's PartitionReassignmentRevert).
func TestReassignCancelNeedsUnclean(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 3; id++ {
		s.register(id, "")
	}
	s.create("t", map[string]string{configUncleanLeaderElection: "true"}, []int32{1})
	s.reassignOK([]int32{2, 3})
	// 1, the only ISR member, dies; unclean election gives 2 the
	// partition, alone in the ISR.
	s.fence(1)
	wantPart(t, s.part("t", 0), []int32{2, 3, 1}, []int32{2}, 2, []int32{2, 3}, []int32{1})
	s.ok(&command{typ: cmdAlterConfigs, topic: "t", configs: map[string]string{configUncleanLeaderElection: "false"}})
	if errs := s.reassign(false, Reassignment{Topic: "t", Partition: 0, Cancel: true}); !errors.Is(errs[0], ErrInvalidReplicaAssignment) {
		t.Fatalf("cancel without unclean election: %v", errs[0])
	}
	s.ok(&command{typ: cmdAlterConfigs, topic: "t", configs: map[string]string{configUncleanLeaderElection: "true"}})
	if errs := s.reassign(false, Reassignment{Topic: "t", Partition: 0, Cancel: true}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	// Back to {1}: 1 is fenced, so nobody leads until it returns.
	wantPart(t, s.part("t", 0), []int32{1}, []int32{1}, -1, nil, nil)
	s.unfence(1)
	wantPart(t, s.part("t", 0), []int32{1}, []int32{1}, 1, nil, nil)
}

// TestReassignSnapshotCompat: a reassignment survives the snapshot, and a
// version 5 snapshot (before ACLs and reassignments) still decodes.
func TestReassignSnapshotCompat(t *testing.T) {
	img := seedImageReassigning(t)
	got, err := decodeImage(encodeImage(img))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := got.Partition("orders", 0)
	wantPart(t, p, []int32{2, 3, 1}, []int32{2, 1}, 1, []int32{3}, []int32{1})
	old, err := decodeImage(encodeImageV5(seedImage(t)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stateOf(old), stateOf(seedImage(t))) {
		t.Fatal("a version 5 snapshot decodes to another state")
	}
}

// encodeImageV5 is img (no reassignment in progress) as a version 5
// snapshot: partitions without adding and removing replicas.
func encodeImageV5(img *Image) []byte {
	e := &encoder{}
	e.b = append(e.b, snapshotMagic...)
	e.u8(5)
	e.u64(img.Index)
	// Re-encode the body with the version 5 partition layout.
	body := &encoder{}
	body.i64(img.nextProducerID)
	ids := slices.Sorted(maps.Keys(img.brokers))
	body.uvarint(len(ids))
	for _, id := range ids {
		br := img.brokers[id]
		body.i32(br.ID)
		body.str(br.Addr)
		body.str(br.Rack)
		body.i64(br.Epoch)
		body.bool(br.Fenced)
		body.stringMap(br.Listeners)
	}
	names := img.TopicNames()
	body.uvarint(len(names))
	for _, name := range names {
		tp := img.topics[name]
		body.str(tp.Name)
		body.b = append(body.b, tp.ID[:]...)
		body.stringMap(tp.Configs)
		body.uvarint(len(tp.Partitions))
		for _, p := range tp.Partitions {
			body.int32s(p.Replicas)
			body.int32s(p.ISR)
			body.i32(p.Leader)
			body.i32(p.LeaderEpoch)
			body.i32(p.PartitionEpoch)
			body.int32s(p.Offline)
			encodeLogEnds(body, p.Recovering)
		}
	}
	encodeScramImage(body, img.scram)
	return append(e.b, body.b...)
}

// TestReassignCompletedByUncleanElection: an election that leaves the
// ISR holding the whole target completes the move too (electInto), not
// only the leader's AlterPartition: {1} to {2}, 1 dies, and the unclean
// election of 2 is the end of the move.
func TestReassignCompletedByUncleanElection(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 2; id++ {
		s.register(id, "")
	}
	s.create("t", map[string]string{configUncleanLeaderElection: "true"}, []int32{1})
	s.reassignOK([]int32{2})
	wantPart(t, s.part("t", 0), []int32{2, 1}, []int32{1}, 1, []int32{2}, []int32{1})
	s.fence(1)
	wantPart(t, s.part("t", 0), []int32{2}, []int32{2}, 2, nil, nil)
}

// TestReassignKeepsOfflineInReplicaOrder: a replica its broker reported
// offline stays offline through a move, listed in the new replica order
// (checkImage asserts the order after every step), and leaves the list
// with the assignment.
func TestReassignKeepsOfflineInReplicaOrder(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 4; id++ {
		s.register(id, "")
	}
	s.create("t", nil, []int32{1, 2, 3})
	tid := s.img.Topic("t").ID
	s.ok(&command{typ: cmdOfflineReplicas, brokerID: 2, epoch: s.epoch(2), offline: []TopicIDPartition{{tid, 0}}})
	s.ok(&command{typ: cmdOfflineReplicas, brokerID: 3, epoch: s.epoch(3), offline: []TopicIDPartition{{tid, 0}}})
	s.reassignOK([]int32{3, 4, 1})
	p := s.part("t", 0)
	wantPart(t, p, []int32{3, 4, 1, 2}, []int32{1}, 1, []int32{4}, []int32{2})
	if !slices.Equal(p.Offline, []int32{3, 2}) {
		t.Fatalf("offline %v, want [3 2]", p.Offline)
	}
	if err := s.alterISR("t", 0, 1, 4); err != nil {
		t.Fatal(err)
	}
	// 3 is offline, so it cannot join the ISR: the move waits for it.
	if err := s.alterISR("t", 0, 1, 3, 4); !errors.Is(err, ErrIneligibleReplica) {
		t.Fatalf("an offline replica joining the ISR: %v", err)
	}
	s.reassignOK([]int32{4, 1})
	p = s.part("t", 0)
	wantPart(t, p, []int32{4, 1}, []int32{4, 1}, 1, nil, nil)
	if len(p.Offline) != 0 {
		t.Fatalf("offline %v after the move", p.Offline)
	}
}
