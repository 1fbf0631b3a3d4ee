package kafka_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/engine"
)

func describeReq(typ kmsg.ConfigResourceType, name string, keys ...string) *kmsg.DescribeConfigsRequest {
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.ConfigNames = typ, name, keys
	req.Resources = append(req.Resources, r)
	return req
}

func configsByName(cs []kmsg.DescribeConfigsResponseResourceConfig) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	m := make(map[string]kmsg.DescribeConfigsResponseResourceConfig, len(cs))
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}

// TestDescribeConfigs covers every version's view of topic and broker
// configs: sources and is_default, synonyms, types and documentation,
// the key filter, a broker default set in server.properties, and the
// resources Kafka refuses.
func TestDescribeConfigs(t *testing.T) {
	b := startBroker(t, brokerOpts{
		Config: func(c *broker.Config) {
			// As server.properties log.retention.ms=86400000 would.
			c.Topic = engine.DefaultTopicConfig()
			c.Topic.Log.RetentionMs = 86400000
			c.NodeID = 3
		},
	})
	createTopic(t, b, "described", 1, map[string]string{"max.message.bytes": "2000", "cleanup.policy": "compact"})
	c := dialAdmin(t, b.Addr)

	for v := int16(0); v <= 4; v++ {
		req := describeReq(kmsg.ConfigResourceTypeTopic, "described")
		req.IncludeSynonyms, req.IncludeDocumentation = true, true
		resp := c.do(v, req).(*kmsg.DescribeConfigsResponse)
		if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
			t.Fatalf("v%d: %+v", v, resp.Resources)
		}
		r := resp.Resources[0]
		if r.ResourceName != "described" || r.ResourceType != kmsg.ConfigResourceTypeTopic || len(r.Configs) != len(engine.ConfigNames()) {
			t.Fatalf("v%d: resource %q type %v with %d configs", v, r.ResourceName, r.ResourceType, len(r.Configs))
		}
		cs := configsByName(r.Configs)
		mm, seg, ret := cs["max.message.bytes"], cs["segment.bytes"], cs["retention.ms"]
		if *mm.Value != "2000" || *seg.Value != "1073741824" || *ret.Value != "86400000" {
			t.Errorf("v%d: values %s %s %s", v, *mm.Value, *seg.Value, *ret.Value)
		}
		for _, x := range r.Configs {
			if x.ReadOnly || x.IsSensitive {
				t.Errorf("v%d %s: read-only %v sensitive %v", v, x.Name, x.ReadOnly, x.IsSensitive)
			}
		}
		if v == 0 {
			// v0 knows only is_default.
			if mm.IsDefault || !seg.IsDefault || ret.IsDefault {
				t.Errorf("v0 is_default: max.message.bytes %v segment.bytes %v retention.ms %v", mm.IsDefault, seg.IsDefault, ret.IsDefault)
			}
			continue
		}
		if mm.Source != kmsg.ConfigSourceDynamicTopicConfig || seg.Source != kmsg.ConfigSourceDefaultConfig || ret.Source != kmsg.ConfigSourceStaticBrokerConfig {
			t.Errorf("v%d sources: %v %v %v", v, mm.Source, seg.Source, ret.Source)
		}
		syn := func(x kmsg.DescribeConfigsResponseResourceConfig) string {
			var parts []string
			for _, s := range x.ConfigSynonyms {
				parts = append(parts, fmt.Sprintf("%s=%s:%v", s.Name, *s.Value, s.Source))
			}
			return strings.Join(parts, " ")
		}
		wantSyn := map[string]string{
			"max.message.bytes": "max.message.bytes=2000:DYNAMIC_TOPIC_CONFIG message.max.bytes=1048588:DEFAULT_CONFIG",
			"segment.bytes":     "log.segment.bytes=1073741824:DEFAULT_CONFIG",
			// log.retention.ms's default is null in Kafka (log.retention.hours
			// sets it), so Kafka lists no default synonym.
			"retention.ms": "log.retention.ms=86400000:STATIC_BROKER_CONFIG",
		}
		for name, want := range wantSyn {
			if got := syn(cs[name]); got != want {
				t.Errorf("v%d %s synonyms:\n got %s\nwant %s", v, name, got, want)
			}
		}
		if v >= 3 {
			if cs["cleanup.policy"].ConfigType != kmsg.ConfigTypeList || seg.ConfigType != kmsg.ConfigTypeInt || ret.ConfigType != kmsg.ConfigTypeLong {
				t.Errorf("v%d types: %v %v %v", v, cs["cleanup.policy"].ConfigType, seg.ConfigType, ret.ConfigType)
			}
			if seg.Documentation == nil || *seg.Documentation == "" {
				t.Errorf("v%d: no documentation", v)
			}
		}
	}

	// Synonyms and documentation only on request; the key filter.
	resp := c.do(4, describeReq(kmsg.ConfigResourceTypeTopic, "described", "segment.ms", "no.such.key", "cleanup.policy")).(*kmsg.DescribeConfigsResponse)
	cs := resp.Resources[0].Configs
	if len(cs) != 2 || cs[0].ConfigSynonyms != nil || cs[0].Documentation != nil {
		t.Fatalf("filtered: %+v", cs)
	}
	if m := configsByName(cs); *m["cleanup.policy"].Value != "compact" || *m["segment.ms"].Value != "604800000" {
		t.Errorf("filtered values: %+v", m)
	}

	// Broker configs, by node id and by the empty (cluster) name.
	for _, name := range []string{"3", ""} {
		resp := c.do(4, describeReq(kmsg.ConfigResourceTypeBroker, name)).(*kmsg.DescribeConfigsResponse)
		r := resp.Resources[0]
		if r.ErrorCode != 0 || r.ResourceName != name {
			t.Fatalf("broker %q: %+v", name, r)
		}
		bc := configsByName(r.Configs)
		abs, _ := filepath.Abs(b.dir)
		for key, want := range map[string]string{
			"log.retention.ms": "86400000", "log.segment.bytes": "1073741824", "message.max.bytes": "1048588",
			"num.partitions": "1", "node.id": "3", "log.dirs": abs, "auto.create.topics.enable": "true",
		} {
			x, ok := bc[key]
			if !ok || x.Value == nil || *x.Value != want || !x.ReadOnly {
				t.Errorf("broker %q %s: %+v, want %s read-only", name, key, x, want)
			}
		}
		if bc["log.retention.ms"].Source != kmsg.ConfigSourceStaticBrokerConfig || bc["log.segment.bytes"].Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("broker sources: %v %v", bc["log.retention.ms"].Source, bc["log.segment.bytes"].Source)
		}
		if _, ok := bc["retention.ms"]; ok {
			t.Error("broker lists a topic name")
		}
		// At its default, log.roll.ms is null in Kafka (log.roll.hours
		// sets it): described with no value and no synonym.
		if x := bc["log.roll.ms"]; x.Value != nil || len(x.ConfigSynonyms) != 0 || x.Source != kmsg.ConfigSourceDefaultConfig {
			t.Errorf("broker %q log.roll.ms: value %v, synonyms %+v, source %v; want null, none, DEFAULT_CONFIG", name, x.Value, x.ConfigSynonyms, x.Source)
		}
	}
	// A resource named twice is described once.
	twice := describeReq(kmsg.ConfigResourceTypeBroker, "")
	twice.Resources = append(twice.Resources, twice.Resources[0], describeReq(kmsg.ConfigResourceTypeBroker, "3").Resources[0])
	rs := c.do(4, twice).(*kmsg.DescribeConfigsResponse).Resources
	if len(rs) != 3 || rs[0].ErrorCode != 0 || rs[1].ErrorCode != kerr.InvalidRequest.Code || rs[1].Configs != nil || rs[2].ErrorCode != 0 {
		t.Errorf("repeated resource: %+v", rs)
	}
	// kadm's view of the same.
	rcs, err := b.admin().DescribeBrokerConfigs(adminCtx(t), 3)
	if err != nil || len(rcs) != 1 || rcs[0].Err != nil || len(rcs[0].Configs) == 0 {
		t.Fatalf("kadm broker configs: %+v, %v", rcs, err)
	}

	for _, tc := range []struct {
		typ  kmsg.ConfigResourceType
		name string
		want *kerr.Error
	}{
		{kmsg.ConfigResourceTypeTopic, "nosuch", kerr.UnknownTopicOrPartition},
		{kmsg.ConfigResourceTypeTopic, "bad/name", kerr.InvalidTopicException},
		{kmsg.ConfigResourceTypeBroker, "4", kerr.InvalidRequest},
		{kmsg.ConfigResourceTypeBroker, "three", kerr.InvalidRequest},
		{kmsg.ConfigResourceTypeBrokerLogger, "3", kerr.InvalidRequest},
		{kmsg.ConfigResourceTypeGroupConfig, "g", kerr.InvalidRequest},
		{kmsg.ConfigResourceType(77), "x", kerr.InvalidRequest},
	} {
		for _, v := range []int16{0, 4} {
			r := c.do(v, describeReq(tc.typ, tc.name)).(*kmsg.DescribeConfigsResponse).Resources[0]
			wantCode(t, fmt.Sprintf("v%d %v %q", v, tc.typ, tc.name), r.ErrorCode, tc.want)
			if r.Configs != nil || r.ResourceName != tc.name || r.ResourceType != tc.typ {
				t.Errorf("v%d %v %q: %+v", v, tc.typ, tc.name, r)
			}
		}
	}
}

func alterReq(validate bool, typ kmsg.ConfigResourceType, name string, kv ...*string) *kmsg.AlterConfigsRequest {
	req := kmsg.NewPtrAlterConfigsRequest()
	req.ValidateOnly = validate
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = *kv[i], kv[i+1]
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	return req
}

var sp = kmsg.StringPtr

// TestAlterConfigs replaces a topic's overrides with the legacy API: what
// the request leaves out goes back to its default, validate_only changes
// nothing, refusals have Kafka's codes, and the result survives a restart.
func TestAlterConfigs(t *testing.T) {
	adminIOPaths(t, brokerOpts{}, func(t *testing.T, b *testBroker) {
		createTopic(t, b, "altered", 2, map[string]string{"retention.ms": "1000", "segment.bytes": "2000000"})
		c := dialAdmin(t, b.Addr)
		overrides := func() map[string]string { info, _ := b.Engine.Topic("altered"); return info.Overrides }

		r := c.do(2, alterReq(true, kmsg.ConfigResourceTypeTopic, "altered", sp("max.message.bytes"), sp("5000"))).(*kmsg.AlterConfigsResponse).Resources[0]
		wantCode(t, "validate only", r.ErrorCode, nil)
		if o := overrides(); len(o) != 2 || o["retention.ms"] != "1000" {
			t.Fatalf("validate only changed the overrides: %v", o)
		}
		r = c.do(2, alterReq(false, kmsg.ConfigResourceTypeTopic, "altered", sp("max.message.bytes"), sp("5000"), sp("retention.ms"), sp("2000"))).(*kmsg.AlterConfigsResponse).Resources[0]
		wantCode(t, "alter", r.ErrorCode, nil)
		if r.ResourceName != "altered" || r.ResourceType != kmsg.ConfigResourceTypeTopic {
			t.Errorf("answer for %v %q", r.ResourceType, r.ResourceName)
		}
		if o := overrides(); len(o) != 2 || o["max.message.bytes"] != "5000" || o["retention.ms"] != "2000" {
			t.Fatalf("after alter: %v, want segment.bytes back to default", o)
		}
		// v0 too.
		r = c.do(0, alterReq(false, kmsg.ConfigResourceTypeTopic, "altered", sp("max.message.bytes"), sp("6000"), sp("retention.ms"), sp("2000"))).(*kmsg.AlterConfigsResponse).Resources[0]
		wantCode(t, "v0 alter", r.ErrorCode, nil)

		for _, tc := range []struct {
			name string
			req  *kmsg.AlterConfigsRequest
			want *kerr.Error
		}{
			{"unknown config", alterReq(false, kmsg.ConfigResourceTypeTopic, "altered", sp("retention.mss"), sp("1")), kerr.InvalidConfig},
			{"bad value", alterReq(false, kmsg.ConfigResourceTypeTopic, "altered", sp("segment.bytes"), sp("-5")), kerr.InvalidConfig},
			{"null value", alterReq(false, kmsg.ConfigResourceTypeTopic, "altered", sp("retention.ms"), nil), kerr.InvalidRequest},
			{"duplicate key", alterReq(false, kmsg.ConfigResourceTypeTopic, "altered", sp("retention.ms"), sp("1"), sp("retention.ms"), sp("2")), kerr.InvalidRequest},
			{"unknown topic", alterReq(false, kmsg.ConfigResourceTypeTopic, "nosuch", sp("retention.ms"), sp("1")), kerr.UnknownTopicOrPartition},
			{"broker", alterReq(false, kmsg.ConfigResourceTypeBroker, "0", sp("log.retention.ms"), sp("1")), kerr.InvalidRequest},
			{"cluster", alterReq(false, kmsg.ConfigResourceTypeBroker, "", sp("log.retention.ms"), sp("1")), kerr.InvalidRequest},
			{"other broker", alterReq(false, kmsg.ConfigResourceTypeBroker, "9"), kerr.InvalidRequest},
			{"broker logger", alterReq(false, kmsg.ConfigResourceTypeBrokerLogger, "0", sp("kafka"), sp("DEBUG")), kerr.InvalidRequest},
		} {
			r := c.do(2, tc.req).(*kmsg.AlterConfigsResponse).Resources[0]
			wantCode(t, tc.name, r.ErrorCode, tc.want)
			if r.ErrorMessage == nil || *r.ErrorMessage == "" {
				t.Errorf("%s: no message", tc.name)
			}
		}
		// A broker alter that changes nothing succeeds, as in Kafka.
		wantCode(t, "empty broker alter", c.do(2, alterReq(false, kmsg.ConfigResourceTypeBroker, "0")).(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode, nil)
		// The same resource twice: both refused, neither applied.
		req := alterReq(false, kmsg.ConfigResourceTypeTopic, "altered", sp("retention.ms"), sp("7"))
		req.Resources = append(req.Resources, req.Resources[0])
		for i, r := range c.do(1, req).(*kmsg.AlterConfigsResponse).Resources {
			wantCode(t, fmt.Sprintf("duplicate resource %d", i), r.ErrorCode, kerr.InvalidRequest)
		}

		// kadm's AlterTopicConfigsState uses this API.
		resps, err := b.admin().AlterTopicConfigsState(adminCtx(t), []kadm.AlterConfig{{Name: "cleanup.policy", Value: sp("compact,delete")}}, "altered")
		if err != nil || resps[0].Err != nil {
			t.Fatalf("kadm alter state: %+v, %v", resps, err)
		}
		b.Restart()
		info, _ := b.Engine.Topic("altered")
		if len(info.Overrides) != 1 || info.Config.CleanupPolicy != "compact,delete" || info.Config.Log.RetentionMs != engine.DefaultTopicConfig().Log.RetentionMs {
			t.Fatalf("after restart: %v / %+v", info.Overrides, info.Config)
		}
	})
}

// TestIncrementalAlterConfigs applies SET, DELETE, APPEND and SUBTRACT
// with kadm and at v0, checks the refusals, and that the result survives
// a restart and is what DescribeConfigs shows.
func TestIncrementalAlterConfigs(t *testing.T) {
	adminIOPaths(t, brokerOpts{}, func(t *testing.T, b *testBroker) {
		createTopic(t, b, "inc", 1, map[string]string{"segment.bytes": "2000000"})
		adm, ctx := b.admin(), adminCtx(t)
		resps, err := adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: sp("5")}}, "inc")
		if err != nil || resps[0].Err != nil {
			t.Fatalf("validate only: %+v, %v", resps, err)
		}
		if info, _ := b.Engine.Topic("inc"); len(info.Overrides) != 1 {
			t.Fatalf("validate only changed %v", info.Overrides)
		}
		resps, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
			{Op: kadm.SetConfig, Name: "retention.ms", Value: sp("60000")},
			{Op: kadm.DeleteConfig, Name: "segment.bytes"},
			{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: sp("compact")},
		}, "inc")
		if err != nil || resps[0].Err != nil {
			t.Fatalf("alter: %+v, %v", resps, err)
		}
		info, _ := b.Engine.Topic("inc")
		if len(info.Overrides) != 2 || info.Config.Log.RetentionMs != 60000 || info.Config.CleanupPolicy != "compact,delete" || info.Config.Log.SegmentBytes != 1<<30 {
			t.Fatalf("after alter: %v / %+v", info.Overrides, info.Config)
		}

		c := dialAdmin(t, b.Addr)
		incReq := func(typ kmsg.ConfigResourceType, name string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) *kmsg.IncrementalAlterConfigsRequest {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			r := kmsg.NewIncrementalAlterConfigsRequestResource()
			r.ResourceType, r.ResourceName, r.Configs = typ, name, ops
			req.Resources = append(req.Resources, r)
			return req
		}
		op := func(o kmsg.IncrementalAlterConfigOp, name string, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
			return kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: name, Op: o, Value: value}
		}
		// v0: SUBTRACT delete from compact,delete.
		r := c.do(0, incReq(kmsg.ConfigResourceTypeTopic, "inc", op(kmsg.IncrementalAlterConfigOpSubtract, "cleanup.policy", sp("delete")))).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		wantCode(t, "v0 subtract", r.ErrorCode, nil)
		if info, _ := b.Engine.Topic("inc"); info.Config.CleanupPolicy != "compact" {
			t.Fatalf("after subtract: %q", info.Config.CleanupPolicy)
		}
		for _, tc := range []struct {
			name string
			req  *kmsg.IncrementalAlterConfigsRequest
			want *kerr.Error
		}{
			{"append to a number", incReq(kmsg.ConfigResourceTypeTopic, "inc", op(kmsg.IncrementalAlterConfigOpAppend, "retention.ms", sp("1"))), kerr.InvalidConfig},
			{"unknown name", incReq(kmsg.ConfigResourceTypeTopic, "inc", op(kmsg.IncrementalAlterConfigOpSet, "retention", sp("1"))), kerr.InvalidConfig},
			{"bad value", incReq(kmsg.ConfigResourceTypeTopic, "inc", op(kmsg.IncrementalAlterConfigOpSet, "message.timestamp.type", sp("Now"))), kerr.InvalidConfig},
			{"null set", incReq(kmsg.ConfigResourceTypeTopic, "inc", op(kmsg.IncrementalAlterConfigOpSet, "retention.ms", nil)), kerr.InvalidRequest},
			{"unknown op", incReq(kmsg.ConfigResourceTypeTopic, "inc", op(9, "retention.ms", sp("1"))), kerr.InvalidRequest},
			{"duplicate key", incReq(kmsg.ConfigResourceTypeTopic, "inc", op(kmsg.IncrementalAlterConfigOpSet, "retention.ms", sp("1")), op(kmsg.IncrementalAlterConfigOpDelete, "retention.ms", nil)), kerr.InvalidRequest},
			{"unknown topic", incReq(kmsg.ConfigResourceTypeTopic, "nosuch", op(kmsg.IncrementalAlterConfigOpSet, "retention.ms", sp("1"))), kerr.UnknownTopicOrPartition},
			{"broker set", incReq(kmsg.ConfigResourceTypeBroker, "0", op(kmsg.IncrementalAlterConfigOpSet, "log.retention.ms", sp("1"))), kerr.InvalidRequest},
			{"broker delete", incReq(kmsg.ConfigResourceTypeBroker, "0", op(kmsg.IncrementalAlterConfigOpDelete, "log.retention.ms", nil)), nil},
			{"other broker", incReq(kmsg.ConfigResourceTypeBroker, "1", op(kmsg.IncrementalAlterConfigOpDelete, "log.retention.ms", nil)), kerr.InvalidRequest},
			{"group", incReq(kmsg.ConfigResourceTypeGroupConfig, "g", op(kmsg.IncrementalAlterConfigOpSet, "x", sp("1"))), kerr.InvalidRequest},
		} {
			r := c.do(1, tc.req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
			wantCode(t, tc.name, r.ErrorCode, tc.want)
		}
		bresps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "num.partitions", Value: sp("3")}}, 0)
		if err != nil || len(bresps) != 1 || !errors.Is(bresps[0].Err, kerr.InvalidRequest) || !strings.Contains(bresps[0].ErrMessage, "num.partitions") {
			t.Errorf("kadm broker alter: %+v, %v", bresps, err)
		}

		b.Restart()
		rcs, err := b.admin().DescribeTopicConfigs(adminCtx(t), "inc")
		if err != nil || rcs[0].Err != nil {
			t.Fatal(err, rcs)
		}
		for _, x := range rcs[0].Configs {
			switch x.Key {
			case "retention.ms", "cleanup.policy":
				want := map[string]string{"retention.ms": "60000", "cleanup.policy": "compact"}[x.Key]
				if x.Source != kmsg.ConfigSourceDynamicTopicConfig || *x.Value != want {
					t.Errorf("after restart %s = %s (%v), want %s from the topic", x.Key, *x.Value, x.Source, want)
				}
			default:
				if x.Source != kmsg.ConfigSourceDefaultConfig {
					t.Errorf("after restart %s: source %v", x.Key, x.Source)
				}
			}
		}
	})
}
