package kafka

// Unit tests of the protocol layer's internals; the tests that need a
// broker are in package kafka_test, which starts it with broker.Start as
// the binary does.

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
)

// TestFetchFramingTaggedFields checks the parts of the layout a live
// single-node broker rarely produces: current_leader (v16+, with
// FENCED_LEADER_EPOCH) and node_endpoints, the response-level session
// error, and a rack, against kmsg for every version.
func TestFetchFramingTaggedFields(t *testing.T) {
	for v := int16(fetchVersionMin); v <= fetchVersionMax; v++ {
		for _, rack := range []string{"", "rack-a"} {
			s := &Server{cfg: Config{NodeID: 3, AdvertisedHost: "broker.example", AdvertisedPort: 9093, Rack: rack}}
			f := &fetch{s: s, cx: &reqCtx{s: s, correlationID: 77}, version: v, topics: []fetchTopic{{
				name: "t", id: [16]byte{9},
				parts: []fetchPart{
					{tp: engine.TP{Topic: "t", Partition: 0}, errCode: kerr.FencedLeaderEpoch.Code, hw: -1, lso: -1, logStart: -1, currentLeader: true, epochNow: 12},
					{tp: engine.TP{Topic: "t", Partition: 1}, hw: 5, lso: 5, logStart: 2},
				},
			}}}
			want := kmsg.NewPtrFetchResponse()
			want.Version = v
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = "t", [16]byte{9}
			p0 := kmsg.NewFetchResponseTopicPartition()
			p0.ErrorCode, p0.HighWatermark, p0.PreferredReadReplica, p0.RecordBatches = kerr.FencedLeaderEpoch.Code, -1, -1, []byte{}
			if v >= 16 {
				p0.CurrentLeader.LeaderID, p0.CurrentLeader.LeaderEpoch = 3, 12
				br := kmsg.NewFetchResponseBroker()
				br.NodeID, br.Host, br.Port = 3, "broker.example", 9093
				if rack != "" {
					br.Rack = &rack
				}
				want.Brokers = append(want.Brokers, br)
			}
			p1 := kmsg.NewFetchResponseTopicPartition()
			p1.Partition, p1.HighWatermark, p1.LastStableOffset, p1.LogStartOffset, p1.PreferredReadReplica, p1.RecordBatches = 1, 5, 5, 2, -1, []byte{}
			st.Partitions = append(st.Partitions, p0, p1)
			want.Topics = append(want.Topics, st)
			if got, w := f.encode().buf, AppendFetchFrame(77, want); !bytes.Equal(got, w) {
				t.Fatalf("v%d rack %q:\n got %x\nwant %x", v, rack, got, w)
			}

			// A response-level error carries no topics.
			f.errCode = kerr.FetchSessionIDNotFound.Code
			errWant := kmsg.NewPtrFetchResponse()
			errWant.Version = v
			if v >= 7 {
				errWant.ErrorCode = f.errCode
			}
			if got, w := f.encode().buf, AppendFetchFrame(77, errWant); !bytes.Equal(got, w) {
				t.Fatalf("v%d session error:\n got %x\nwant %x", v, got, w)
			}
		}
	}
}

// TestAdminBrokerSynonymsCoverEngine fails when the engine learns a topic
// config that DescribeConfigs cannot name on the broker.
// The replication throttles' topic configs have no broker config behind
// them in Kafka (ServerTopicConfigSynonyms leaves them out).
func TestAdminBrokerSynonymsCoverEngine(t *testing.T) {
	noSynonym := map[string]bool{"leader.replication.throttled.replicas": true, "follower.replication.throttled.replicas": true}
	for _, n := range engine.ConfigNames() {
		if _, ok := brokerSynonym[n]; !ok && !noSynonym[n] {
			t.Errorf("topic config %s has no broker synonym in configs.go", n)
		}
	}
	if len(brokerSynonym)+len(noSynonym) != len(engine.ConfigNames()) {
		t.Errorf("%d synonyms and %d without for %d configs", len(brokerSynonym), len(noSynonym), len(engine.ConfigNames()))
	}
}

func TestCheckLeaderEpoch(t *testing.T) {
	for _, c := range []struct {
		client, ours int32
		want         int16
	}{
		{-1, 5, 0},
		{5, 5, 0},
		{6, 5, kerr.UnknownLeaderEpoch.Code},
		{4, 5, kerr.FencedLeaderEpoch.Code},
	} {
		if got := checkLeaderEpoch(c.client, c.ours); got != c.want {
			t.Errorf("client %d ours %d: %d, want %d", c.client, c.ours, got, c.want)
		}
	}
}
