package kafka

// What the external tests (package kafka_test, which start brokers with
// broker.Start) need to see of the package's internals.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/segment/batch"
)

const (
	MaxCreateTopics          = maxCreateTopics
	FetchVersionMin          = fetchVersionMin
	FetchVersionMax          = fetchVersionMax
	AuthorizedOperationsNone = authorizedOperationsNone
	TopicOperationsAll       = topicOperationsAll
	ClusterOperationsAll     = clusterOperationsAll
)

// SkipTags skips a flexible version's tagged fields.
func SkipTags(b []byte) ([]byte, error) { return skipTags(b) }

// Serves reports whether the broker implements the API key.
func Serves(key int16) bool { return apis[key] != nil }

// LongPolls is the number of fetches parked for their max_wait_ms.
func LongPolls(s *Server) int { return s.waits.longPolls() }

// Advertised is the host and port Metadata tells clients.
func Advertised(s *Server) (string, int32) { return s.cfg.AdvertisedHost, s.cfg.AdvertisedPort }

// AppendFetchFrame is kmsg's framing of a fetch response: the reference
// the hand-written framing (fetch_frame.go) is compared with.
func AppendFetchFrame(corr int32, resp *kmsg.FetchResponse) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(corr))
	if resp.Version >= 12 {
		b = append(b, 0)
	}
	return resp.AppendTo(b)
}

// Request builders shared by the fuzz targets and the broker tests.

// testBatch is a producer batch of n records "<prefix>-<i>", with producer
// id pid (-1: not idempotent), epoch 0 and base sequence seq.
func MakeBatch(t testing.TB, prefix string, n int, pid int64, seq int32) []byte {
	t.Helper()
	now := time.Now().UnixMilli()
	recs := make([]batch.Record, n)
	for i := range recs {
		recs[i] = batch.Record{OffsetDelta: int32(i), Value: []byte(prefix + "-" + Itoa(i))}
	}
	h := batch.Header{LastOffsetDelta: int32(n - 1), BaseTimestamp: now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1}
	if pid >= 0 {
		h.ProducerEpoch, h.BaseSequence = 0, seq
	}
	b, err := batch.Build(nil, h, batch.None, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func Itoa(i int) string {
	return strconv.Itoa(i)
}

// produceReq builds a Produce request for one partition.
func ProduceReq(version int16, acks int16, topic string, partition int32, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = version
	req.Acks = acks
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	p := kmsg.NewProduceRequestTopicPartition()
	p.Partition = partition
	p.Records = records
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

// encodeBatch re-encodes the batch b with header h (length and CRC
// recomputed), for tests that change header fields.
func EncodeBatch(h batch.Header, b []byte) ([]byte, error) {
	return batch.Encode(nil, h, b[batch.RecordsPos:])
}

// frameOf encodes req as a request frame without the size prefix.
func FrameOf(req kmsg.Request) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("seed")).AppendRequest(nil, req, 1)[4:]
}

// fuzzSeeds are real requests of every API this file's owner serves, at
// several versions, plus the broken frames a hostile client would send.
func SeedRequests(t testing.TB) map[string][]byte {
	seeds := map[string][]byte{}
	add := func(name string, req kmsg.Request) { seeds[name] = FrameOf(req) }

	// A fixed timestamp keeps the seeds the same from run to run.
	records := MakeBatch(t, "seed", 3, 7, 0)
	h := MustHeader(t, records)
	h.BaseTimestamp, h.MaxTimestamp = 1_700_000_000_000, 1_700_000_000_000
	records, _ = EncodeBatch(h, records)
	for _, v := range []int16{0, 3, 7, 9, 13} {
		req := ProduceReq(v, -1, "topic", 0, records)
		req.Topics[0].TopicID = [16]byte{1, 2, 3, 4}
		add(fmt.Sprintf("produce-v%d", v), req)
	}
	txn := ProduceReq(11, 1, "topic", 2, records)
	txn.TransactionID = kmsg.StringPtr("txn")
	add("produce-v11-transactional", txn)

	for _, v := range []int16{0, 1, 4, 9, 12, 13} {
		req := MetadataReq(v, "a", "b")
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
		add(fmt.Sprintf("listoffsets-v%d", v), ListOffsetsReq(v, "topic", 0, -3))
	}
	for _, v := range []int16{0, 2, 4} {
		add(fmt.Sprintf("offsetforleaderepoch-v%d", v), OffsetForEpochReq(v, "topic", 0, 0, 0))
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

	// Log directories (JBOD).
	for _, v := range []int16{0, 1, 2} {
		req := kmsg.NewPtrAlterReplicaLogDirsRequest()
		req.Version = v
		d := kmsg.NewAlterReplicaLogDirsRequestDir()
		d.Dir = "/var/lib/ringlog/d1"
		d.Topics = []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: "topic", Partitions: []int32{0, 1}}}
		req.Dirs = append(req.Dirs, d)
		add(fmt.Sprintf("alterreplicalogdirs-v%d", v), req)
	}
	for _, v := range []int16{0, 2, 4} {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		req.Version = v
		req.Topics = []kmsg.DescribeLogDirsRequestTopic{{Topic: "topic", Partitions: []int32{0}}}
		add(fmt.Sprintf("describelogdirs-v%d", v), req)
	}

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

	// The transaction APIs of issue 12's last versions.
	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "topic", Partitions: []int32{0, 1}}}
	add("describeproducers-v0", dp)
	for _, v := range []int16{0, 1, 2} {
		lt := kmsg.NewPtrListTransactionsRequest()
		lt.Version, lt.StateFilters, lt.ProducerIDFilters = v, []string{"Ongoing"}, []int64{7}
		lt.TransactionalIDPattern = kmsg.StringPtr("txn-.*")
		add(fmt.Sprintf("listtransactions-v%d", v), lt)
	}
	for _, v := range []int16{1, 2} {
		wm := kmsg.NewPtrWriteTxnMarkersRequest()
		wm.Version = v
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, m.TransactionVersion = 7, 1, true, 3, 2
		m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "topic", Partitions: []int32{0}}}
		wm.Markers = append(wm.Markers, m)
		add(fmt.Sprintf("writetxnmarkers-v%d", v), wm)
	}
	for _, v := range []int16{3, 5, 6} {
		tc := kmsg.NewPtrTxnOffsetCommitRequest()
		tc.Version, tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch = v, "txn", "g", 7, 1
		tt := kmsg.NewTxnOffsetCommitRequestTopic()
		tt.Topic, tt.TopicID = "topic", [16]byte{9}
		tt.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5, LeaderEpoch: -1}}
		tc.Topics = append(tc.Topics, tt)
		add(fmt.Sprintf("txnoffsetcommit-v%d", v), tc)
	}

	// KIP-455's reassignment APIs: a target, a cancellation (null
	// replicas), an empty list; every partition and named ones.
	for _, v := range []int16{0, 1} {
		ar := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		ar.Version, ar.TimeoutMillis, ar.AllowReplicationFactorChange = v, 1000, v == 0
		at := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		at.Topic = "topic"
		at.Partitions = []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 0, Replicas: []int32{2, 3}}, {Partition: 1}, {Partition: 2, Replicas: []int32{}}}
		ar.Topics = append(ar.Topics, at)
		add(fmt.Sprintf("alterpartitionreassignments-v%d", v), ar)
	}
	lr := kmsg.NewPtrListPartitionReassignmentsRequest()
	add("listpartitionreassignments-v0-all", lr)
	lrn := kmsg.NewPtrListPartitionReassignmentsRequest()
	lrn.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{{Topic: "topic", Partitions: []int32{0, 1}}}
	add("listpartitionreassignments-v0", lrn)

	// Broken frames.
	seeds["empty"] = []byte{}
	seeds["short-header"] = []byte{0, 3, 0, 1, 0, 0}
	seeds["unknown-key"] = []byte{0x7f, 0x7f, 0, 0, 0, 0, 0, 1, 0xff, 0xff}
	seeds["negative-key"] = []byte{0xff, 0xfe, 0, 0, 0, 0, 0, 1, 0xff, 0xff}
	seeds["apiversions-v99"] = []byte{0, 18, 0, 99, 0, 0, 0, 1, 0xff, 0xff}
	seeds["metadata-v99"] = []byte{0, 3, 0, 99, 0, 0, 0, 1, 0xff, 0xff}
	seeds["bad-client-id"] = []byte{0, 3, 0, 1, 0, 0, 0, 1, 0x80, 0}
	seeds["long-client-id"] = []byte{0, 3, 0, 1, 0, 0, 0, 1, 0x7f, 0xff, 'x'}
	seeds["bad-header-tags"] = append(FrameOf(MetadataReq(12, "a"))[:16], 0xff, 0xff, 0xff, 0xff, 0xff)
	truncated := FrameOf(ProduceReq(9, 1, "topic", 0, records))
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

func MetadataReq(version int16, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	req.AllowAutoTopicCreation = true
	req.Topics = []kmsg.MetadataRequestTopic{}
	for _, name := range topics {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
	}
	return req
}

func ListOffsetsReq(version int16, topic string, partition int32, ts int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = version
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func OffsetForEpochReq(version int16, topic string, partition, current, epoch int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = version
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = partition, current, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func MustHeader(t testing.TB, b []byte) batch.Header {
	t.Helper()
	h, err := batch.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
