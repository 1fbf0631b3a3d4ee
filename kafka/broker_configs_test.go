package kafka_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/engine"
)

// TestDynamicBrokerConfigs sets the replication throttles' rates on a
// broker and as the cluster default with IncrementalAlterConfigs and
// AlterConfigs, reads them back with DescribeConfigs and their sources,
// and refuses what Kafka refuses; and the throttled-replicas topic
// configs on a topic.
func TestDynamicBrokerConfigs(t *testing.T) {
	b := startBroker(t, brokerOpts{Config: func(c *broker.Config) { c.NodeID = 2 }})
	createTopic(t, b, "moved", 1, nil)
	c := dialAdmin(t, b.Addr)
	sp := func(s string) *string { return &s }
	inc := func(name string, validate bool, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) (int16, string) {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		req.ValidateOnly = validate
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.Configs = kmsg.ConfigResourceTypeBroker, name, ops
		req.Resources = append(req.Resources, r)
		rr := c.do(1, req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		msg := ""
		if rr.ErrorMessage != nil {
			msg = *rr.ErrorMessage
		}
		return rr.ErrorCode, msg
	}
	set := func(name, value string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		return kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: name, Op: kmsg.IncrementalAlterConfigOpSet, Value: sp(value)}
	}
	describe := func(name string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
		req := describeReq(kmsg.ConfigResourceTypeBroker, name, "leader.replication.throttled.rate", "follower.replication.throttled.rate")
		req.IncludeSynonyms = true
		r := c.do(4, req).(*kmsg.DescribeConfigsResponse).Resources[0]
		if r.ErrorCode != 0 {
			t.Fatalf("describe %q: %v", name, kerr.ErrorForCode(r.ErrorCode))
		}
		return configsByName(r.Configs)
	}
	const lead, follow = "leader.replication.throttled.rate", "follower.replication.throttled.rate"

	// Unset: not listed (Kafka's static config does not define them).
	if cs := describe("2"); len(cs) != 0 {
		t.Fatalf("unset: %+v", cs)
	}
	if cs := describe(""); len(cs) != 0 {
		t.Fatalf("cluster level, unset: %+v", cs)
	}
	// validate_only changes nothing.
	if code, msg := inc("", true, set(lead, "1000")); code != 0 {
		t.Fatalf("validate only: %d %s", code, msg)
	}
	if cs := describe(""); len(cs) != 0 {
		t.Fatalf("validate only changed: %+v", cs)
	}
	if code, msg := inc("", false, set(lead, "1000"), set(follow, "3000")); code != 0 {
		t.Fatalf("cluster default: %d %s", code, msg)
	}
	if code, msg := inc("2", false, set(lead, "2000")); code != 0 {
		t.Fatalf("broker: %d %s", code, msg)
	}
	cs := describe("2")
	if l := cs[lead]; *l.Value != "2000" || l.Source != kmsg.ConfigSourceDynamicBrokerConfig || len(l.ConfigSynonyms) != 2 ||
		l.ConfigSynonyms[1].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || *l.ConfigSynonyms[1].Value != "1000" {
		t.Fatalf("broker's own: %+v", l)
	}
	if f := cs[follow]; *f.Value != "3000" || f.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("from the default: %+v", f)
	}
	if cs := describe(""); *cs[lead].Value != "1000" || cs[lead].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || len(cs) != 2 {
		t.Fatalf("cluster level: %+v", cs)
	}
	// The node applies them.
	if got, _ := b.B.Controller().Image().BrokerRate(2, lead); got != 2000 {
		t.Fatalf("image: %v", got)
	}

	for _, tc := range []struct {
		name string
		op   kmsg.IncrementalAlterConfigsRequestResourceConfig
		want *kerr.Error
		msg  string
	}{
		{"negative", set(lead, "-1"), kerr.InvalidRequest, "Invalid value -1 for configuration leader.replication.throttled.rate: Value must be at least 0"},
		{"not a number", set(follow, "fast"), kerr.InvalidRequest, "Invalid value fast for configuration follower.replication.throttled.rate: Not a number of type LONG"},
		{"append", kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: lead, Op: kmsg.IncrementalAlterConfigOpAppend, Value: sp("1")}, kerr.InvalidConfig,
			"Config value append is not allowed for config key: leader.replication.throttled.rate"},
		{"static", set("log.retention.ms", "1"), kerr.InvalidRequest, ""},
	} {
		code, msg := inc("2", false, tc.op)
		if code != tc.want.Code || (tc.msg != "" && msg != tc.msg) {
			t.Errorf("%s: %v %q, want %v %q", tc.name, kerr.ErrorForCode(code), msg, tc.want, tc.msg)
		}
	}

	// DELETE goes back to the default's value.
	if code, msg := inc("2", false, kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: lead, Op: kmsg.IncrementalAlterConfigOpDelete}); code != 0 {
		t.Fatalf("delete: %d %s", code, msg)
	}
	if l := describe("2")[lead]; *l.Value != "1000" || l.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("after delete: %+v", l)
	}
	// AlterConfigs replaces the cluster level's set: lead goes.
	ar := alterReq(false, kmsg.ConfigResourceTypeBroker, "", sp(follow), sp("5000"))
	if r := c.do(2, ar).(*kmsg.AlterConfigsResponse).Resources[0]; r.ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %+v", r)
	}
	if cs := describe(""); len(cs) != 1 || *cs[follow].Value != "5000" {
		t.Fatalf("after AlterConfigs: %+v", cs)
	}

	// The throttled-replicas topic configs.
	topicReq := func(v string) int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "moved"
		r.Configs = append(r.Configs, set(engine.LeaderThrottledReplicasConfig, v), set(engine.FollowerThrottledReplicasConfig, v))
		req.Resources = append(req.Resources, r)
		return c.do(1, req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
	}
	if code := topicReq("0:1,0:2"); code != 0 {
		t.Fatalf("throttled replicas: %v", kerr.ErrorForCode(code))
	}
	if code := topicReq("0-1"); code != kerr.InvalidConfig.Code {
		t.Fatalf("bad throttled replicas: %v", kerr.ErrorForCode(code))
	}
	tc := configsByName(c.do(4, describeReq(kmsg.ConfigResourceTypeTopic, "moved", engine.LeaderThrottledReplicasConfig)).(*kmsg.DescribeConfigsResponse).Resources[0].Configs)
	if x := tc[engine.LeaderThrottledReplicasConfig]; x.Value == nil || *x.Value != "0:1,0:2" || x.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("described: %+v", x)
	}
}
