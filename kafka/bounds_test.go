package kafka_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// createOne asks for one topic with the given configs.
func createOne(validateOnly bool, name string, partitions int32, configs ...string) *kmsg.CreateTopicsRequest {
	req := createTopicsReq(newTopicReq(name, partitions, -1, configs...))
	req.ValidateOnly = validateOnly
	return req
}

// wantRefusal fails unless code and msg are want's code and wantMsg.
func wantRefusal(t testing.TB, what string, code int16, msg *string, want *kerr.Error, wantMsg string) {
	t.Helper()
	wantCode(t, what, code, want)
	if msg == nil || *msg != wantMsg {
		t.Errorf("%s: message %v, want %q", what, derefString(msg), wantMsg)
	}
}

func derefString(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// TestSegmentBytesFloor: segment.bytes below 1 MiB (KIP-1030) is refused
// with Kafka's INVALID_CONFIG and message by CreateTopics, AlterConfigs
// and IncrementalAlterConfigs (as Apache Kafka 4.4 answers them: the
// difftest's TestTopicConfigFloors compares), and 1 MiB is accepted.
func TestSegmentBytesFloor(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	c := dialAdmin(t, b.Addr)
	const msg = "Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576"

	for _, validate := range []bool{true, false} {
		rt := c.do(7, createOne(validate, "small", 1, "segment.bytes", "1048575")).(*kmsg.CreateTopicsResponse).Topics[0]
		wantRefusal(t, "CreateTopics", rt.ErrorCode, rt.ErrorMessage, kerr.InvalidConfig, msg)
	}
	if _, ok := b.Engine.Topic("small"); ok {
		t.Fatal("a refused CreateTopics made the topic")
	}
	rt := c.do(7, createOne(false, "floor", 1, "segment.bytes", "1048576")).(*kmsg.CreateTopicsResponse).Topics[0]
	wantCode(t, "CreateTopics at the floor", rt.ErrorCode, nil)

	ar := c.do(2, alterReq(false, kmsg.ConfigResourceTypeTopic, "floor", sp("segment.bytes"), sp("1048575"))).(*kmsg.AlterConfigsResponse).Resources[0]
	wantRefusal(t, "AlterConfigs", ar.ErrorCode, ar.ErrorMessage, kerr.InvalidConfig, msg)

	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "floor"
	op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	op.Name, op.Op, op.Value = "segment.bytes", kmsg.IncrementalAlterConfigOpSet, sp("1048575")
	r.Configs = append(r.Configs, op)
	inc.Resources = append(inc.Resources, r)
	ir := c.do(1, inc).(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
	wantRefusal(t, "IncrementalAlterConfigs", ir.ErrorCode, ir.ErrorMessage, kerr.InvalidConfig, msg)

	if info, _ := b.Engine.Topic("floor"); info.Config.Log.SegmentBytes != 1<<20 {
		t.Fatalf("segment.bytes %d after the refused changes, want 1048576", info.Config.Log.SegmentBytes)
	}
}
