package difftest

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func describeConfigsReq(typ kmsg.ConfigResourceType, resource string, names ...string) *kmsg.DescribeConfigsRequest {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(vDescribeConfigs)
	req.IncludeSynonyms = true
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = typ, resource, names
	req.Resources = append(req.Resources, r)
	return req
}

// topicConfigSettled waits until the topic's config name reads value:
// Kafka's broker answers DescribeConfigs from its metadata image, which
// applies an alteration the controller committed a moment later (a suite
// run described retention.ms at its default right after a SET).
// Alterations apply in order, so waiting for the last one is enough.
func (s *side) topicConfigSettled(topic, name, value string) {
	s.eventually(fmt.Sprintf("%s=%s on %s", name, value, topic), func() kmsg.Request {
		return describeConfigsReq(kmsg.ConfigResourceTypeTopic, topic, name)
	}, func(r kmsg.Response) bool {
		for _, res := range r.(*kmsg.DescribeConfigsResponse).Resources {
			for _, c := range res.Configs {
				if c.Name == name && c.Value != nil && *c.Value == value {
					return true
				}
			}
		}
		return false
	})
}

func alterConfigsReq(validateOnly bool, typ kmsg.ConfigResourceType, resource string, kv ...string) *kmsg.AlterConfigsRequest {
	req := kmsg.NewPtrAlterConfigsRequest()
	req.SetVersion(vAlterConfigs)
	req.ValidateOnly = validateOnly
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, resource
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	return req
}

// alter is one IncrementalAlterConfigs operation.
type alter struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

func incrementalAlterReq(validateOnly bool, typ kmsg.ConfigResourceType, resource string, ops ...alter) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.SetVersion(vIncrementalAlter)
	req.ValidateOnly = validateOnly
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, resource
	for _, o := range ops {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = o.name, o.op, o.value
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	return req
}

// topicConfigNames are the topic configs ringlog honours (engine's
// configKeys), described by name so that each compares on its own.
var topicConfigNames = []string{
	"cleanup.policy", "compression.type", "retention.ms", "retention.bytes", "segment.bytes", "segment.ms",
	"segment.index.bytes", "index.interval.bytes", "max.message.bytes", "flush.messages", "flush.ms",
	"min.insync.replicas", "message.timestamp.type", "message.timestamp.before.max.ms",
	"message.timestamp.after.max.ms", "delete.retention.ms", "min.cleanable.dirty.ratio",
	"min.compaction.lag.ms", "max.compaction.lag.ms",
}

// brokerConfigNames are broker configs both brokers describe; those the
// difftest sets in Kafka's server.properties (num.partitions, ...) are
// left out, as their source would be STATIC_BROKER_CONFIG there only
// because kafkaref writes Kafka's default into the file.
var brokerConfigNames = []string{
	"log.retention.ms", "log.retention.bytes", "log.segment.bytes", "log.roll.ms", "log.cleanup.policy",
	"message.max.bytes", "min.insync.replicas", "log.message.timestamp.type", "log.index.interval.bytes",
	"log.flush.interval.messages", "log.flush.interval.ms", "log.cleaner.delete.retention.ms",
	"default.replication.factor", "broker.rack", "compression.type",
}

// TestDescribeConfigs: a topic's configs by name, all of them, overridden
// ones, unknown topics, broker configs by name, unknown brokers.
func TestDescribeConfigs(t *testing.T) {
	run(t, func(s *side) {
		topic, over := name(s.t, ""), name(s.t, "over")
		s.createTopic(topic, 1, nil)
		s.createTopic(over, 1, map[string]string{"retention.ms": "1000", "cleanup.policy": "compact,delete", "max.message.bytes": "2000"})
		s.do("topic, by name", describeConfigsReq(kmsg.ConfigResourceTypeTopic, topic, topicConfigNames...))
		s.do("topic, overrides", describeConfigsReq(kmsg.ConfigResourceTypeTopic, over, topicConfigNames...))
		s.do("topic, all", describeConfigsReq(kmsg.ConfigResourceTypeTopic, topic))
		s.do("topic, unknown name", describeConfigsReq(kmsg.ConfigResourceTypeTopic, topic, "no.such.config"))
		s.do("unknown topic", describeConfigsReq(kmsg.ConfigResourceTypeTopic, name(s.t, "nope")))
		s.do("topic, bad name", describeConfigsReq(kmsg.ConfigResourceTypeTopic, "bad name!"))
		s.do("broker, by name", describeConfigsReq(kmsg.ConfigResourceTypeBroker, fmt.Sprint(nodeID), brokerConfigNames...))
		s.do("broker, unknown id", describeConfigsReq(kmsg.ConfigResourceTypeBroker, "7", "log.retention.ms"))
		s.do("broker, bad id", describeConfigsReq(kmsg.ConfigResourceTypeBroker, "x", "log.retention.ms"))
		s.do("broker, cluster default", describeConfigsReq(kmsg.ConfigResourceTypeBroker, "", "log.retention.ms"))
	})
}

// TestAlterConfigs: AlterConfigs replaces a topic's overrides: valid and
// invalid values, unknown names and topics, validate-only.
func TestAlterConfigs(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		s.createTopic(topic, 1, map[string]string{"max.message.bytes": "2000"})
		topicRes := kmsg.ConfigResourceTypeTopic
		s.do("set retention.ms", alterConfigsReq(false, topicRes, topic, "retention.ms", "5000"))
		s.topicConfigSettled(topic, "retention.ms", "5000")
		s.do("after set", describeConfigsReq(topicRes, topic, "retention.ms", "max.message.bytes"))
		s.do("validate only", alterConfigsReq(true, topicRes, topic, "retention.ms", "7000"))
		s.do("after validate only", describeConfigsReq(topicRes, topic, "retention.ms"))
		s.do("bad value", alterConfigsReq(false, topicRes, topic, "retention.ms", "soon"))
		s.do("unknown name", alterConfigsReq(false, topicRes, topic, "no.such.config", "1"))
		s.do("null value", func() kmsg.Request {
			r := alterConfigsReq(false, topicRes, topic, "retention.ms", "1")
			r.Resources[0].Configs[0].Value = nil
			return r
		}())
		s.do("one name twice", alterConfigsReq(false, topicRes, topic, "retention.ms", "1", "retention.ms", "2"))
		s.do("bad cleanup.policy", alterConfigsReq(false, topicRes, topic, "cleanup.policy", "sometimes"))
		s.do("unknown topic", alterConfigsReq(false, topicRes, name(s.t, "nope"), "retention.ms", "5000"))
		s.do("after the errors", describeConfigsReq(topicRes, topic, "retention.ms", "cleanup.policy"))
	})
}

// TestIncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on a topic,
// invalid values and operations, unknown topics, validate-only.
func TestIncrementalAlterConfigs(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		s.createTopic(topic, 1, nil)
		res := kmsg.ConfigResourceTypeTopic
		set, del := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete
		app, sub := kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract
		s.do("set", incrementalAlterReq(false, res, topic, alter{"retention.ms", set, str("5000")}, alter{"segment.ms", set, str("600000")}))
		s.topicConfigSettled(topic, "segment.ms", "600000")
		s.do("after set", describeConfigsReq(res, topic, "retention.ms", "segment.ms"))
		s.do("delete", incrementalAlterReq(false, res, topic, alter{"segment.ms", del, nil}))
		s.do("delete what is not set", incrementalAlterReq(false, res, topic, alter{"flush.ms", del, nil}))
		s.do("append to a list", incrementalAlterReq(false, res, topic, alter{"cleanup.policy", app, str("compact")}))
		s.topicConfigSettled(topic, "cleanup.policy", "delete,compact")
		s.do("after append", describeConfigsReq(res, topic, "cleanup.policy"))
		s.do("subtract from a list", incrementalAlterReq(false, res, topic, alter{"cleanup.policy", sub, str("delete")}))
		s.topicConfigSettled(topic, "cleanup.policy", "compact")
		s.do("after subtract", describeConfigsReq(res, topic, "cleanup.policy"))
		s.do("append to a number", incrementalAlterReq(false, res, topic, alter{"retention.ms", app, str("1")}))
		s.do("bad value", incrementalAlterReq(false, res, topic, alter{"retention.ms", set, str("soon")}))
		s.do("set null", incrementalAlterReq(false, res, topic, alter{"retention.ms", set, nil}))
		s.do("unknown name", incrementalAlterReq(false, res, topic, alter{"no.such.config", set, str("1")}))
		s.do("unknown op", incrementalAlterReq(false, res, topic, alter{"retention.ms", 9, str("1")}))
		s.do("one name twice", incrementalAlterReq(false, res, topic, alter{"retention.ms", set, str("1")}, alter{"retention.ms", del, nil}))
		s.do("validate only", incrementalAlterReq(true, res, topic, alter{"retention.ms", set, str("9000")}))
		s.do("after the rest", describeConfigsReq(res, topic, "retention.ms", "segment.ms", "cleanup.policy"))
		s.do("unknown topic", incrementalAlterReq(false, res, name(s.t, "nope"), alter{"retention.ms", set, str("1")}))
		s.do("broker, read-only config", incrementalAlterReq(true, kmsg.ConfigResourceTypeBroker, fmt.Sprint(nodeID),
			alter{"log.dirs", set, str("/tmp")}))
	})
}
