package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzRequest feeds request frames (the bytes after the 4-byte size prefix,
// as netpoll hands them to Serve) to the whole decoding path: header,
// API and version checks, size limits, the APIs' own pre-decoding checks
// (checkProduceShape) and kmsg decoding, then Produce's batch header
// checks. The invariants:
//
//   - nothing panics;
//   - an accepted request re-encodes, and decode-encode-decode is stable;
//   - checkProduceShape never refuses a Produce body that kmsg decodes
//     (it may only refuse for size);
//   - decoding allocates at most a bounded multiple of the frame's size.
//
// The committed corpus in testdata/fuzz/FuzzRequest holds real requests of
// every API served, encoded by kmsg, and broken ones; RINGLOG_FUZZ_CORPUS=1
// go test -run TestWriteFuzzCorpus rewrites it.
func FuzzRequest(f *testing.F) {
	s := NewServer(Config{}, nil) // parsing touches no engine
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, a, req, err := s.parseRequest(frame)
		checkAllocs(t, s, frame)
		switch {
		case errors.Is(err, errApiVersionsUnsupported):
			if h.key != int16(kmsg.ApiVersions) {
				t.Fatalf("unsupported ApiVersions answer for key %d", h.key)
			}
		case err != nil:
			if !errors.Is(err, errBadRequest) {
				t.Fatalf("error %v does not wrap errBadRequest", err)
			}
		default:
			if a == nil || req == nil || req.Key() != h.key || h.version < a.min || h.version > a.max {
				t.Fatalf("accepted %s v%d outside its registration", kmsg.NameForKey(h.key), h.version)
			}
			checkRoundTrip(t, req)
			if p, ok := req.(*kmsg.ProduceRequest); ok {
				for _, rt := range p.Topics {
					for _, rp := range rt.Partitions {
						checkProduceBatches(rp.Records)
					}
				}
			}
		}
		checkProduceShapeAgrees(t, s, frame)
	})
}

// Allocation allowed per frame byte, plus a constant: kmsg allocates a
// structure of tens of bytes for an array element or a tagged field of two
// or three bytes, and Go's maps and slices round up. Measured: up to 32
// times for arrays of minimal elements, 45 to 55 times for a section of
// distinct empty tagged fields (kept in a map). The bound is twice that,
// so that it flags what is worse than kmsg's known costs.
const (
	allocFactor = 128
	allocSlack  = 64 << 10
)

// checkAllocs measures what parsing frame allocates. The counter is the
// process's: it is read only in a fuzzing worker, where nothing else runs
// (in a plain go test run, the brokers of earlier tests still allocate in
// the background). Parsing is deterministic, so only an excess seen on
// three tries in a row counts, against the runtime's own noise.
func checkAllocs(t *testing.T, s *Server, frame []byte) {
	if f := flag.Lookup("test.fuzzworker"); f == nil || f.Value.String() != "true" {
		return
	}
	limit := uint64(allocFactor*len(frame) + allocSlack)
	var alloc uint64
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s.parseRequest(frame)
		runtime.ReadMemStats(&after)
		if alloc = after.TotalAlloc - before.TotalAlloc; alloc <= limit {
			return
		}
	}
	h, _, _ := parseHeader(frame)
	t.Fatalf("%s v%d: %d bytes allocated for a %d-byte frame", kmsg.NameForKey(h.key), h.version, alloc, len(frame))
}

// checkRoundTrip re-encodes a decoded request and decodes it again: the
// second encoding must equal the first.
func checkRoundTrip(t *testing.T, req kmsg.Request) {
	enc := req.AppendTo(nil)
	again := kmsg.RequestForKey(req.Key())
	again.SetVersion(req.GetVersion())
	if err := again.ReadFrom(enc); err != nil {
		t.Fatalf("%s v%d: re-encoded request does not decode: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if enc2 := again.AppendTo(nil); !bytes.Equal(enc, enc2) {
		t.Fatalf("%s v%d: decode-encode-decode is not stable:\n%x\n%x", kmsg.NameForKey(req.Key()), req.GetVersion(), enc, enc2)
	}
}

// checkProduceShapeAgrees runs checkProduceShape and kmsg on any frame
// whose header names Produce at a served version: the shape check may
// refuse for size, never a body kmsg decodes.
func checkProduceShapeAgrees(t *testing.T, s *Server, frame []byte) {
	h, body, err := parseHeader(frame)
	if err != nil || h.key != int16(kmsg.Produce) || h.version < 0 || h.version > 13 {
		return
	}
	if h.version >= 9 {
		if body, err = skipTags(body); err != nil {
			return
		}
	}
	shapeErr := checkProduceShape(s, h.version, body)
	if shapeErr != nil && !errors.Is(shapeErr, errBadRequest) {
		t.Fatalf("shape error %v does not wrap errBadRequest", shapeErr)
	}
	if shapeErr != nil && len(body) > s.cfg.MaxRequestBytes/producePartitionCost {
		return // may be a refusal for size, which kmsg would not make
	}
	req := kmsg.NewPtrProduceRequest()
	req.Version = h.version
	decErr := decode(req, body)
	if decErr == nil && shapeErr != nil {
		t.Fatalf("produce v%d: kmsg decodes what checkProduceShape refuses (%v)", h.version, shapeErr)
	}
}

// TestWriteFuzzCorpus writes the seed corpus of FuzzRequest when
// RINGLOG_FUZZ_CORPUS=1; otherwise it checks that the committed corpus has
// every seed.
func TestWriteFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzRequest")
	write := os.Getenv("RINGLOG_FUZZ_CORPUS") == "1"
	if write {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, frame := range fuzzSeeds(t) {
		path := filepath.Join(dir, name)
		content := "go test fuzz v1\n[]byte(" + strconv.Quote(string(frame)) + ")\n"
		if write {
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Errorf("seed %s missing or stale in %s (RINGLOG_FUZZ_CORPUS=1 rewrites it): %v", name, dir, err)
		}
	}
}

// frameOf encodes req as a request frame without the size prefix.
func frameOf(req kmsg.Request) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("seed")).AppendRequest(nil, req, 1)[4:]
}

// fuzzSeeds are real requests of every API this file's owner serves, at
// several versions, plus the broken frames a hostile client would send.
func fuzzSeeds(t testing.TB) map[string][]byte {
	seeds := map[string][]byte{}
	add := func(name string, req kmsg.Request) { seeds[name] = frameOf(req) }

	// A fixed timestamp keeps the seeds the same from run to run.
	records := testBatch(t, "seed", 3, 7, 0)
	h := mustHeader(t, records)
	h.BaseTimestamp, h.MaxTimestamp = 1_700_000_000_000, 1_700_000_000_000
	records, _ = encodeBatch(h, records)
	for _, v := range []int16{0, 3, 7, 9, 13} {
		req := produceReq(v, -1, "topic", 0, records)
		req.Topics[0].TopicID = [16]byte{1, 2, 3, 4}
		add(fmt.Sprintf("produce-v%d", v), req)
	}
	txn := produceReq(11, 1, "topic", 2, records)
	txn.TransactionID = kmsg.StringPtr("txn")
	add("produce-v11-transactional", txn)

	for _, v := range []int16{0, 1, 4, 9, 12, 13} {
		req := metadataReq(v, "a", "b")
		if v >= 10 {
			rt := kmsg.NewMetadataRequestTopic()
			rt.TopicID = [16]byte{5}
			req.Topics = append(req.Topics, rt)
		}
		add(fmt.Sprintf("metadata-v%d", v), req)
	}
	all := kmsg.NewPtrMetadataRequest()
	all.Version = 12
	add("metadata-v12-all", all)

	for _, v := range []int16{1, 4, 7, 11} {
		add(fmt.Sprintf("listoffsets-v%d", v), listOffsetsReq(v, "topic", 0, -3))
	}
	for _, v := range []int16{0, 2, 4} {
		add(fmt.Sprintf("offsetforleaderepoch-v%d", v), offsetForEpochReq(v, "topic", 0, 0, 0))
	}
	for _, v := range []int16{0, 2, 4, 5} {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = v
		add(fmt.Sprintf("initproducerid-v%d", v), req)
	}
	for _, v := range []int16{0, 3, 4} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "seed", "1"
		add(fmt.Sprintf("apiversions-v%d", v), req)
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "topic"
	ft.Partitions = append(ft.Partitions, kmsg.NewFetchRequestTopicPartition())
	fetch.Topics = append(fetch.Topics, ft)
	add("fetch-v12", fetch)

	// The group coordinator's APIs.
	for _, v := range []int16{0, 4, 9} {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.ProtocolType, req.SessionTimeoutMillis = v, "g", "consumer", 10000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1, 0, 0, 0, 1, 0, 1, 't'}}}
		if v >= 5 {
			req.InstanceID = kmsg.StringPtr("i")
		}
		add(fmt.Sprintf("joingroup-v%d", v), req)
	}
	for _, v := range []int16{0, 3, 5} {
		req := kmsg.NewPtrSyncGroupRequest()
		req.Version, req.Group, req.MemberID, req.Generation = v, "g", "m", 1
		req.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: "m", MemberAssignment: []byte{0, 1}}}
		add(fmt.Sprintf("syncgroup-v%d", v), req)
	}
	for _, v := range []int16{0, 4} {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.Generation = v, "g", "m", 1
		add(fmt.Sprintf("heartbeat-v%d", v), req)
	}
	for _, v := range []int16{0, 3, 5} {
		req := kmsg.NewPtrLeaveGroupRequest()
		req.Version, req.Group, req.MemberID = v, "g", "m"
		req.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
		add(fmt.Sprintf("leavegroup-v%d", v), req)
	}
	for _, v := range []int16{0, 2, 7, 9} {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.MemberID, req.Generation = v, "g", "m", 1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "topic"
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, Metadata: kmsg.StringPtr("x")}}
		req.Topics = append(req.Topics, rt)
		add(fmt.Sprintf("offsetcommit-v%d", v), req)
	}
	for _, v := range []int16{1, 5, 8, 9} {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = v, "g"
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "topic", Partitions: []int32{0, 1}}}
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}, {Group: "h", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "topic", Partitions: []int32{0}}}}}
		add(fmt.Sprintf("offsetfetch-v%d", v), req)
	}
	for _, v := range []int16{0, 3, 4, 6} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey, req.CoordinatorKeys = v, "g", []string{"g", "h"}
		add(fmt.Sprintf("findcoordinator-v%d", v), req)
	}
	for _, v := range []int16{0, 5} {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Version, req.Groups = v, []string{"g", "h"}
		add(fmt.Sprintf("describegroups-v%d", v), req)
		list := kmsg.NewPtrListGroupsRequest()
		list.Version, list.StatesFilter, list.TypesFilter = v, []string{"Stable"}, []string{"classic"}
		add(fmt.Sprintf("listgroups-v%d", v), list)
	}
	for _, v := range []int16{0, 2} {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version, req.Groups = v, []string{"g"}
		add(fmt.Sprintf("deletegroups-v%d", v), req)
	}
	// KIP-848.
	for _, v := range []int16{0, 1} {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Version, req.Group, req.MemberID, req.RebalanceTimeoutMillis = v, "g", "m", 5000
		req.SubscribedTopicNames, req.ServerAssignor = []string{"topic"}, kmsg.StringPtr("uniform")
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: [16]byte{1}, Partitions: []int32{0, 2}}}
		if v >= 1 {
			req.SubscribedTopicRegex, req.InstanceID = kmsg.StringPtr("t.*"), kmsg.StringPtr("i")
		}
		add(fmt.Sprintf("consumergroupheartbeat-v%d", v), req)
		desc := kmsg.NewPtrConsumerGroupDescribeRequest()
		desc.Version, desc.Groups, desc.IncludeAuthorizedOperations = v, []string{"g", ""}, true
		add(fmt.Sprintf("consumergroupdescribe-v%d", v), desc)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.MemberID, commit.Generation = 10, "g", "m", 4
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{TopicID: [16]byte{1}, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}}}
	add("offsetcommit-v10", commit)
	fetch10 := kmsg.NewPtrOffsetFetchRequest()
	fetch10.Version = 10
	fetch10.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", MemberID: kmsg.StringPtr("m"), MemberEpoch: 4,
		Topics: []kmsg.OffsetFetchRequestGroupTopic{{TopicID: [16]byte{1}, Partitions: []int32{0}}}}}
	add("offsetfetch-v10", fetch10)
	desc6 := kmsg.NewPtrDescribeGroupsRequest()
	desc6.Version, desc6.Groups = 6, []string{"g"}
	add("describegroups-v6", desc6)
	del3 := kmsg.NewPtrDeleteGroupsRequest()
	del3.Version, del3.Groups = 3, []string{"g"}
	add("deletegroups-v3", del3)

	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "topic", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	add("offsetdelete-v0", od)

	// Broken frames.
	seeds["empty"] = []byte{}
	seeds["short-header"] = []byte{0, 3, 0, 1, 0, 0}
	seeds["unknown-key"] = []byte{0x7f, 0x7f, 0, 0, 0, 0, 0, 1, 0xff, 0xff}
	seeds["negative-key"] = []byte{0xff, 0xfe, 0, 0, 0, 0, 0, 1, 0xff, 0xff}
	seeds["apiversions-v99"] = []byte{0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff}
	seeds["metadata-v99"] = []byte{0, 3, 0, 99, 0, 0, 0, 1, 0xff, 0xff}
	seeds["bad-client-id"] = []byte{0, 3, 0, 1, 0, 0, 0, 1, 0x80, 0}
	seeds["long-client-id"] = []byte{0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0xff, 'x'}
	seeds["bad-header-tags"] = append(frameOf(metadataReq(12, "a"))[:16], 0xff, 0xff, 0xff, 0xff, 0xff)
	truncated := frameOf(produceReq(9, 1, "topic", 0, records))
	seeds["produce-truncated"] = truncated[:len(truncated)/2]

	// Array counts far beyond the bytes that follow: huge, negative, and
	// the largest int32.
	hdr := func(key, version int16) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(key))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		return append(b, 0, 0, 0, 1, 0xff, 0xff) // correlation id 1, null client id
	}
	count := func(b []byte, n int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(n)) }
	seeds["metadata-v1-count-max"] = count(hdr(3, 1), 1<<31-1)
	seeds["metadata-v1-count-negative"] = count(hdr(3, 1), -7)
	produceHead := append(hdr(0, 7), 0xff, 0xff, 0, 1, 0, 0, 0x3a, 0x98) // null txn id, acks 1, timeout
	seeds["produce-v7-topics-huge"] = count(bytes.Clone(produceHead), 1<<30)
	seeds["produce-v7-topics-negative"] = count(bytes.Clone(produceHead), -1)
	manyTopics := count(bytes.Clone(produceHead), 4096)
	for range 4096 {
		manyTopics = append(manyTopics, 0, 0, 0, 0, 0, 0) // empty name, no partitions
	}
	seeds["produce-v7-many-empty-topics"] = manyTopics
	parts := count(append(count(bytes.Clone(produceHead), 1), 0, 1, 't'), 1<<31-1)
	seeds["produce-v7-partitions-max"] = parts
	flex := append(hdr(0, 9), 0) // empty header tags
	flex = append(flex, 0, 0, 1, 0, 0, 0x3a, 0x98)
	flex = append(flex, 0xff, 0xff, 0xff, 0xff, 0x0f) // compact topic count 2^32-1
	seeds["produce-v9-topics-varint-max"] = flex
	return seeds
}
