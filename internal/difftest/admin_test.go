package difftest

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// newTopic is one topic of a CreateTopics request.
type newTopic struct {
	name        string
	partitions  int32
	replication int16
	configs     map[string]*string
	assignment  map[int32][]int32
}

func createTopicsReq(validateOnly bool, topics ...newTopic) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(vCreateTopics)
	req.TimeoutMillis, req.ValidateOnly = 30_000, validateOnly
	for _, nt := range topics {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = nt.name, nt.partitions, nt.replication
		for p, replicas := range nt.assignment {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition, a.Replicas = p, replicas
			t.ReplicaAssignment = append(t.ReplicaAssignment, a)
		}
		for k, v := range nt.configs {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, v
			t.Configs = append(t.Configs, c)
		}
		req.Topics = append(req.Topics, t)
	}
	return req
}

func deleteTopicsReq(names []string, ids ...[16]byte) *kmsg.DeleteTopicsRequest {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(vDeleteTopics)
	req.TimeoutMillis = 30_000
	for _, n := range names {
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, t)
	}
	for _, id := range ids {
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.TopicID = id
		req.Topics = append(req.Topics, t)
	}
	return req
}

func createPartitionsReq(validateOnly bool, topic string, count int32, assignment ...[]int32) *kmsg.CreatePartitionsRequest {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.SetVersion(vCreatePartitions)
	req.TimeoutMillis, req.ValidateOnly = 30_000, validateOnly
	t := kmsg.NewCreatePartitionsRequestTopic()
	t.Topic, t.Count = topic, count
	for _, replicas := range assignment {
		a := kmsg.NewCreatePartitionsRequestTopicAssignment()
		a.Replicas = replicas
		t.Assignment = append(t.Assignment, a)
	}
	req.Topics = append(req.Topics, t)
	return req
}

func str(s string) *string { return &s }

// TestCreateTopics: valid and invalid names, counts, replication factors,
// assignments and configs, existing topics, validate-only.
func TestCreateTopics(t *testing.T) {
	run(t, func(s *side) {
		n := func(suffix string) string { return name(s.t, suffix) }
		s.do("valid", createTopicsReq(false, newTopic{name: n("a"), partitions: 3, replication: 1}))
		s.waitLeaders(n("a"), 3)
		s.do("existing", createTopicsReq(false, newTopic{name: n("a"), partitions: 3, replication: 1}))
		s.do("defaults (-1, -1)", createTopicsReq(false, newTopic{name: n("b"), partitions: -1, replication: -1}))
		s.waitLeaders(n("b"), 1)
		s.do("with configs", createTopicsReq(false, newTopic{name: n("c"), partitions: 1, replication: 1,
			configs: map[string]*string{"retention.ms": str("1000"), "cleanup.policy": str("compact")}}))
		s.waitLeaders(n("c"), 1)
		s.do("bad name", createTopicsReq(false, newTopic{name: "bad name!", partitions: 1, replication: 1}))
		s.do("empty name", createTopicsReq(false, newTopic{name: "", partitions: 1, replication: 1}))
		s.do("name .", createTopicsReq(false, newTopic{name: ".", partitions: 1, replication: 1}))
		s.do("name ..", createTopicsReq(false, newTopic{name: "..", partitions: 1, replication: 1}))
		s.do("name of 249", createTopicsReq(true, newTopic{name: strings.Repeat("x", 249), partitions: 1, replication: 1}))
		s.do("name of 250", createTopicsReq(false, newTopic{name: strings.Repeat("x", 250), partitions: 1, replication: 1}))
		s.quiet(createTopicsReq(false, newTopic{name: n("d.x"), partitions: 1, replication: 1}))
		s.do("colliding with an underscore", createTopicsReq(false, newTopic{name: n("d_x"), partitions: 1, replication: 1}))
		s.do("0 partitions", createTopicsReq(false, newTopic{name: n("e"), partitions: 0, replication: 1}))
		s.do("-2 partitions", createTopicsReq(false, newTopic{name: n("e"), partitions: -2, replication: 1}))
		s.do("replication 0", createTopicsReq(false, newTopic{name: n("e"), partitions: 1, replication: 0}))
		s.do("replication 3 on one broker", createTopicsReq(false, newTopic{name: n("e"), partitions: 1, replication: 3}))
		s.do("replication -2", createTopicsReq(false, newTopic{name: n("e"), partitions: 1, replication: -2}))
		s.do("assignment", createTopicsReq(false, newTopic{name: n("f"), partitions: -1, replication: -1,
			assignment: map[int32][]int32{0: {nodeID}, 1: {nodeID}}}))
		s.waitLeaders(n("f"), 2)
		s.do("assignment to an unknown broker", createTopicsReq(false, newTopic{name: n("g"), partitions: -1, replication: -1,
			assignment: map[int32][]int32{0: {7}}}))
		s.do("assignment and a count", createTopicsReq(false, newTopic{name: n("g"), partitions: 1, replication: -1,
			assignment: map[int32][]int32{0: {nodeID}}}))
		s.do("assignment with a gap", createTopicsReq(false, newTopic{name: n("g"), partitions: -1, replication: -1,
			assignment: map[int32][]int32{0: {nodeID}, 2: {nodeID}}}))
		s.do("unknown config", createTopicsReq(false, newTopic{name: n("h"), partitions: 1, replication: 1,
			configs: map[string]*string{"no.such.config": str("1")}}))
		s.do("bad config value", createTopicsReq(false, newTopic{name: n("h"), partitions: 1, replication: 1,
			configs: map[string]*string{"retention.ms": str("soon")}}))
		s.do("null config value", createTopicsReq(false, newTopic{name: n("h"), partitions: 1, replication: 1,
			configs: map[string]*string{"retention.ms": nil}}))
		s.do("config out of range", createTopicsReq(false, newTopic{name: n("h"), partitions: 1, replication: 1,
			configs: map[string]*string{"min.insync.replicas": str("0")}}))
		s.do("validate only", createTopicsReq(true, newTopic{name: n("i"), partitions: 2, replication: 1}))
		s.do("after validate only", metadataReq(n("i")))
		s.do("validate only, existing", createTopicsReq(true, newTopic{name: n("a"), partitions: 1, replication: 1}))
		s.do("twice in one request", createTopicsReq(false, newTopic{name: n("j"), partitions: 1, replication: 1},
			newTopic{name: n("j"), partitions: 1, replication: 1}))
	})
}

// TestDeleteTopics: existing, unknown names and ids, twice.
func TestDeleteTopics(t *testing.T) {
	run(t, func(s *side) {
		a, b := name(s.t, "a"), name(s.t, "b")
		s.createTopic(a, 1, nil)
		idB := s.createTopic(b, 2, nil)
		s.do("by name", deleteTopicsReq([]string{a}))
		s.do("by id", deleteTopicsReq(nil, idB))
		s.do("unknown name", deleteTopicsReq([]string{name(s.t, "nope")}))
		s.do("unknown id", deleteTopicsReq(nil, [16]byte{5, 5}))
		s.do("deleted already", deleteTopicsReq([]string{a}))
		s.do("empty name", deleteTopicsReq([]string{""}))
	})
}

// TestCreatePartitions: fewer, as many, more, with assignments, unknown
// topics, validate-only.
func TestCreatePartitions(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		s.createTopic(topic, 2, nil)
		s.do("fewer", createPartitionsReq(false, topic, 1))
		s.do("as many", createPartitionsReq(false, topic, 2))
		s.do("validate only", createPartitionsReq(true, topic, 5))
		s.do("after validate only", metadataReq(topic))
		s.do("more", createPartitionsReq(false, topic, 3))
		s.waitLeaders(topic, 3)
		s.do("with an assignment", createPartitionsReq(false, topic, 4, []int32{nodeID}))
		s.waitLeaders(topic, 4)
		s.do("assignment too short", createPartitionsReq(false, topic, 6, []int32{nodeID}))
		s.do("assignment to an unknown broker", createPartitionsReq(false, topic, 5, []int32{9}))
		s.do("unknown topic", createPartitionsReq(false, name(s.t, "nope"), 2))
		s.do("metadata", metadataReq(topic))
	})
}
