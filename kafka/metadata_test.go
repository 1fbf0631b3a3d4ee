package kafka_test

import (
	"context"
	"encoding/json"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/engine/group"
	"ringlog/kafka"
)

// TestMetadataKcat lists the cluster with kcat (librdkafka), on both I/O
// paths: the broker, the topics, and every partition led by this node.
func TestMetadataKcat(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat is not installed (scripts/test.sh installs it): metadata listing with librdkafka not tested")
	}
	ioPaths(t, brokerOpts{Config: func(c *broker.Config) { c.NodeID = 0 }}, func(t *testing.T, b *testBroker) {
		createTopic(t, b, "listed", 3, nil)
		createTopic(t, b, "other", 1, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, kcat, "-b", b.Addr, "-L", "-J").CombinedOutput()
		if err != nil {
			t.Fatalf("kcat -L: %v\n%s", err, out)
		}
		var md struct {
			Brokers []struct {
				ID   int32  `json:"id"`
				Name string `json:"name"`
			} `json:"brokers"`
			Topics []struct {
				Topic      string `json:"topic"`
				Partitions []struct {
					Partition int32 `json:"partition"`
					Leader    int32 `json:"leader"`
					Replicas  []struct {
						ID int32 `json:"id"`
					} `json:"replicas"`
					ISRs []struct {
						ID int32 `json:"id"`
					} `json:"isrs"`
				} `json:"partitions"`
			} `json:"topics"`
		}
		if err := json.Unmarshal(out, &md); err != nil {
			t.Fatalf("kcat output: %v\n%s", err, out)
		}
		if len(md.Brokers) != 1 || md.Brokers[0].ID != 0 || md.Brokers[0].Name != b.Addr {
			t.Fatalf("brokers %+v, want node 0 at %s", md.Brokers, b.Addr)
		}
		want := map[string]int{"listed": 3, "other": 1}
		for _, tp := range md.Topics {
			if tp.Topic == group.OffsetsTopic {
				continue // the group coordinator's, always there
			}
			if len(tp.Partitions) != want[tp.Topic] {
				t.Errorf("topic %s: %d partitions, want %d", tp.Topic, len(tp.Partitions), want[tp.Topic])
			}
			delete(want, tp.Topic)
			for _, p := range tp.Partitions {
				if p.Leader != 0 || len(p.Replicas) != 1 || p.Replicas[0].ID != 0 || len(p.ISRs) != 1 || p.ISRs[0].ID != 0 {
					t.Errorf("%s-%d: leader %d replicas %v isr %v", tp.Topic, p.Partition, p.Leader, p.Replicas, p.ISRs)
				}
			}
		}
		if len(want) != 0 {
			t.Errorf("topics missing from the listing: %v", want)
		}
	})
}

// TestMetadataEveryVersion checks each version's fields, as each version
// encodes them.
func TestMetadataEveryVersion(t *testing.T) {
	b := startBroker(t, brokerOpts{Config: func(c *broker.Config) { c.NodeID = 7; c.Rack = "r1" }})
	info := createTopic(t, b, "t1", 2, nil)
	createTopic(t, b, "t2", 1, nil)
	w := dialWire(t, b.Addr)
	for v := int16(0); v <= 13; v++ {
		req := kafka.MetadataReq(v, "t1")
		resp := w.roundTrip(req).(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 7 || resp.Brokers[0].Host != "127.0.0.1" || resp.Brokers[0].Port != brokerPort(t, b) {
			t.Fatalf("v%d: brokers %+v", v, resp.Brokers)
		}
		if v >= 1 && (resp.ControllerID != 7 || resp.Brokers[0].Rack == nil || *resp.Brokers[0].Rack != "r1") {
			t.Fatalf("v%d: controller %d rack %v", v, resp.ControllerID, resp.Brokers[0].Rack)
		}
		if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID != b.Engine.ClusterID()) {
			t.Fatalf("v%d: cluster id %v", v, resp.ClusterID)
		}
		if v >= 8 && v <= 10 && resp.AuthorizedOperations != kafka.AuthorizedOperationsNone {
			t.Fatalf("v%d: cluster authorized operations %d not requested", v, resp.AuthorizedOperations)
		}
		if len(resp.Topics) != 1 {
			t.Fatalf("v%d: %d topics", v, len(resp.Topics))
		}
		tp := resp.Topics[0]
		if tp.ErrorCode != 0 || *tp.Topic != "t1" || len(tp.Partitions) != 2 {
			t.Fatalf("v%d: topic %+v", v, tp)
		}
		if v >= 10 && tp.TopicID != info.ID {
			t.Fatalf("v%d: topic id %x, want %x", v, tp.TopicID, info.ID)
		}
		if v >= 8 && tp.AuthorizedOperations != kafka.AuthorizedOperationsNone {
			t.Fatalf("v%d: topic authorized operations %d not requested", v, tp.AuthorizedOperations)
		}
		for i, p := range tp.Partitions {
			if p.Partition != int32(i) || p.Leader != 7 || p.ErrorCode != 0 ||
				len(p.Replicas) != 1 || p.Replicas[0] != 7 || len(p.ISR) != 1 || p.ISR[0] != 7 {
				t.Fatalf("v%d: partition %+v", v, p)
			}
			if v >= 7 && p.LeaderEpoch != 0 {
				t.Fatalf("v%d: leader epoch %d", v, p.LeaderEpoch)
			}
			if len(p.OfflineReplicas) != 0 {
				t.Fatalf("v%d: offline replicas %v", v, p.OfflineReplicas)
			}
		}
	}

	// Authorized operations when asked for (v8+): everything, as Kafka
	// without an authorizer answers.
	req := kafka.MetadataReq(10, "t1")
	req.IncludeClusterAuthorizedOperations, req.IncludeTopicAuthorizedOperations = true, true
	resp := w.roundTrip(req).(*kmsg.MetadataResponse)
	if resp.AuthorizedOperations != kafka.ClusterOperationsAll || resp.Topics[0].AuthorizedOperations != kafka.TopicOperationsAll {
		t.Fatalf("authorized operations %d / %d", resp.AuthorizedOperations, resp.Topics[0].AuthorizedOperations)
	}
}

// TestMetadataAllOrNone: null is every topic; empty is none from v1 on,
// every topic in v0.
func TestMetadataAllOrNone(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "a", 1, nil)
	createTopic(t, b, "b", 2, nil)
	w := dialWire(t, b.Addr)
	count := func(v int16, topics []kmsg.MetadataRequestTopic) int {
		req := kmsg.NewPtrMetadataRequest()
		req.Version, req.Topics = v, topics
		n := 0
		for _, t := range w.roundTrip(req).(*kmsg.MetadataResponse).Topics {
			if *t.Topic != group.OffsetsTopic { // always there (v0 has no is_internal)
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		v      int16
		topics []kmsg.MetadataRequestTopic
		want   int
	}{
		{0, []kmsg.MetadataRequestTopic{}, 2},
		{1, nil, 2},
		{1, []kmsg.MetadataRequestTopic{}, 0},
		{12, nil, 2},
		{12, []kmsg.MetadataRequestTopic{}, 0},
	} {
		if got := count(c.v, c.topics); got != c.want {
			t.Errorf("v%d, topics %v: %d topics, want %d", c.v, c.topics, got, c.want)
		}
	}
}

// TestMetadataAutoCreate: auto.create.topics.enable with num.partitions,
// allow_auto_topic_creation, invalid names and topic ids.
func TestMetadataAutoCreate(t *testing.T) {
	b := startBroker(t, brokerOpts{Config: func(c *broker.Config) { c.NumPartitions = 3 }})
	w := dialWire(t, b.Addr)

	resp := w.roundTrip(kafka.MetadataReq(12, "fresh", "fresh")).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("auto-created topic: %+v", resp.Topics)
	}
	info, ok := b.Engine.Topic("fresh")
	if !ok || info.Partitions != 3 || resp.Topics[0].TopicID != info.ID {
		t.Fatalf("engine topic %+v, %v", info, ok)
	}

	req := kafka.MetadataReq(12, "not-allowed")
	req.AllowAutoTopicCreation = false
	resp = w.roundTrip(req).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("allow_auto_topic_creation=false: code %d", resp.Topics[0].ErrorCode)
	}
	req = kafka.MetadataReq(3, "v3-creates") // before v4 a request always allows it
	resp = w.roundTrip(req).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("v3 auto-creation: code %d", resp.Topics[0].ErrorCode)
	}

	for _, name := range []string{"bad name", "..", "", string(make([]byte, 250))} {
		resp = w.roundTrip(kafka.MetadataReq(12, name)).(*kmsg.MetadataResponse)
		if resp.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
			t.Errorf("topic %q: code %d, want INVALID_TOPIC_EXCEPTION", name, resp.Topics[0].ErrorCode)
		}
	}

	byID := kafka.MetadataReq(12)
	for _, id := range [][16]byte{info.ID, {9, 9, 9}} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		byID.Topics = append(byID.Topics, rt)
	}
	resp = w.roundTrip(byID).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != 0 || *resp.Topics[0].Topic != "fresh" ||
		resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code || resp.Topics[1].TopicID != [16]byte{9, 9, 9} {
		t.Fatalf("by id: %+v", resp.Topics)
	}

	// kgo producing to a topic that does not exist yet, with auto-creation
	// allowed by the client.
	cl := b.client(kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("by-kgo"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Engine.Topic("by-kgo"); !ok {
		t.Fatal("by-kgo not created")
	}
}

// TestMetadataAutoCreateOff: with auto.create.topics.enable=false a missing
// topic is UNKNOWN_TOPIC_OR_PARTITION whatever the request allows, and
// nothing is created.
func TestMetadataAutoCreateOff(t *testing.T) {
	b := startBroker(t, brokerOpts{Config: func(c *broker.Config) { c.AutoCreateTopics = false }})
	w := dialWire(t, b.Addr)
	req := kafka.MetadataReq(12, "missing")
	req.AllowAutoTopicCreation = true
	resp := w.roundTrip(req).(*kmsg.MetadataResponse)
	if resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("code %d", resp.Topics[0].ErrorCode)
	}
	if _, ok := b.Engine.Topic("missing"); ok {
		t.Fatal("topic created with auto-creation off")
	}
}

// TestMetadataAutoCreateBounded: one request creates at most
// Config.AutoCreateMax topics; the rest are LEADER_NOT_AVAILABLE, created on
// a later round.
func TestMetadataAutoCreateBounded(t *testing.T) {
	const autoCreateMax = 5
	b := startBroker(t, brokerOpts{Config: func(c *broker.Config) { c.AutoCreateMax = autoCreateMax }})
	w := dialWire(t, b.Addr)
	var names []string
	for i := range autoCreateMax + 3 {
		names = append(names, "many-"+kafka.Itoa(i))
	}
	resp := w.roundTrip(kafka.MetadataReq(12, names...)).(*kmsg.MetadataResponse)
	later := 0
	for _, tp := range resp.Topics {
		if tp.ErrorCode == kerr.LeaderNotAvailable.Code {
			later++
		}
	}
	if later != 3 || len(userTopics(b.Engine.Topics())) != autoCreateMax {
		t.Fatalf("%d topics deferred, %d created", later, len(userTopics(b.Engine.Topics())))
	}
	resp = w.roundTrip(kafka.MetadataReq(12, names...)).(*kmsg.MetadataResponse)
	for _, tp := range resp.Topics {
		if tp.ErrorCode != 0 {
			t.Fatalf("second round: %s code %d", *tp.Topic, tp.ErrorCode)
		}
	}
}

func brokerPort(t testing.TB, b *testBroker) int32 {
	_, port, err := net.SplitHostPort(b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return int32(p)
}

// TestApiVersionsCore: ApiVersions advertises the versions of the
// protocol core as served, Produce from v0 (librdkafka keeps compression on
// only then).
func TestApiVersionsCore(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	w := dialWire(t, b.Addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "wire-test", "1"
	resp := w.roundTrip(req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("code %d", resp.ErrorCode)
	}
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	for key, want := range map[kmsg.Key][2]int16{
		kmsg.Produce: {0, 13}, kmsg.ListOffsets: {1, 11}, kmsg.Metadata: {0, 13},
		kmsg.ApiVersions: {0, 5}, kmsg.InitProducerID: {0, 5}, kmsg.OffsetForLeaderEpoch: {0, 4},
	} {
		if got[int16(key)] != want {
			t.Errorf("%s: versions %v, want %v", kmsg.NameForKey(int16(key)), got[int16(key)], want)
		}
	}

	// v5 (KIP-1242): the cluster and node a client believes it reached,
	// both or neither; another cluster or node is REBOOTSTRAP_REQUIRED,
	// answered with no versions, as Kafka answers.
	cluster := b.Engine.ClusterID()
	for _, c := range []struct {
		name    string
		cluster *string
		node    int32
		want    *kerr.Error
	}{
		{"bootstrapping", nil, -1, nil},
		{"this broker", &cluster, b.nodeID, nil},
		{"another cluster", kmsg.StringPtr("AAAAAAAAAAAAAAAAAAAAAA"), b.nodeID, kerr.RebootstrapRequired},
		{"another node", &cluster, b.nodeID + 1, kerr.RebootstrapRequired},
		{"a cluster alone", &cluster, -1, kerr.InvalidRequest},
		{"a node alone", nil, b.nodeID, kerr.InvalidRequest},
	} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClusterID, req.NodeID = 5, c.cluster, c.node
		req.ClientSoftwareName, req.ClientSoftwareVersion = "wire-test", "1"
		resp := w.roundTrip(req).(*kmsg.ApiVersionsResponse)
		wantCode(t, "v5, "+c.name, resp.ErrorCode, c.want)
		if (c.want == nil) != (len(resp.ApiKeys) > 0) {
			t.Errorf("v5, %s: %d versions listed", c.name, len(resp.ApiKeys))
		}
	}
}
