package difftest

import (
	"encoding/binary"
	"hash/crc32"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProduceTimestamps: message.timestamp.before.max.ms and
// after.max.ms bound each record's timestamp, not the batch's range: a
// refused batch names its offending records (record_errors, KIP-467).
func TestProduceTimestamps(t *testing.T) {
	// One clock reading for both sides, so that what is stored compares;
	// the bounds are hours wide.
	now := time.Now().UnixMilli()
	run(t, func(s *side) {
		window, open := name(s.t, "window"), name(s.t, "open")
		s.createTopic(window, 1, map[string]string{
			"message.timestamp.before.max.ms": "3600000", "message.timestamp.after.max.ms": "3600000"})
		s.createTopic(open, 1, nil)
		const hour = 3600_000
		produce := func(label, topic string, recs ...rec) {
			s.do(label, produceReq(vProduceNames, 1, part{topic: topic}, batchOf(kgo.NoCompression(), recs...)))
		}
		produce("all in range", window, rec{now - 1000, "a"}, rec{now, "b"})
		produce("the first too old", window, rec{now - 2*hour, "x"}, rec{now, "y"}, rec{now + 1, "z"})
		produce("the first too old, the last too new", window, rec{now - 2*hour, "x"}, rec{now, "y"}, rec{now + 2*hour, "z"})
		produce("a record before the first, too old", window, rec{now, "x"}, rec{now - 3*hour, "y"})
		s.do("compressed, the second too new", produceReq(vProduceNames, 1, part{topic: window},
			batchOf(kgo.Lz4Compression(), rec{now, "x"}, rec{now + 3*hour, "y"})))
		produce("unbounded before, old records", open, rec{baseTimestamp, "c"}, rec{baseTimestamp - 1000, "d"})
		produce("unbounded before, one too new", open, rec{baseTimestamp, "x"}, rec{now + 2*hour, "y"}, rec{now, "z"})
		s.do("the window topic", fetchReq(vFetchNames, part{topic: window}, 0, 1<<20))
		s.do("the open topic", fetchReq(vFetchNames, part{topic: open}, 0, 1<<20))
	})
}

// codecs are the four compression codecs of the protocol.
var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
}{
	{"gzip", kgo.GzipCompression()},
	{"snappy", kgo.SnappyCompression()},
	{"lz4", kgo.Lz4Compression()},
	{"zstd", kgo.ZstdCompression()},
}

// TestCompression: batches compressed with each codec (by a client's
// compressor) are appended and fetched back: offsets, sizes and the
// records inside.
func TestCompression(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		s.createTopic(topic, 1, nil)
		p := part{topic: topic}
		for i, c := range codecs {
			ts := int64(baseTimestamp + 10*i)
			s.do(c.name, produceReq(vProduceNames, 1, p, batchOf(c.codec,
				rec{ts, c.name + "-a"}, rec{ts + 2, c.name + "-b"}, rec{ts + 1, c.name + "-c"})))
		}
		s.do("fetch all", fetchReq(vFetchNames, p, 0, 1<<20))
		s.do("fetch from inside a batch", fetchReq(vFetchNames, p, 4, 1<<20))
		s.do("fetch, max bytes below a batch", fetchReq(vFetchNames, p, 0, 20))
		s.do("max timestamp", listOffsetsReq(topic, 0, -3))
		s.do("by timestamp", listOffsetsReq(topic, 0, baseTimestamp+11))
		bad := batchOf(kgo.GzipCompression(), rec{baseTimestamp, "x"})
		bad[len(bad)-3] ^= 0xff // inside the gzip stream: the CRC is the batch's own
		binary.BigEndian.PutUint32(bad[17:], crc32.Checksum(bad[21:], castagnoli))
		s.do("a gzip stream that does not inflate", produceReq(vProduceNames, 1, p, bad))
		s.do("latest", listOffsetsReq(topic, 0, -1))
	})
}

// TestLogAppendTime: a topic with message.timestamp.type=LogAppendTime
// answers a produce with the broker's time and stores its batches with
// the log-append-time attribute and the broker's time as max timestamp.
// The broker's time is checked to lie within the step on each side and
// then written over (the CRC recomputed, after it was checked), so that
// the rest of each batch compares.
func TestLogAppendTime(t *testing.T) {
	ahead := time.Now().Add(48 * time.Hour).UnixMilli()
	run(t, func(s *side) {
		topic := name(s.t, "")
		s.createTopic(topic, 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
		p := part{topic: topic}
		start := time.Now().UnixMilli()
		// Each append in a millisecond of its own, so that the max
		// timestamp names one batch on both brokers.
		s.do("plain", produceReq(vProduceNames, 1, p, plain("a", "b")))
		time.Sleep(3 * time.Millisecond)
		s.do("gzip", produceReq(vProduceNames, 1, p, batchOf(kgo.GzipCompression(), rec{baseTimestamp, "c"}, rec{baseTimestamp + 1, "d"})))
		time.Sleep(3 * time.Millisecond)
		s.do("timestamps far ahead", produceReq(vProduceNames, 1, p, batch(ahead, -1, -1, -1, "e", "f")))
		lat := plain("x")
		lat[22] |= 0x08 // attributes: the timestamp type is the producer's claim of LogAppendTime
		binary.BigEndian.PutUint32(lat[17:], crc32.Checksum(lat[21:], castagnoli))
		s.do("a batch that claims LogAppendTime", produceReq(vProduceNames, 1, p, lat))
		f := s.do("fetch", fetchReq(vFetchNames, p, 0, 1<<20)).(*kmsg.FetchResponse)
		end := time.Now().UnixMilli()
		for i := range f.Topics {
			for j := range f.Topics[i].Partitions {
				s.appendTimes(f.Topics[i].Partitions[j].RecordBatches, start, end)
			}
		}
		l := s.do("max timestamp", listOffsetsReq(topic, 0, -3)).(*kmsg.ListOffsetsResponse)
		for i := range l.Topics[0].Partitions {
			lp := &l.Topics[0].Partitions[i]
			if lp.Timestamp < start || lp.Timestamp > end {
				s.fail("max timestamp %d outside [%d, %d]", lp.Timestamp, start, end)
			}
			lp.Timestamp = -42
		}
	})
}

// appendTimes checks that every batch of a LogAppendTime topic says so
// and has a max timestamp in [from, to] of this side's clock, and writes
// -42 over it (with a new CRC, once the old one was checked).
func (s *side) appendTimes(b []byte, from, to int64) {
	for len(b) >= 61 {
		n := int(binary.BigEndian.Uint32(b[8:])) + 12
		if n > len(b) {
			return
		}
		one := b[:n]
		if crc32.Checksum(one[21:], castagnoli) != binary.BigEndian.Uint32(one[17:]) {
			s.fail("a fetched batch with a wrong CRC")
		}
		if one[22]&0x08 == 0 {
			s.fail("a fetched batch of a LogAppendTime topic without the attribute")
		}
		if ts := int64(binary.BigEndian.Uint64(one[35:])); ts < from || ts > to {
			s.fail("a fetched batch's append time %d outside [%d, %d]", ts, from, to)
		}
		minus42 := int64(-42)
		binary.BigEndian.PutUint64(one[35:], uint64(minus42))
		binary.BigEndian.PutUint32(one[17:], crc32.Checksum(one[21:], castagnoli))
		b = b[n:]
	}
}

func describeLogDirsReq(topic string, partitions ...int32) *kmsg.DescribeLogDirsRequest {
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.SetVersion(vDescribeLogDirs)
	t := kmsg.NewDescribeLogDirsRequestTopic()
	t.Topic, t.Partitions = topic, partitions
	req.Topics = append(req.Topics, t)
	return req
}

// TestDescribeLogDirs: the shape of the answer and the partitions' sizes.
// The directory's path and the volume's space are the machine's: checked
// to be there on each side, then written over.
func TestDescribeLogDirs(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		s.createTopic(topic, 2, nil)
		s.produce(topic, 0, plain("a", "b", "c"))
		s.produce(topic, 0, batchOf(kgo.ZstdCompression(), rec{baseTimestamp, "d"}, rec{baseTimestamp, "e"}))
		s.produce(topic, 1, plain("f"))
		machine := func(r kmsg.Response) {
			for i := range r.(*kmsg.DescribeLogDirsResponse).Dirs {
				d := &r.(*kmsg.DescribeLogDirsResponse).Dirs[i]
				if d.Dir == "" || d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
					s.fail("log dir %q of %d bytes, %d usable", d.Dir, d.TotalBytes, d.UsableBytes)
				}
				d.Dir, d.TotalBytes, d.UsableBytes = "dir", 1, 1
			}
		}
		machine(s.do("two partitions", describeLogDirsReq(topic, 0, 1)))
		machine(s.do("an unknown partition", describeLogDirsReq(topic, 0, 9)))
		machine(s.do("an unknown topic", describeLogDirsReq(name(s.t, "nope"), 0)))
	})
}

func alterReplicaLogDirsReq(dir, topic string, partitions ...int32) *kmsg.AlterReplicaLogDirsRequest {
	req := kmsg.NewPtrAlterReplicaLogDirsRequest()
	req.SetVersion(vAlterReplicaLogDirs)
	d := kmsg.NewAlterReplicaLogDirsRequestDir()
	d.Dir = dir
	t := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
	t.Topic, t.Partitions = topic, partitions
	d.Topics = append(d.Topics, t)
	req.Dirs = append(req.Dirs, d)
	return req
}

// TestAlterReplicaLogDirs: the codes of AlterReplicaLogDirs on a broker of
// one log directory: a directory it does not have (absolute or relative)
// is LOG_DIR_NOT_FOUND, whatever the partition; an unknown topic or
// partition in its own directory UNKNOWN_TOPIC_OR_PARTITION; a partition
// moved to the directory it is in, nothing to do. The directory's path is
// the machine's, learned from DescribeLogDirs on each side.
func TestAlterReplicaLogDirs(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		s.createTopic(topic, 2, nil)
		describe := kmsg.NewPtrDescribeLogDirsRequest()
		describe.SetVersion(vDescribeLogDirs)
		dirs := s.quiet(describe).(*kmsg.DescribeLogDirsResponse).Dirs
		if len(dirs) != 1 {
			s.fail("log dirs %+v", dirs)
		}
		own := dirs[0].Dir
		s.do("an unknown directory", alterReplicaLogDirsReq(filepath.Join(filepath.Dir(own), "nosuch"), topic, 0))
		s.do("a relative directory", alterReplicaLogDirsReq("data", topic, 0))
		s.do("an unknown directory and topic", alterReplicaLogDirsReq("/nosuch", name(s.t, "nope"), 0))
		s.do("an unknown topic", alterReplicaLogDirsReq(own, name(s.t, "nope"), 0))
		s.do("an unknown partition", alterReplicaLogDirsReq(own, topic, 9))
		s.do("where it is", alterReplicaLogDirsReq(own, topic, 0, 1))
	})
}
