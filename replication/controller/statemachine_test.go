package controller

import (
	"errors"
	"reflect"
	"slices"
	"testing"
)

// fsmState drives apply without raft: one command per index, invariants
// checked after every step.
type fsmState struct {
	t     testing.TB
	img   *Image
	index uint64
}

func newFSMState(t testing.TB) *fsmState {
	return &fsmState{t: t, img: emptyImage()}
}

func (s *fsmState) apply(c *command) result {
	s.t.Helper()
	// Every command goes through its encoding, as a log entry does.
	dc, err := decodeCommand(c.encode())
	if err != nil {
		s.t.Fatalf("decode %s: %v", c.typ, err)
	}
	s.index++
	next, res := apply(s.img, s.index, dc)
	if err := checkImage(next); err != nil {
		s.t.Fatalf("%s broke an invariant: %v", c.typ, err)
	}
	if res.err != nil && !reflect.DeepEqual(encodeImage(next)[snapshotHeaderBytes:], encodeImage(s.img)[snapshotHeaderBytes:]) {
		s.t.Fatalf("failed %s changed the state", c.typ)
	}
	s.img = next
	return res
}

func (s *fsmState) ok(c *command) result {
	s.t.Helper()
	res := s.apply(c)
	if res.err != nil {
		s.t.Fatalf("%s: %v", c.typ, res.err)
	}
	return res
}

func (s *fsmState) register(id int32, rack string) int64 {
	s.t.Helper()
	s.ok(&command{typ: cmdRegisterBroker, brokerID: id, addr: "h:1", rack: rack})
	return int64(s.index)
}

func (s *fsmState) epoch(id int32) int64 {
	b, _ := s.img.Broker(id)
	return b.Epoch
}

func (s *fsmState) fence(id int32) {
	s.t.Helper()
	s.ok(&command{typ: cmdFenceBroker, brokerID: id, epoch: s.epoch(id)})
}

func (s *fsmState) unfence(id int32) {
	s.t.Helper()
	s.ok(&command{typ: cmdUnfenceBroker, brokerID: id, epoch: s.epoch(id)})
}

func (s *fsmState) create(name string, configs map[string]string, as ...[]int32) {
	s.t.Helper()
	s.ok(&command{typ: cmdCreateTopic, topic: name, topicID: TopicID{0: byte(len(s.img.topics) + 1), 1: byte(s.index)},
		partitions: -1, rf: -1, configs: configs, assignments: as})
}

func (s *fsmState) part(name string, i int32) Partition {
	p, ok := s.img.Partition(name, i)
	if !ok {
		s.t.Fatalf("no partition %s-%d", name, i)
	}
	return p
}

func wantPartition(t *testing.T, what string, got Partition, leader int32, isr []int32, leaderEpoch, partitionEpoch int32) {
	t.Helper()
	if got.Leader != leader || !slices.Equal(got.ISR, isr) || got.LeaderEpoch != leaderEpoch || got.PartitionEpoch != partitionEpoch {
		t.Fatalf("%s: got leader %d ISR %v epochs %d/%d, want leader %d ISR %v epochs %d/%d",
			what, got.Leader, got.ISR, got.LeaderEpoch, got.PartitionEpoch, leader, isr, leaderEpoch, partitionEpoch)
	}
}

func TestFenceMovesLeadershipInReplicaOrder(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 3; id++ {
		s.register(id, "")
	}
	s.create("t", nil, []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2})
	wantPartition(t, "created", s.part("t", 0), 1, []int32{1, 2, 3}, 0, 0)

	s.fence(1)
	// Led by 1: the next live ISR member in replica order leads, epochs bump.
	wantPartition(t, "t-0", s.part("t", 0), 2, []int32{2, 3}, 1, 1)
	// Followed by 1: only the ISR shrinks, the leader epoch stays.
	wantPartition(t, "t-1", s.part("t", 1), 2, []int32{2, 3}, 0, 1)
	wantPartition(t, "t-2", s.part("t", 2), 3, []int32{3, 2}, 0, 1)

	s.fence(2)
	wantPartition(t, "t-0 after 2", s.part("t", 0), 3, []int32{3}, 2, 2)
	s.fence(3)
	// The last ISR member stays in the ISR; nobody leads.
	wantPartition(t, "t-0 after 3", s.part("t", 0), -1, []int32{3}, 3, 3)

	// Broker 1 returns: it is not in the ISR, so nothing changes (clean).
	s.unfence(1)
	wantPartition(t, "t-0 after 1 back", s.part("t", 0), -1, []int32{3}, 3, 3)
	// Broker 3, the last ISR member, returns and leads again.
	s.unfence(3)
	wantPartition(t, "t-0 after 3 back", s.part("t", 0), 3, []int32{3}, 4, 4)
}

func TestUncleanLeaderElection(t *testing.T) {
	s := newFSMState(t)
	s.register(1, "")
	s.register(2, "")
	s.create("clean", nil, []int32{1, 2})
	s.create("dirty", map[string]string{configUncleanLeaderElection: "true"}, []int32{1, 2})
	// The leader shrinks both ISRs to itself (broker 2 fell behind).
	for _, name := range []string{"clean", "dirty"} {
		s.ok(&command{typ: cmdAlterPartition, topic: name, brokerID: 1, epoch: s.epoch(1), isr: []int32{1}, partitionEpoch: 0})
	}
	s.fence(1)
	wantPartition(t, "clean", s.part("clean", 0), -1, []int32{1}, 1, 2)
	wantPartition(t, "dirty", s.part("dirty", 0), 2, []int32{2}, 1, 2)

	// Turning unclean election on elects at once.
	s.ok(&command{typ: cmdAlterConfigs, topic: "clean", configs: map[string]string{configUncleanLeaderElection: "true"}})
	wantPartition(t, "clean after enable", s.part("clean", 0), 2, []int32{2}, 2, 3)

	if res := s.apply(&command{typ: cmdAlterConfigs, topic: "clean", configs: map[string]string{configUncleanLeaderElection: "yes"}}); !errors.Is(res.err, ErrInvalidConfig) {
		t.Fatalf("unclean=yes: %v", res.err)
	}
}

func TestReRegisterFencesOldIncarnation(t *testing.T) {
	s := newFSMState(t)
	s.register(1, "")
	s.register(2, "")
	s.create("t", nil, []int32{1, 2})
	e1 := s.epoch(1)
	s.register(1, "")
	if s.epoch(1) <= e1 {
		t.Fatalf("epoch %d after re-registration, was %d", s.epoch(1), e1)
	}
	b, _ := s.img.Broker(1)
	if b.Fenced {
		t.Fatal("re-registered broker is fenced")
	}
	// The restarted broker may have lost its log tail: 2 leads, 1 must
	// rejoin the ISR through AlterPartition.
	wantPartition(t, "t-0", s.part("t", 0), 2, []int32{2}, 1, 1)
}

func TestAlterPartitionErrors(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 4; id++ {
		s.register(id, "")
	}
	s.create("t", nil, []int32{1, 2, 3})
	s.fence(4)
	s.fence(3) // ISR [1 2], partition epoch 1
	p := s.part("t", 0)
	base := command{typ: cmdAlterPartition, topic: "t", brokerID: 1, epoch: s.epoch(1),
		leaderEpoch: p.LeaderEpoch, partitionEpoch: p.PartitionEpoch, isr: []int32{1}}
	cases := []struct {
		name string
		mod  func(c *command)
		want error
	}{
		{"unknown topic", func(c *command) { c.topic = "x" }, ErrUnknownTopicOrPartition},
		{"unknown partition", func(c *command) { c.partitions = 1 }, ErrUnknownTopicOrPartition},
		{"negative partition", func(c *command) { c.partitions = -1 }, ErrUnknownTopicOrPartition},
		{"unregistered broker", func(c *command) { c.brokerID = 9 }, ErrBrokerIDNotRegistered},
		{"stale broker epoch", func(c *command) { c.epoch-- }, ErrStaleBrokerEpoch},
		{"stale leader epoch", func(c *command) { c.leaderEpoch-- }, ErrFencedLeaderEpoch},
		{"future leader epoch", func(c *command) { c.leaderEpoch++ }, ErrFencedLeaderEpoch},
		{"not the leader", func(c *command) { c.brokerID = 2; c.epoch = s.epoch(2) }, ErrInvalidRequest},
		{"stale partition epoch", func(c *command) { c.partitionEpoch-- }, ErrInvalidUpdateVersion},
		{"empty ISR", func(c *command) { c.isr = nil }, ErrInvalidRequest},
		{"ISR without leader", func(c *command) { c.isr = []int32{2} }, ErrInvalidRequest},
		{"duplicate member", func(c *command) { c.isr = []int32{1, 2, 2} }, ErrInvalidRequest},
		{"not a replica", func(c *command) { c.isr = []int32{1, 4} }, ErrIneligibleReplica},
		{"fenced member", func(c *command) { c.isr = []int32{1, 3} }, ErrIneligibleReplica},
		{"epochs not matching the ISR", func(c *command) { c.isr, c.isrEpochs = []int32{1, 2}, []int64{-1} }, ErrInvalidRequest},
		{"member judged at a previous incarnation", func(c *command) {
			c.isr, c.isrEpochs = []int32{1, 2}, []int64{-1, s.epoch(2) - 1}
		}, ErrIneligibleReplica},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.mod(&c)
			res := s.apply(&c)
			if !errors.Is(res.err, tc.want) {
				t.Fatalf("got %v, want %v", res.err, tc.want)
			}
		})
	}
	// A valid shrink bumps only the partition epoch; the payload is the new
	// state; an unchanged ISR bumps nothing.
	res := s.ok(&base)
	d := &decoder{b: res.payload}
	got := decodePartition(d, snapshotVersion)
	if err := d.done(); err != nil {
		t.Fatal(err)
	}
	wantPartition(t, "shrunk", got, 1, []int32{1}, 0, 2)
	wantPartition(t, "image", s.part("t", 0), 1, []int32{1}, 0, 2)
	grow := base
	grow.partitionEpoch, grow.isr = 2, []int32{2, 1} // any order; stored in replica order
	grow.isrEpochs = []int64{s.epoch(2), -1}
	s.ok(&grow)
	wantPartition(t, "grown", s.part("t", 0), 1, []int32{1, 2}, 0, 3)
	grow.partitionEpoch = 3
	s.ok(&grow)
	wantPartition(t, "unchanged", s.part("t", 0), 1, []int32{1, 2}, 0, 3)
}

func TestCreateTopicValidation(t *testing.T) {
	s := newFSMState(t)
	s.register(1, "")
	s.register(2, "")
	s.fence(2)
	s.create("a.b", nil, []int32{1})
	cases := []struct {
		name string
		c    command
		want error
	}{
		{"empty name", command{topic: ""}, ErrInvalidTopic},
		{"dot dot", command{topic: ".."}, ErrInvalidTopic},
		{"slash", command{topic: "a/b"}, ErrInvalidTopic},
		{"exists", command{topic: "a.b"}, ErrTopicExists},
		{"collides", command{topic: "a_b"}, ErrInvalidTopic},
		{"no id", command{topic: "x", topicID: TopicID{}}, ErrInvalidRequest},
		{"id taken", command{topic: "x", topicID: s.img.Topic("a.b").ID}, ErrInvalidRequest},
		{"no assignment", command{topic: "x", assignments: [][]int32{}}, ErrInvalidReplicaAssignment},
		{"unknown broker", command{topic: "x", assignments: [][]int32{{1, 7}}}, ErrInvalidReplicaAssignment},
		{"all fenced", command{topic: "x", assignments: [][]int32{{2}}}, ErrInvalidReplicaAssignment},
		{"duplicate", command{topic: "x", assignments: [][]int32{{1, 1}}}, ErrInvalidReplicaAssignment},
		{"uneven", command{topic: "x", assignments: [][]int32{{1}, {1, 2}}}, ErrInvalidReplicaAssignment},
		{"bad config", command{topic: "x", configs: map[string]string{configUncleanLeaderElection: "1"}}, ErrInvalidConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			c.typ = cmdCreateTopic
			if c.topicID == (TopicID{}) && tc.name != "no id" {
				c.topicID = TopicID{9}
			}
			if c.assignments == nil {
				c.assignments = [][]int32{{1}}
			}
			if res := s.apply(&c); !errors.Is(res.err, tc.want) {
				t.Fatalf("got %v, want %v", res.err, tc.want)
			}
		})
	}
	// A fenced replica is assigned but stays out of the ISR.
	s.create("f", nil, []int32{2, 1})
	wantPartition(t, "f-0", s.part("f", 0), 1, []int32{1}, 0, 0)
	// validateOnly changes nothing.
	s.ok(&command{typ: cmdCreateTopic, topic: "v", topicID: TopicID{7}, validateOnly: true, assignments: [][]int32{{1}}})
	if s.img.Topic("v") != nil {
		t.Fatal("validateOnly created the topic")
	}
}

func TestCreatePartitionsAndDelete(t *testing.T) {
	s := newFSMState(t)
	s.register(1, "")
	s.register(2, "")
	s.create("t", nil, []int32{1, 2})
	if res := s.apply(&command{typ: cmdCreatePartitions, topic: "t", partitions: 1}); !errors.Is(res.err, ErrInvalidPartitions) {
		t.Fatalf("shrink/same: %v", res.err)
	}
	if res := s.apply(&command{typ: cmdCreatePartitions, topic: "t", partitions: 2, assignments: [][]int32{{2}}}); !errors.Is(res.err, ErrInvalidReplicaAssignment) {
		t.Fatalf("other replication factor: %v", res.err)
	}
	if res := s.apply(&command{typ: cmdCreatePartitions, topic: "t", partitions: 3, assignments: [][]int32{{2, 1}}}); !errors.Is(res.err, ErrInvalidReplicaAssignment) {
		t.Fatalf("count mismatch: %v", res.err)
	}
	s.ok(&command{typ: cmdCreatePartitions, topic: "t", partitions: 3, assignments: [][]int32{{2, 1}, {1, 2}}})
	wantPartition(t, "t-1", s.part("t", 1), 2, []int32{2, 1}, 0, 0)
	id := s.img.Topic("t").ID
	s.ok(&command{typ: cmdDeleteTopic, topic: "t"})
	if s.img.Topic("t") != nil || s.img.TopicByID(id) != nil {
		t.Fatal("topic still there")
	}
	if res := s.apply(&command{typ: cmdDeleteTopic, topic: "t"}); !errors.Is(res.err, ErrUnknownTopicOrPartition) {
		t.Fatalf("delete twice: %v", res.err)
	}
}

func TestAlterConfigs(t *testing.T) {
	s := newFSMState(t)
	s.register(1, "")
	s.create("t", map[string]string{"retention.ms": "1", "cleanup.policy": "compact"}, []int32{1})
	s.ok(&command{typ: cmdAlterConfigs, topic: "t", configs: map[string]string{"retention.ms": "2"}, deletes: []string{"cleanup.policy"}})
	if got := s.img.Topic("t").Configs; !reflect.DeepEqual(got, map[string]string{"retention.ms": "2"}) {
		t.Fatalf("configs %v", got)
	}
	if res := s.apply(&command{typ: cmdAlterConfigs, topic: "t", configs: map[string]string{"a": "1"}, deletes: []string{"a"}}); !errors.Is(res.err, ErrInvalidRequest) {
		t.Fatalf("set and delete: %v", res.err)
	}
	if res := s.apply(&command{typ: cmdAlterConfigs, topic: "nope"}); !errors.Is(res.err, ErrUnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v", res.err)
	}
}

func TestElectPreferredLeaders(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 3; id++ {
		s.register(id, "")
	}
	s.create("t", nil, []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2}, []int32{1, 3, 2})
	s.fence(1)
	s.unfence(1)
	// 1 is back but out of the ISRs: not available for t-0.
	p0 := s.part("t", 0)
	s.ok(&command{typ: cmdAlterPartition, topic: "t", brokerID: 2, epoch: s.epoch(2), leaderEpoch: p0.LeaderEpoch,
		partitionEpoch: p0.PartitionEpoch, isr: []int32{2, 3, 1}})
	res := s.ok(&command{typ: cmdElectPreferred, elect: []TopicPartition{{"t", 0}, {"t", 1}, {"t", 3}, {"x", 0}}})
	got, err := decodeElectResults(res.payload)
	if err != nil {
		t.Fatal(err)
	}
	want := map[TopicPartition]error{{"t", 0}: nil, {"t", 1}: ErrElectionNotNeeded,
		{"t", 3}: ErrPreferredLeaderNotAvail, {"x", 0}: ErrUnknownTopicOrPartition}
	for tp, w := range want {
		if g := got[tp]; (w == nil) != (g == nil) || (w != nil && !errors.Is(g, w)) {
			t.Errorf("%v: got %v, want %v", tp, g, w)
		}
	}
	wantPartition(t, "t-0", s.part("t", 0), 1, []int32{1, 2, 3}, 2, 3)
	// t-3 has ISR [3 2]: its preferred replica 1 is not in it.
	if needsPreferredElection(s.img) {
		t.Fatal("no partition can move, yet an election is said to be needed")
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 5; id++ {
		s.register(id, []string{"a", "b", "c"}[id%3])
	}
	s.create("one", map[string]string{"retention.ms": "5", configUncleanLeaderElection: "true"}, []int32{1, 2, 3}, []int32{4, 5, 1})
	s.create("two", nil, []int32{5})
	s.fence(5)
	s.fence(1)
	b := encodeImage(s.img)
	img, err := decodeImage(b)
	if err != nil {
		t.Fatal(err)
	}
	if img.Index != s.img.Index || !reflect.DeepEqual(img.brokers, s.img.brokers) ||
		!reflect.DeepEqual(img.topics, s.img.topics) || !reflect.DeepEqual(img.topicIDs, s.img.topicIDs) {
		t.Fatal("decoded image differs")
	}
	if !slices.Equal(encodeImage(img), b) {
		t.Fatal("re-encoding differs")
	}
	// Truncations are errors, never panics.
	for n := range len(b) {
		if _, err := decodeImage(b[:n]); err == nil {
			t.Fatalf("image cut at %d decoded", n)
		}
	}
}

// TestScramCredentials: credentials are upserted and deleted in one entry,
// a malformed change leaves the state as it was, and a snapshot carries
// them.
func TestScramCredentials(t *testing.T) {
	s := newFSMState(t)
	cred := func(it int32) ScramCredential {
		return ScramCredential{Salt: []byte("salt"), StoredKey: []byte("stored"), ServerKey: []byte("server"), Iterations: it}
	}
	s.ok(&command{typ: cmdAlterScram, scram: []ScramChange{
		{ScramKey: ScramKey{"alice", 1}, Credential: cred(4096)},
		{ScramKey: ScramKey{"alice", 2}, Credential: cred(8192)},
		{ScramKey: ScramKey{"bob", 1}, Credential: cred(4096)},
	}})
	s.ok(&command{typ: cmdAlterScram, scram: []ScramChange{
		{ScramKey: ScramKey{"alice", 1}, Delete: true},
		{ScramKey: ScramKey{"bob", 1}, Credential: cred(10000)},
	}})
	for _, bad := range [][]ScramChange{
		{{ScramKey: ScramKey{"carol", 1}, Credential: cred(4096)}, {ScramKey: ScramKey{"carol", 1}, Delete: true}},
		{{ScramKey: ScramKey{"carol", 3}, Credential: cred(4096)}},
		{{ScramKey: ScramKey{"", 1}, Credential: cred(4096)}},
		{{ScramKey: ScramKey{"carol", 1}, Credential: ScramCredential{Iterations: 4096}}},
	} {
		if res := s.apply(&command{typ: cmdAlterScram, scram: bad}); !errors.Is(res.err, ErrInvalidRequest) {
			t.Fatalf("%+v: %v", bad, res.err)
		}
	}
	want := []ScramChange{
		{ScramKey: ScramKey{"alice", 2}, Credential: ScramCredential{Iterations: 8192}},
		{ScramKey: ScramKey{"bob", 1}, Credential: ScramCredential{Iterations: 10000}},
	}
	for _, img := range []*Image{s.img, roundTrip(t, s.img)} {
		if got := img.ScramCredentials(); !reflect.DeepEqual(got, want) {
			t.Fatalf("credentials %+v, want %+v", got, want)
		}
		if c, ok := img.ScramCredential("bob", 1); !ok || !reflect.DeepEqual(c, cred(10000)) {
			t.Fatalf("bob: %+v %v", c, ok)
		}
		if _, ok := img.ScramCredential("alice", 1); ok {
			t.Fatal("alice's SHA-256 credential outlived its deletion")
		}
	}
}

func roundTrip(t *testing.T, img *Image) *Image {
	t.Helper()
	back, err := decodeImage(encodeImage(img))
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// TestElectUncleanLeaders: ElectLeaders' UNCLEAN election gives a
// leaderless partition a live replica outside its ISR; a partition with a
// leader needs none; one without a live replica stays leaderless; a
// partition that does not exist is unknown. With no list, only the
// partitions that had no leader are answered.
func TestElectUncleanLeaders(t *testing.T) {
	s := newFSMState(t)
	for id := int32(1); id <= 4; id++ {
		s.register(id, "")
	}
	s.create("u", nil, []int32{1, 2}, []int32{3, 1}, []int32{2, 4})
	s.fence(1)
	s.fence(4)
	s.fence(2) // u-0's and u-2's last ISR member: both leaderless, ISR [2]
	s.unfence(1)
	if p := s.part("u", 0); p.Leader != -1 || !slices.Equal(p.ISR, []int32{2}) {
		t.Fatalf("u-0 before the election: leader %d ISR %v", p.Leader, p.ISR)
	}
	res := s.ok(&command{typ: cmdElectUnclean, elect: []TopicPartition{{"u", 0}, {"u", 1}, {"u", 2}, {"u", 7}}})
	got, err := decodeElectResults(res.payload)
	if err != nil {
		t.Fatal(err)
	}
	want := map[TopicPartition]error{{"u", 0}: nil, {"u", 1}: ErrElectionNotNeeded,
		{"u", 2}: ErrEligibleLeadersNotAvail, {"u", 7}: ErrUnknownTopicOrPartition}
	for tp, w := range want {
		if g := got[tp]; (w == nil) != (g == nil) || (w != nil && !errors.Is(g, w)) {
			t.Errorf("%v: got %v, want %v", tp, g, w)
		}
	}
	if p := s.part("u", 0); p.Leader != 1 || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("u-0 after the election: leader %d ISR %v", p.Leader, p.ISR)
	}
	// Every partition: u-2 alone had no leader.
	res = s.ok(&command{typ: cmdElectUnclean})
	if got, err = decodeElectResults(res.payload); err != nil || len(got) != 1 || !errors.Is(got[TopicPartition{"u", 2}], ErrEligibleLeadersNotAvail) {
		t.Fatalf("every partition: %v %v", got, err)
	}
}
