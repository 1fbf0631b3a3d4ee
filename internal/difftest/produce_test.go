package difftest

import (
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// part names one partition of a produce or fetch: by name for the older
// versions, by id for the newer (KIP-516).
type part struct {
	topic     string
	id        [16]byte
	partition int32
}

func produceReq(version int16, acks int16, p part, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	req.Acks, req.TimeoutMillis = acks, 10_000
	t := kmsg.NewProduceRequestTopic()
	t.Topic, t.TopicID = p.topic, p.id
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = p.partition, records
	t.Partitions = append(t.Partitions, pp)
	req.Topics = append(req.Topics, t)
	return req
}

// fetchReq is a consumer's fetch of one partition that does not wait.
func fetchReq(version int16, p part, offset int64, partitionMaxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 50<<20
	req.SessionID, req.SessionEpoch = 0, -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = p.topic, p.id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p.partition, offset, partitionMaxBytes
	fp.CurrentLeaderEpoch, fp.LastFetchedEpoch, fp.LogStartOffset = -1, -1, -1
	t.Partitions = append(t.Partitions, fp)
	req.Topics = append(req.Topics, t)
	return req
}

func listOffsetsReq(topic string, partition int32, timestamp int64) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(vListOffsets)
	req.ReplicaID, req.TimeoutMillis = -1, 10_000
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = topic
	p := kmsg.NewListOffsetsRequestTopicPartition()
	p.Partition, p.Timestamp, p.CurrentLeaderEpoch = partition, timestamp, -1
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func offsetForLeaderEpochReq(topic string, partition, epoch int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.SetVersion(vOffsetForLeaderEpoch)
	req.ReplicaID = -1
	t := kmsg.NewOffsetForLeaderEpochRequestTopic()
	t.Topic = topic
	p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	p.Partition, p.CurrentLeaderEpoch, p.LeaderEpoch = partition, -1, epoch
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

func deleteRecordsReq(topic string, partition int32, offset int64) *kmsg.DeleteRecordsRequest {
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.SetVersion(vDeleteRecords)
	req.TimeoutMillis = 10_000
	t := kmsg.NewDeleteRecordsRequestTopic()
	t.Topic = topic
	p := kmsg.NewDeleteRecordsRequestTopicPartition()
	p.Partition, p.Offset = partition, offset
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return req
}

// TestProduce: acks 1 and -1 by topic id and by name, to partitions and
// topics that do not exist, a batch with a bad CRC, acks 0 and acks 2.
func TestProduce(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		id := s.createTopic(topic, 2, nil)
		s.do("metadata", metadataReq(topic))
		s.do("acks 1 by id", produceReq(vProduce, 1, part{id: id}, plain("a", "b", "c")))
		s.do("acks -1 by id, partition 1", produceReq(vProduce, -1, part{id: id, partition: 1}, plain("d")))
		s.do("acks 1 by name", produceReq(vProduceNames, 1, part{topic: topic}, plain("e", "f")))
		s.do("acks -1 by name", produceReq(vProduceNames, -1, part{topic: topic}, plain("g")))
		s.do("unknown partition by name", produceReq(vProduceNames, 1, part{topic: topic, partition: 7}, plain("x")))
		s.do("unknown partition by id", produceReq(vProduce, 1, part{id: id, partition: 7}, plain("x")))
		s.do("unknown topic by name", produceReq(vProduceNames, 1, part{topic: name(s.t, "nope")}, plain("x")))
		s.do("unknown topic id", produceReq(vProduce, 1, part{id: [16]byte{1, 2, 3}}, plain("x")))
		bad := plain("y")
		bad[len(bad)-1] ^= 0xff
		s.do("bad crc", produceReq(vProduceNames, 1, part{topic: topic}, bad))
		s.do("acks 2", produceReq(vProduceNames, 2, part{topic: topic}, plain("z")))
		codec := plain("y")
		codec[22] |= 7 // attributes' low byte: codec 7 does not exist
		binary.BigEndian.PutUint32(codec[17:], crc32.Checksum(codec[21:], castagnoli))
		s.do("unknown codec", produceReq(vProduceNames, 1, part{topic: topic}, codec))
		future := batch(time.Now().Add(2*time.Hour).UnixMilli(), -1, -1, -1, "y")
		s.do("timestamp too far ahead", produceReq(vProduceNames, 1, part{topic: topic}, future))
		// Topics of their own for what one broker may take and the other
		// refuse, so that the offsets of the rest still compare.
		small, strict, txn := name(s.t, "small"), name(s.t, "strict"), name(s.t, "txn")
		s.createTopic(small, 1, map[string]string{"max.message.bytes": "2000"})
		s.createTopic(strict, 2, map[string]string{"min.insync.replicas": "2"})
		s.createTopic(txn, 1, nil)
		s.do("too large", produceReq(vProduceNames, 1, part{topic: small}, plain(strings.Repeat("x", 3000))))
		s.do("acks -1, min.insync.replicas 2", produceReq(vProduceNames, -1, part{topic: strict}, plain("y")))
		s.do("acks 1, min.insync.replicas 2", produceReq(vProduceNames, 1, part{topic: strict, partition: 1}, plain("y")))
		s.do("transactional id", func() kmsg.Request {
			r := produceReq(vProduceNames, 1, part{topic: txn}, plain("y"))
			r.TransactionID = kmsg.StringPtr("tx")
			return r
		}())
		s.sendOnly(produceReq(vProduceNames, 0, part{topic: topic, partition: 1}, plain("h")))
		// Kafka handles a connection's requests one at a time, so a request
		// after an acks=0 produce sees its records; ringlog's ListOffsets
		// may overtake the append (README.md, D1): wait for it.
		s.eventually("the acks=0 records", func() kmsg.Request { return listOffsetsReq(topic, 1, -1) }, func(r kmsg.Response) bool {
			ps := r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions
			return len(ps) == 1 && ps[0].Offset == 2
		})
		s.do("after acks 0", listOffsetsReq(topic, 1, -1))
		s.do("fetch all", fetchReq(vFetchNames, part{topic: topic}, 0, 1<<20))
		s.do("fetch partition 1", fetchReq(vFetch, part{id: id, partition: 1}, 0, 1<<20))
	})
}

// TestProduceAcksZeroFailure: a producer with acks=0 reads no answers, so a
// broker tells it of a failed batch by closing the connection.
func TestProduceAcksZeroFailure(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		s.createTopic(topic, 1, nil)
		s.sendOnly(produceReq(vProduceNames, 0, part{topic: topic, partition: 3}, plain("x")))
		s.do("after acks 0 to an unknown partition", metadataReq(topic))
	})
}

// TestFetch: offsets in range, at the high watermark, beyond it, of an
// unknown partition and topic, and partition max bytes smaller than a batch.
func TestFetch(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		id := s.createTopic(topic, 1, nil)
		for _, b := range [][]byte{plain("a", "b"), plain("c"), plain("d", "e", "f")} {
			s.produce(topic, 0, b)
		}
		p := part{topic: topic}
		s.do("from 0", fetchReq(vFetchNames, p, 0, 1<<20))
		s.do("from 1, inside the first batch", fetchReq(vFetchNames, p, 1, 1<<20))
		s.do("from 3", fetchReq(vFetchNames, p, 3, 1<<20))
		s.do("at the high watermark", fetchReq(vFetchNames, p, 6, 1<<20))
		s.do("beyond the high watermark", fetchReq(vFetchNames, p, 100, 1<<20))
		s.do("negative offset", fetchReq(vFetchNames, p, -5, 1<<20))
		s.do("partition max bytes 10", fetchReq(vFetchNames, p, 0, 10))
		s.do("partition max bytes 80", fetchReq(vFetchNames, p, 0, 80))
		s.do("unknown partition", fetchReq(vFetchNames, part{topic: topic, partition: 4}, 0, 1<<20))
		s.do("unknown topic", fetchReq(vFetchNames, part{topic: name(s.t, "nope")}, 0, 1<<20))
		s.do("by id from 0", fetchReq(vFetch, part{id: id}, 0, 1<<20))
		s.do("unknown topic id", fetchReq(vFetch, part{id: [16]byte{9}}, 0, 1<<20))
		s.do("by id, unknown partition", fetchReq(vFetch, part{id: id, partition: 4}, 0, 1<<20))
		max := fetchReq(vFetchNames, p, 0, 1<<20)
		max.MaxBytes = 10
		s.do("request max bytes 10", max)

		s.slow(func() { longPolls(s, topic) })
	})
}

// longPolls: a fetch at the high watermark waits max_wait_ms for records;
// records produced meanwhile answer it at once; min_bytes above what there
// is waits the whole time and answers what there is.
func longPolls(s *side, topic string) {
	p := part{topic: topic}
	wait := func(offset int64, minBytes, waitMs int32) *kmsg.FetchRequest {
		r := fetchReq(vFetchNames, p, offset, 1<<20)
		r.MinBytes, r.MaxWaitMillis = minBytes, waitMs
		return r
	}
	start := time.Now()
	s.do("wait at the high watermark", wait(6, 1, 1500))
	if d := time.Since(start); d < time.Second {
		s.fail("the long poll ended after %v", d)
	}
	c := s.conn()
	poll := s.async(c, "a produce ends the wait", wait(6, 1, 10000))
	time.Sleep(300 * time.Millisecond)
	s.produce(topic, 0, plain("g"))
	s.wait(poll)
	s.do("min bytes above what there is", wait(0, 1<<20, 800))
}

// TestListOffsets: earliest, latest, by timestamp, max timestamp, for
// existing and unknown partitions.
func TestListOffsets(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		s.createTopic(topic, 1, nil)
		s.do("latest of an empty partition", listOffsetsReq(topic, 0, -1))
		s.do("max timestamp of an empty partition", listOffsetsReq(topic, 0, -3))
		s.produce(topic, 0, batch(baseTimestamp, -1, -1, -1, "a", "b", "c"))
		s.produce(topic, 0, batch(baseTimestamp+100, -1, -1, -1, "d"))
		s.produce(topic, 0, batch(baseTimestamp+50, -1, -1, -1, "e", "f"))
		for _, c := range []struct {
			label string
			ts    int64
		}{
			{"earliest", -2}, {"latest", -1}, {"max timestamp", -3}, {"earliest local", -4},
			{"by timestamp before all", baseTimestamp - 10}, {"by timestamp of the second record", baseTimestamp + 1},
			{"by timestamp between records", baseTimestamp + 60}, {"by timestamp of the max", baseTimestamp + 100},
			{"by timestamp after all", baseTimestamp + 1000},
		} {
			s.do(c.label, listOffsetsReq(topic, 0, c.ts))
		}
		s.do("unknown partition", listOffsetsReq(topic, 5, -1))
		s.do("unknown topic", listOffsetsReq(name(s.t, "nope"), 0, -1))
	})
}

// TestOffsetForLeaderEpoch: the current epoch, an epoch beyond it, unknown
// partitions.
func TestOffsetForLeaderEpoch(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		s.createTopic(topic, 1, nil)
		s.produce(topic, 0, plain("a", "b", "c"))
		s.do("epoch 0", offsetForLeaderEpochReq(topic, 0, 0))
		s.do("epoch 5", offsetForLeaderEpochReq(topic, 0, 5))
		s.do("epoch -1", offsetForLeaderEpochReq(topic, 0, -1))
		s.do("unknown partition", offsetForLeaderEpochReq(topic, 3, 0))
		s.do("unknown topic", offsetForLeaderEpochReq(name(s.t, "nope"), 0, 0))
	})
}

// TestDeleteRecords: below the high watermark, at it (-1), beyond it, of
// unknown partitions, and what fetches and ListOffsets see afterwards.
func TestDeleteRecords(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		s.createTopic(topic, 2, nil)
		s.produce(topic, 0, plain("a", "b", "c"))
		s.produce(topic, 0, plain("d", "e"))
		s.produce(topic, 1, plain("a", "b"))
		s.do("before 2", deleteRecordsReq(topic, 0, 2))
		s.do("earliest after", listOffsetsReq(topic, 0, -2))
		s.do("fetch below the log start", fetchReq(vFetchNames, part{topic: topic}, 0, 1<<20))
		s.do("fetch from the log start", fetchReq(vFetchNames, part{topic: topic}, 2, 1<<20))
		s.do("before 1, below the log start", deleteRecordsReq(topic, 0, 1))
		s.do("beyond the high watermark", deleteRecordsReq(topic, 0, 10))
		s.do("at the high watermark (-1)", deleteRecordsReq(topic, 1, -1))
		s.do("earliest after all deleted", listOffsetsReq(topic, 1, -2))
		s.do("latest after all deleted", listOffsetsReq(topic, 1, -1))
		s.do("unknown partition", deleteRecordsReq(topic, 5, 0))
		s.do("unknown topic", deleteRecordsReq(name(s.t, "nope"), 0, 0))
	})
}
