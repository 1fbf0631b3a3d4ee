package difftest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeTopicPartitionsReq asks for topics (none: all of them) at most
// limit partitions, from the cursor when cursorTopic is set.
func describeTopicPartitionsReq(limit int32, cursorTopic string, cursorPartition int32, topics ...string) *kmsg.DescribeTopicPartitionsRequest {
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = limit
	for _, t := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = t
		req.Topics = append(req.Topics, rt)
	}
	if cursorTopic != "" {
		req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: cursorTopic, Partition: cursorPartition}
	}
	return req
}

// TestDescribeTopicPartitions: KIP-966's paginated describe, as Kafka 4's
// admin client uses it: named topics in name order, pages cut inside a
// topic and between topics, the cursor, every topic from a cursor, topics
// that do not exist or have an invalid name, a cursor topic the request
// does not name, limits of 0 and below, and a cursor past a topic's end.
func TestDescribeTopicPartitions(t *testing.T) {
	run(t, func(s *side) {
		a, b, c := name(s.t, "a"), name(s.t, "b"), name(s.t, "c")
		s.createTopic(a, 5, nil)
		s.createTopic(b, 2, nil)
		s.createTopic(c, 1, nil)
		s.do("two topics, named out of order", describeTopicPartitionsReq(2000, "", 0, b, a))
		s.do("a topic named twice", describeTopicPartitionsReq(2000, "", 0, c, c))
		s.do("a page cut inside a topic", describeTopicPartitionsReq(3, "", 0, a, b, c))
		s.do("the next page, cut inside the next topic", describeTopicPartitionsReq(3, a, 3, a, b, c))
		s.do("the last page", describeTopicPartitionsReq(3, b, 1, a, b, c))
		s.do("a page that ends with a topic", describeTopicPartitionsReq(5, "", 0, a, c))
		s.do("every topic from a cursor", describeTopicPartitionsReq(7, a, 0))
		s.do("every topic from inside a topic", describeTopicPartitionsReq(1, b, 1))
		s.do("a topic that does not exist and an invalid name", describeTopicPartitionsReq(2000, "", 0, name(s.t, "missing"), "bad/name", c))
		s.do("a cursor topic not named", describeTopicPartitionsReq(2000, a, 0, b, c))
		s.do("limit 0", describeTopicPartitionsReq(0, "", 0, a))
		s.do("a negative limit", describeTopicPartitionsReq(-1, "", 0, a))
		s.do("a cursor past the topic's end", describeTopicPartitionsReq(2000, c, 5, c))
	})
}
