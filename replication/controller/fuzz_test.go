package controller

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"ringlog/internal/acl"
)

// The decoders take bytes from disk (raft entries, snapshots) and from the
// network (RPC frames). The invariants: never panic, never allocate more
// than the input justifies, and decode-encode-decode is stable.

// allocBound is what a decoder may allocate for n input bytes: every
// element it builds has a minimum encoding, so a constant factor holds.
func allocBound(n int) uint64 { return uint64(64*n + 64<<10) }

func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

var seedACLName = "orders"

// seedCommands is one command of each type, for the corpus and f.Add.
func seedCommands() []*command {
	return []*command{
		{typ: cmdNoop},
		{typ: cmdRegisterBroker, brokerID: 1, addr: "127.0.0.1:9092", rack: "r1"},
		{typ: cmdRegisterBroker, brokerID: 1, addr: "127.0.0.1:9092", rack: "r1", configs: map[string]string{"INTERNAL": "127.0.0.1:9092", "SASL_SSL": "10.0.0.1:9093"}},
		{typ: cmdUnfenceBroker, brokerID: 2, epoch: 7},
		{typ: cmdFenceBroker, brokerID: 3, epoch: 9},
		{typ: cmdUnregisterBroker, brokerID: 4},
		{typ: cmdCreateTopic, topic: "orders", topicID: TopicID{1, 2, 3}, partitions: 2, rf: 2,
			configs:     map[string]string{"retention.ms": "1000", configUncleanLeaderElection: "false"},
			assignments: [][]int32{{1, 2}, {2, 1}}},
		{typ: cmdDeleteTopic, topic: "orders"},
		{typ: cmdCreatePartitions, topic: "orders", partitions: 3, assignments: [][]int32{{1, 2}}},
		{typ: cmdAlterConfigs, topic: "orders", configs: map[string]string{"a": "b"}, deletes: []string{"c"}},
		{typ: cmdAlterPartition, topic: "orders", partitions: 1, brokerID: 2, epoch: 5, leaderEpoch: 1, partitionEpoch: 4, isr: []int32{2, 1}},
		{typ: cmdAlterPartition, topic: "orders", partitions: 1, brokerID: 2, epoch: 5, leaderEpoch: 1, partitionEpoch: 4, isr: []int32{2, 1}, isrEpochs: []int64{-1, 3}},
		{typ: cmdElectPreferred, elect: []TopicPartition{{"orders", 0}, {"x", 3}}},
		{typ: cmdHeartbeat, brokerID: 1, epoch: 5},
		// Broker 1 of seedImage, at its epoch: the fuzzer starts from a
		// block that is handed out.
		{typ: cmdAllocateProducerIDs, brokerID: 1, epoch: 1},
		{typ: cmdAllocateProducerIDs, brokerID: 1, epoch: 1, floor: 5000},
		{typ: cmdAlterScram, scram: []ScramChange{
			{ScramKey: ScramKey{"alice", 1}, Credential: ScramCredential{Salt: []byte("salt"), StoredKey: []byte("stored"), ServerKey: []byte("server"), Iterations: 4096}},
			{ScramKey: ScramKey{"bob", 2}, Delete: true}}},
		{typ: cmdOfflineReplicas, brokerID: 1, epoch: 1, offline: []TopicIDPartition{{TopicID{1, 2, 3}, 0}, {TopicID{1, 2, 3}, 1}}},
		{typ: cmdOfflineReplicas, brokerID: 1, epoch: 1},
		{typ: cmdRegisterBroker, brokerID: 1, addr: "127.0.0.1:9092", rack: "r1", offline: []TopicIDPartition{{TopicID{1, 2, 3}, 1}}},
		{typ: cmdRegisterBroker, brokerID: 2, addr: "127.0.0.1:9092", ends: []ReplicaLogEnd{{TopicIDPartition{TopicID{1, 2, 3}, 0}, 3, 120}}},
		{typ: cmdRegisterBroker, brokerID: 1, addr: "127.0.0.1:9092", offline: []TopicIDPartition{{TopicID{1, 2, 3}, 1}},
			ends: []ReplicaLogEnd{{TopicIDPartition{TopicID{1, 2, 3}, 0}, -1, 0}}},
		{typ: cmdElectRecovery, offline: []TopicIDPartition{{TopicID{1, 2, 3}, 0}}},
		{typ: cmdCreateAcls, acls: []acl.Binding{{ResourceType: acl.ResourceTopic, ResourceName: "orders", PatternType: acl.PatternLiteral,
			Principal: "User:a", Host: "*", Operation: acl.OpRead, Permission: acl.PermissionAllow}}},
		{typ: cmdDeleteAcls, aclFilters: []acl.Filter{{ResourceType: acl.ResourceAny, PatternType: acl.PatternMatch,
			ResourceName: &seedACLName, Operation: acl.OpAny, Permission: acl.PermissionDeny}}},
		{typ: cmdAlterClientQuotas, quotas: []QuotaAlteration{
			{Entity: QuotaEntity{{QuotaClientID, nil}, {QuotaUser, &seedACLName}}, Ops: []QuotaOp{{Key: QuotaProducerByteRate, Value: 1024}, {Key: QuotaRequestPercentage, Remove: true}}}}},
		// orders-0 of seedImage moves from {1,2} to {2,3} (broker 3 is
		// fenced there: a target may be), orders-1 is cancelled (none in
		// progress), and an unknown partition.
		{typ: cmdAlterBrokerConfigs, topic: "2", configs: map[string]string{LeaderReplicationThrottledRate: "1048576"}, deletes: []string{FollowerReplicationThrottledRate}},
		{typ: cmdAlterBrokerConfigs, topic: "", configs: map[string]string{FollowerReplicationThrottledRate: "2000000"}},
		{typ: cmdAlterReassignments, allowRFChange: true, reassign: []Reassignment{{Topic: "orders", Partition: 0, Replicas: []int32{2, 3}},
			{Topic: "orders", Partition: 1, Cancel: true}, {Topic: "x", Partition: 0, Replicas: []int32{1}}}},
	}
}

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range seedCommands() {
		f.Add(c.encode())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c *command
		var err error
		if n := allocated(func() { c, err = decodeCommand(b) }); n > allocBound(len(b)) {
			t.Fatalf("decoding %d bytes allocated %d", len(b), n)
		}
		if err != nil {
			return
		}
		enc := c.encode()
		c2, err := decodeCommand(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(c, c2) || !bytes.Equal(enc, c2.encode()) {
			t.Fatalf("unstable: %+v then %+v", c, c2)
		}
		// What the state machine does with it must not panic either.
		s := seedImage(t)
		next, _ := apply(s, s.Index+1, c)
		if err := checkImage(next); err != nil {
			t.Fatalf("%s broke an invariant: %v", c.typ, err)
		}
	})
}

// seedImage is a small state for the command fuzzer to apply to.
func seedImage(t testing.TB) *Image {
	s := newFSMState(t)
	s.register(1, "a")
	s.register(2, "b")
	s.register(3, "")
	s.create("orders", nil, []int32{1, 2}, []int32{2, 1})
	s.fence(3)
	return s.img
}

// seedImageACLsQuotas is seedImage with an ACL, a client quota and
// dynamic broker configs.
func seedImageACLsQuotas(t testing.TB) *Image {
	s := &fsmState{t: t, img: seedImage(t)}
	s.index = s.img.Index
	for _, c := range seedCommands() {
		if c.typ == cmdCreateAcls || c.typ == cmdAlterClientQuotas || c.typ == cmdAlterBrokerConfigs {
			s.ok(c)
		}
	}
	return s.img
}

// seedImageScram is seedImage with a SCRAM credential.
func seedImageScram(t testing.TB) *Image {
	img := seedImage(t)
	next, res := apply(img, img.Index+1, &command{typ: cmdAlterScram, scram: []ScramChange{{ScramKey: ScramKey{"carol", 2},
		Credential: ScramCredential{Salt: []byte("s"), StoredKey: []byte("k1"), ServerKey: []byte("k2"), Iterations: 8192}}}})
	if res.err != nil {
		t.Fatal(res.err)
	}
	return next
}

// seedImageReassigning is seedImage with orders-0 moving from {1,2} to
// {2,3} (snapshot version 7's adding and removing replicas).
func seedImageReassigning(t testing.TB) *Image {
	img := seedImage(t)
	next, res := apply(img, img.Index+1, &command{typ: cmdAlterReassignments, reassign: []Reassignment{{Topic: "orders", Partition: 0, Replicas: []int32{2, 3}}}})
	if res.err != nil {
		t.Fatal(res.err)
	}
	if p, _ := next.Partition("orders", 0); !p.Reassigning() {
		t.Fatalf("orders-0 is not reassigning: %+v", p)
	}
	return next
}

// encodeImageV1 is img as a version 1 snapshot (no next producer id, no
// SCRAM credentials), as nodes wrote them before AllocateProducerIDs.
func encodeImageV1(img *Image) []byte {
	noScram := *img
	noScram.scram = nil
	noScram.acls, noScram.quotas, noScram.brokerConfigs = nil, nil, nil
	b := encodeImage(&noScram)
	b = b[:len(b)-4] // the SCRAM, ACL, quota and broker config counts, 0 each
	v1 := append([]byte(snapshotMagic), 1)
	v1 = append(v1, b[len(snapshotMagic)+1:snapshotHeaderBytes]...)
	return append(v1, b[snapshotHeaderBytes+8:]...)
}

func FuzzDecodeImage(f *testing.F) {
	f.Add(encodeImage(emptyImage()))
	f.Add(encodeImage(seedImage(f)))
	f.Add(encodeImageV1(seedImage(f)))
	f.Add(encodeImage(seedImageACLsQuotas(f)))
	f.Add(encodeImage(seedImageScram(f)))
	f.Add(encodeImage(seedImageReassigning(f)))
	f.Fuzz(func(t *testing.T, b []byte) {
		var img *Image
		var err error
		if n := allocated(func() { img, err = decodeImage(b) }); n > allocBound(len(b)) {
			t.Fatalf("decoding %d bytes allocated %d", len(b), n)
		}
		if err != nil {
			return
		}
		enc := encodeImage(img)
		img2, err := decodeImage(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !bytes.Equal(enc, encodeImage(img2)) {
			t.Fatal("unstable")
		}
	})
}

func FuzzDecodeRPC(f *testing.F) {
	for _, c := range seedCommands() {
		f.Add(encodeRequest(1500_000_000, c.encode()))
	}
	f.Add(encodeResponse(reply{index: 9, payload: []byte{1, 2}}, errf(ErrStaleBrokerEpoch, "x")))
	f.Fuzz(func(t *testing.T, b []byte) {
		n := allocated(func() {
			decodeRequest(b)
			decodeResponse(b)
			var framed bytes.Buffer
			writeFrame(&framed, b)
			readFrame(bytes.NewReader(framed.Bytes()[:framed.Len()/2]))
			readFrame(bytes.NewReader(b))
		})
		if n > allocBound(len(b)) {
			t.Fatalf("%d bytes allocated %d", len(b), n)
		}
	})
}

// TestWriteFuzzCorpus regenerates the committed seed corpus in
// testdata/fuzz when RINGLOG_WRITE_CORPUS=1.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("RINGLOG_WRITE_CORPUS") != "1" {
		t.Skip("set RINGLOG_WRITE_CORPUS=1 to rewrite testdata/fuzz")
	}
	write := func(target, name string, b []byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		data := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range seedCommands() {
		write("FuzzDecodeCommand", c.typ.String(), c.encode())
		write("FuzzDecodeRPC", "request-"+c.typ.String(), encodeRequest(1000_000_000, c.encode()))
	}
	write("FuzzDecodeRPC", "response", encodeResponse(reply{index: 9, payload: []byte{1}}, errf(ErrFencedLeaderEpoch, "t-0")))
	write("FuzzDecodeImage", "empty", encodeImage(emptyImage()))
	write("FuzzDecodeImage", "small", encodeImage(seedImage(t)))
	write("FuzzDecodeImage", "small-v1", encodeImageV1(seedImage(t)))
	write("FuzzDecodeImage", "reassigning", encodeImage(seedImageReassigning(t)))
	big := []byte(encodeImage(seedImage(t)))
	// The broker count, after the header and the next producer id.
	n := snapshotHeaderBytes + 8
	write("FuzzDecodeImage", "huge-count", append(big[:n:n], 0xff, 0xff, 0xff, 0xff, 0x07))
	write("FuzzDecodeCommand", "huge-count", []byte{cmdVersion, byte(cmdElectPreferred), 0xff, 0xff, 0xff, 0xff, 0x07})
}
