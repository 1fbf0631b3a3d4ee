package difftest

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// createV4 sends a CreateTopics at v4, which answers without the topic's
// configs (v5, KIP-525) and id (v7): those differ between the brokers for
// reasons of their own (README: D4, D5, D8), not the ones compared here.
func createV4(req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsRequest {
	req.SetVersion(4)
	return req
}

// TestTopicConfigFloors: the minimums of the topic configs that decide how
// many files a partition makes (segment.bytes' 1 MiB from KIP-1030,
// segment.index.bytes, segment.ms, index.interval.bytes) at CreateTopics,
// AlterConfigs and IncrementalAlterConfigs, just below and at each.
func TestTopicConfigFloors(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		s.createTopic(topic, 1, nil)
		for _, c := range []struct{ name, below, at string }{
			{"segment.bytes", "1048575", "1048576"},
			{"segment.index.bytes", "3", "4"},
			{"segment.ms", "0", "1"},
			{"index.interval.bytes", "-1", "0"},
		} {
			s.do("create, "+c.name+" below", createTopicsReq(true, newTopic{name: name(s.t, "new"), partitions: 1, replication: 1,
				configs: map[string]*string{c.name: str(c.below)}}))
			s.do("create, "+c.name+" at", createV4(createTopicsReq(true, newTopic{name: name(s.t, "new"), partitions: 1, replication: 1,
				configs: map[string]*string{c.name: str(c.at)}})))
			s.do("alter, "+c.name+" below", alterConfigsReq(false, kmsg.ConfigResourceTypeTopic, topic, c.name, c.below))
			s.do("incremental, "+c.name+" below", incrementalAlterReq(false, kmsg.ConfigResourceTypeTopic, topic,
				alter{c.name, kmsg.IncrementalAlterConfigOpSet, str(c.below)}))
		}
		s.do("create, segment.bytes beyond an INT", createTopicsReq(true, newTopic{name: name(s.t, "new"), partitions: 1, replication: 1,
			configs: map[string]*string{"segment.bytes": str("4294967296")}}))
		s.do("after the refusals", describeConfigsReq(kmsg.ConfigResourceTypeTopic, topic,
			"segment.bytes", "segment.index.bytes", "segment.ms", "index.interval.bytes"))
	})
}

// TestInternalTopicAdmin: what a client may do to __consumer_offsets.
// Kafka 4.4 refuses only DeleteRecords (INVALID_TOPIC_EXCEPTION); creating
// it again, growing it and changing its configs are validated as for any
// topic (validate-only here: both brokers' groups live in it).
func TestInternalTopicAdmin(t *testing.T) {
	run(t, func(s *side) {
		s.coordinated(name(s.t, "group"))
		const offsets = "__consumer_offsets"
		s.do("create", createTopicsReq(true, newTopic{name: offsets, partitions: 1, replication: 1}))
		s.do("create partitions", createPartitionsReq(true, offsets, offsetsPartitions+1))
		s.do("create partitions, fewer", createPartitionsReq(true, offsets, 1))
		s.do("alter configs", alterConfigsReq(true, kmsg.ConfigResourceTypeTopic, offsets, "retention.ms", "1000"))
		s.do("incremental alter configs", incrementalAlterReq(true, kmsg.ConfigResourceTypeTopic, offsets,
			alter{"retention.ms", kmsg.IncrementalAlterConfigOpSet, str("1000")}))
		s.do("delete records", deleteRecordsReq(offsets, 0, 0))
		s.do("delete records, to the high watermark", deleteRecordsReq(offsets, 1, -1))
		s.do("metadata after", metadataReq(offsets))
	})
}

// TestLongTopicNames: a topic name of 249 characters, Kafka's longest, is
// created, written, deleted and created again; 250 is refused.
func TestLongTopicNames(t *testing.T) {
	run(t, func(s *side) {
		long := name(s.t, "")
		long += strings.Repeat("x", 249-len(long))
		for _, label := range []string{"first", "again"} {
			s.do(label+": create", createV4(createTopicsReq(false, newTopic{name: long, partitions: 2, replication: 1})))
			s.waitLeaders(long, 2)
			s.produce(long, 0, plain("a", "b"))
			s.do(label+": list offsets", listOffsetsReq(long, 0, -1))
			s.do(label+": delete", deleteTopicsReq([]string{long}))
			s.eventually("the topic gone", func() kmsg.Request { return metadataReq(long) }, func(r kmsg.Response) bool {
				ts := r.(*kmsg.MetadataResponse).Topics
				return len(ts) == 1 && ts[0].ErrorCode != 0
			})
		}
		s.do("250 characters", createTopicsReq(true, newTopic{name: long + "y", partitions: 1, replication: 1}))
	})
}
