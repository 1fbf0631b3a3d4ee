package difftest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The versions the scenarios send: the highest both brokers serve
// (TestVersions checks them against both brokers' ApiVersions), and for
// the APIs whose newest versions name topics by id (KIP-516), also the
// last version that names them, which most clients still send.
const (
	vProduce              = 13
	vProduceNames         = 12
	vFetch                = 18
	vFetchNames           = 12
	vListOffsets          = 11
	vMetadata             = 13
	vOffsetCommit         = 10
	vOffsetCommitNames    = 9
	vOffsetFetch          = 10
	vOffsetFetchNames     = 9
	vFindCoordinator      = 6
	vJoinGroup            = 9
	vHeartbeat            = 4
	vLeaveGroup           = 5
	vSyncGroup            = 5
	vDescribeGroups       = 6
	vListGroups           = 5
	vApiVersions          = 5
	vCreateTopics         = 7
	vDeleteTopics         = 6
	vDeleteRecords        = 2
	vInitProducerID       = 5
	vOffsetForLeaderEpoch = 4
	vDescribeConfigs      = 4
	vAlterConfigs         = 2
	vCreatePartitions     = 3
	vDeleteGroups         = 2
	vIncrementalAlter     = 1
	vOffsetDelete         = 0
	vDescribeCluster      = 2
	vConsumerHeartbeat    = 1
	vConsumerDescribe     = 1
	vDescribeLogDirs      = 4
	vAlterReplicaLogDirs  = 2
)

// baseTimestamp is the first record's timestamp in every batch the scripts
// write: fixed, so that timestamps compare, and old enough to be accepted
// (message.timestamp.before.max.ms is unbounded by default).
const baseTimestamp = 1_700_000_000_000

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batch builds an uncompressed RecordBatch v2 of one record per value,
// with timestamps ts, ts+1, ... For a producer that is not idempotent, pid
// and epoch and seq are -1.
func batch(ts, pid int64, epoch int16, seq int32, values ...string) []byte {
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{TimestampDelta64: int64(i), TimestampDelta: int32(i), OffsetDelta: int32(i), Value: []byte(v)}
		body := r.AppendTo(nil)[1:] // everything after a one-byte length of 0
		r.Length = int32(len(body))
		recs = r.AppendTo(recs)
	}
	n := int32(len(values))
	b := (&kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: n - 1,
		FirstTimestamp: ts, MaxTimestamp: ts + int64(n) - 1,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq,
		NumRecords: n, Records: recs,
	}).AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// plain is a batch of a producer that is not idempotent.
func plain(values ...string) []byte { return batch(baseTimestamp, -1, -1, -1, values...) }

// createTopic creates a topic (unrecorded) and waits until the broker
// leads every partition and knows its id; it returns the id.
func (s *side) createTopic(topic string, partitions int32, configs map[string]string) [16]byte {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(vCreateTopics)
	req.TimeoutMillis = 30_000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, partitions, 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		t.Configs = append(t.Configs, c)
	}
	req.Topics = append(req.Topics, t)
	resp := s.quiet(req).(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		s.fail("create topic %s: %+v", topic, resp.Topics)
	}
	return s.waitLeaders(topic, partitions)
}

// waitLeaders waits until Metadata shows a leader for each of the topic's
// partitions (Kafka's brokers learn a new topic from the controller a
// little after CreateTopics answers) and returns the topic's id.
func (s *side) waitLeaders(topic string, partitions int32) [16]byte {
	resp := s.eventually("leaders of "+topic, func() kmsg.Request { return metadataReq(topic) }, func(r kmsg.Response) bool {
		m := r.(*kmsg.MetadataResponse)
		if len(m.Topics) != 1 || m.Topics[0].ErrorCode != 0 || len(m.Topics[0].Partitions) != int(partitions) {
			return false
		}
		for _, p := range m.Topics[0].Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 {
				return false
			}
		}
		return true
	}).(*kmsg.MetadataResponse)
	// Metadata may name the leader a moment before the leader's log takes
	// requests: wait until each partition answers ListOffsets.
	for p := range partitions {
		s.eventually(fmt.Sprintf("the log of %s-%d", topic, p), func() kmsg.Request { return listOffsetsReq(topic, p, -1) }, func(r kmsg.Response) bool {
			ps := r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions
			return len(ps) == 1 && ps[0].ErrorCode == 0
		})
	}
	return resp.Topics[0].TopicID
}

// topicID asks the broker for a topic's id (unrecorded).
func (s *side) topicID(topic string) [16]byte {
	m := s.quiet(metadataReq(topic)).(*kmsg.MetadataResponse)
	if len(m.Topics) != 1 {
		s.fail("metadata of %s: %+v", topic, m)
	}
	return m.Topics[0].TopicID
}

// metadataReq asks about topics without creating them.
func metadataReq(topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(vMetadata)
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// produce appends records to a partition by name with acks=-1, unrecorded,
// and returns the base offset. A broker that has just created the topic may
// not lead it yet (Kafka's brokers learn of it a little after the
// controller): retriable errors are retried.
func (s *side) produce(topic string, partition int32, records []byte) int64 {
	var base int64
	s.eventually(fmt.Sprintf("a produce to %s-%d", topic, partition), func() kmsg.Request {
		return produceReq(vProduceNames, -1, part{topic: topic, partition: partition}, records)
	}, func(r kmsg.Response) bool {
		p := r.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil && !kerr.IsRetriable(err) {
			s.fail("produce to %s-%d: %v", topic, partition, err)
		}
		base = p.BaseOffset
		return p.ErrorCode == 0
	})
	return base
}

func findCoordinatorReq(keyType int8, keys ...string) *kmsg.FindCoordinatorRequest {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.SetVersion(vFindCoordinator)
	req.CoordinatorType, req.CoordinatorKeys = keyType, keys
	return req
}

func describeGroupsReq(groups ...string) *kmsg.DescribeGroupsRequest {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.SetVersion(vDescribeGroups)
	req.Groups = groups
	return req
}

// coordinated waits until the broker coordinates group (unrecorded): the
// first FindCoordinator creates __consumer_offsets, whose partitions load
// a little later on both brokers.
func (s *side) coordinated(group string) {
	s.eventually("coordinator of "+group, func() kmsg.Request { return findCoordinatorReq(0, group) }, func(r kmsg.Response) bool {
		cs := r.(*kmsg.FindCoordinatorResponse).Coordinators
		return len(cs) == 1 && cs[0].ErrorCode == 0
	})
	s.eventually("group "+group+" loaded", func() kmsg.Request { return describeGroupsReq(group) }, func(r kmsg.Response) bool {
		gs := r.(*kmsg.DescribeGroupsResponse).Groups
		// Kafka 4 answers GROUP_ID_NOT_FOUND for a group it does not
		// know, once it coordinates its partition.
		return len(gs) == 1 && (gs[0].ErrorCode == 0 || gs[0].ErrorCode == kerr.GroupIDNotFound.Code)
	})
}

// rec is one record of a batch built by batchOf: its timestamp and value.
type rec struct {
	ts    int64
	value string
}

// batchOf builds a RecordBatch v2 of a producer that is not idempotent,
// with each record's own timestamp (the batch's first timestamp is the
// first record's, as Kafka's producer writes it; a record before it has a
// negative delta) and the records compressed with codec (kgo's, not
// ringlog's: the brokers get a client's bytes).
func batchOf(codec kgo.CompressionCodec, recs ...rec) []byte {
	var raw []byte
	first, maxTs := recs[0].ts, recs[0].ts
	for i, r := range recs {
		maxTs = max(maxTs, r.ts)
		kr := kmsg.Record{TimestampDelta64: r.ts - first, OffsetDelta: int32(i), Value: []byte(r.value)}
		body := kr.AppendTo(nil)[1:]
		kr.Length = int32(len(body))
		raw = kr.AppendTo(raw)
	}
	attrs := int16(0)
	if c, err := kgo.DefaultCompressor(codec); err != nil {
		panic(err)
	} else if c != nil {
		var buf bytes.Buffer
		out, typ := c.Compress(&buf, raw)
		raw, attrs = slices.Clone(out), int16(typ)
	}
	n := int32(len(recs))
	b := (&kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: n - 1,
		FirstTimestamp: first, MaxTimestamp: maxTs,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: n, Records: raw,
	}).AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}
