package difftest

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// throttleSettled waits until a describe of the broker resource shows
// the value of name (nil: the config not set there): Kafka's broker
// applies its controller's records a moment after the controller answers.
func (s *side) throttleSettled(resource, name string, want *string) {
	s.eventually("broker config settled", func() kmsg.Request {
		return describeConfigsReq(kmsg.ConfigResourceTypeBroker, resource, name)
	}, func(r kmsg.Response) bool {
		res := r.(*kmsg.DescribeConfigsResponse).Resources
		if len(res) != 1 {
			return false
		}
		for _, c := range res[0].Configs {
			if c.Name == name && c.Source != kmsg.ConfigSourceDefaultConfig {
				return want != nil && c.Value != nil && *c.Value == *want
			}
		}
		return want == nil
	})
}

// TestReplicationThrottleConfigs: the replication throttles' rates as
// dynamic broker configs (the cluster default and a broker's own, set,
// read back with their sources and synonyms, refused values), and the
// throttled-replicas topic configs (KIP-73).
func TestReplicationThrottleConfigs(t *testing.T) {
	run(t, func(s *side) {
		const lead, follow = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
		broker := kmsg.ConfigResourceTypeBroker
		set, del := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete
		id := fmt.Sprint(nodeID)
		s.do("broker, unset", describeConfigsReq(broker, id, lead, follow))
		s.do("cluster default, unset", describeConfigsReq(broker, "", lead, follow))
		s.do("cluster default, validate only", incrementalAlterReq(true, broker, "", alter{lead, set, str("1048576")}))
		s.do("cluster default", incrementalAlterReq(false, broker, "", alter{lead, set, str("1048576")}, alter{follow, set, str("2097152")}))
		s.throttleSettled("", follow, str("2097152"))
		s.do("describe cluster default", describeConfigsReq(broker, "", lead, follow))
		s.do("broker's own", incrementalAlterReq(false, broker, id, alter{lead, set, str("3145728")}))
		s.throttleSettled(id, lead, str("3145728"))
		s.do("describe broker", describeConfigsReq(broker, id, lead, follow))
		s.do("negative", incrementalAlterReq(false, broker, id, alter{lead, set, str("-1")}))
		s.do("not a number", incrementalAlterReq(false, broker, id, alter{follow, set, str("fast")}))
		s.do("append to a rate", incrementalAlterReq(false, broker, id, alter{lead, kmsg.IncrementalAlterConfigOpAppend, str("1")}))
		s.do("a static config", incrementalAlterReq(false, broker, id, alter{"node.id", set, str("5")}))
		s.do("delete broker's own", incrementalAlterReq(false, broker, id, alter{lead, del, nil}))
		s.throttleSettled(id, lead, str("1048576"))
		s.do("describe after delete", describeConfigsReq(broker, id, lead, follow))
		s.do("delete cluster default", incrementalAlterReq(false, broker, "", alter{lead, del, nil}, alter{follow, del, nil}))
		s.throttleSettled("", follow, nil)
		s.do("describe after deleting all", describeConfigsReq(broker, id, lead, follow))

		topic := name(s.t, "")
		s.createTopic(topic, 1, nil)
		res := kmsg.ConfigResourceTypeTopic
		s.do("throttled replicas", incrementalAlterReq(false, res, topic,
			alter{"leader.replication.throttled.replicas", set, str("0:1,0:2")}, alter{"follower.replication.throttled.replicas", set, str("*")}))
		s.do("describe throttled replicas", describeConfigsReq(res, topic, "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"))
		s.do("bad throttled replicas", incrementalAlterReq(false, res, topic, alter{"leader.replication.throttled.replicas", set, str("0-1")}))
	})
}
