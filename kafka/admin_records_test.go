package kafka_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/kafka"
)

// adminProduce writes n records to partition p of topic with a kgo client.
func adminProduce(t testing.TB, b *testBroker, topic string, p int32, n int, size int) {
	t.Helper()
	// Uncompressed, so that sizes on disk follow what was sent.
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	rs := make([]*kgo.Record, n)
	for i := range rs {
		// Keyed: some tests produce to compacted topics, which refuse
		// keyless records as Kafka does.
		rs[i] = &kgo.Record{Topic: topic, Partition: p, Key: []byte(strconv.Itoa(i)), Value: make([]byte, size)}
	}
	if err := cl.ProduceSync(adminCtx(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteRecords moves the log start offset with kadm and at v0: the
// answer carries the low watermark, ListOffsets(earliest) follows, -1
// means the high watermark, and Kafka's refusals have their codes.
func TestDeleteRecords(t *testing.T) {
	adminIOPaths(t, brokerOpts{}, func(t *testing.T, b *testBroker) {
		for name, policy := range map[string]string{"trimmed": "delete", "compacted": "compact"} {
			createTopic(t, b, name, 2, map[string]string{"cleanup.policy": policy})
		}
		adminProduce(t, b, "trimmed", 0, 10, 10)
		adminProduce(t, b, "trimmed", 1, 5, 10)
		adminProduce(t, b, "compacted", 0, 3, 10)
		adm, ctx := b.admin(), adminCtx(t)

		os := make(kadm.Offsets)
		os.Add(kadm.Offset{Topic: "trimmed", Partition: 0, At: 4})
		os.Add(kadm.Offset{Topic: "trimmed", Partition: 1, At: 6}) // beyond the high watermark, 5
		os.Add(kadm.Offset{Topic: "compacted", Partition: 0, At: 1})
		resps, err := adm.DeleteRecords(ctx, os)
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := resps.Lookup("trimmed", 0); r.Err != nil || r.LowWatermark != 4 {
			t.Errorf("trimmed-0: %+v, want low watermark 4", r)
		}
		if r, _ := resps.Lookup("trimmed", 1); !errors.Is(r.Err, kerr.OffsetOutOfRange) {
			t.Errorf("trimmed-1 beyond the high watermark: %+v", r)
		}
		if r, _ := resps.Lookup("compacted", 0); !errors.Is(r.Err, kerr.PolicyViolation) {
			t.Errorf("compacted topic: %+v", r)
		}
		starts, err := adm.ListStartOffsets(ctx, "trimmed", "compacted")
		if err != nil {
			t.Fatal(err)
		}
		for tp, want := range map[engine.TP]int64{{Topic: "trimmed", Partition: 0}: 4, {Topic: "trimmed", Partition: 1}: 0, {Topic: "compacted", Partition: 0}: 0} {
			if o, _ := starts.Lookup(tp.Topic, tp.Partition); o.Err != nil || o.Offset != want {
				t.Errorf("start offset of %v: %+v, want %d", tp, o, want)
			}
		}

		c := dialAdmin(t, b.Addr)
		req := kmsg.NewPtrDeleteRecordsRequest()
		part := func(p int32, offset int64) kmsg.DeleteRecordsRequestTopicPartition {
			return kmsg.DeleteRecordsRequestTopicPartition{Partition: p, Offset: offset}
		}
		req.Topics = []kmsg.DeleteRecordsRequestTopic{
			{Topic: "trimmed", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{part(0, 2), part(1, -1), part(7, 0)}},
			{Topic: "nosuch", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{part(0, 0)}},
		}
		for _, v := range []int16{0, 2} {
			resp := c.do(v, req).(*kmsg.DeleteRecordsResponse)
			if len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != 3 {
				t.Fatalf("v%d: %+v", v, resp)
			}
			ps := resp.Topics[0].Partitions
			// Below the log start: nothing moves, the answer says where it is.
			if ps[0].ErrorCode != 0 || ps[0].LowWatermark != 4 {
				t.Errorf("v%d behind the log start: %+v", v, ps[0])
			}
			// -1: up to the high watermark.
			if ps[1].ErrorCode != 0 || ps[1].LowWatermark != 5 {
				t.Errorf("v%d offset -1: %+v", v, ps[1])
			}
			wantCode(t, fmt.Sprintf("v%d unknown partition", v), ps[2].ErrorCode, kerr.UnknownTopicOrPartition)
			wantCode(t, fmt.Sprintf("v%d unknown topic", v), resp.Topics[1].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
			if ps[2].LowWatermark != -1 {
				t.Errorf("v%d: error answer with low watermark %d", v, ps[2].LowWatermark)
			}
		}
		req.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "trimmed", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{part(0, -2)}}}
		wantCode(t, "offset -2", c.do(1, req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode, kerr.OffsetOutOfRange)

		// The moved log start survives a restart, and consumers start there.
		b.Restart()
		starts, err = b.admin().ListStartOffsets(adminCtx(t), "trimmed")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := starts.Lookup("trimmed", 1); o.Offset != 5 {
			t.Errorf("after restart: start offset %d, want 5", o.Offset)
		}
	})
}

// TestDescribeCluster checks each version's answer and KIP-919's endpoint
// types.
func TestDescribeCluster(t *testing.T) {
	b := startBroker(t, brokerOpts{
		Config: func(c *broker.Config) { c.NodeID, c.Rack = 5, "r1" },
	})
	c := dialAdmin(t, b.Addr)
	host, port := kafka.Advertised(b.Server)
	for v := int16(0); v <= 2; v++ {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeClusterAuthorizedOperations = v == 1
		req.IncludeFencedBrokers = true
		resp := c.do(v, req).(*kmsg.DescribeClusterResponse)
		if resp.ErrorCode != 0 || resp.ClusterID != b.Engine.ClusterID() || resp.ClusterID == "" || resp.ControllerID != 5 || len(resp.Brokers) != 1 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		br := resp.Brokers[0]
		if br.NodeID != 5 || br.Host != host || br.Port != port || br.Rack == nil || *br.Rack != "r1" || br.IsFenced {
			t.Errorf("v%d broker: %+v", v, br)
		}
		if v >= 1 && resp.EndpointType != 1 {
			t.Errorf("v%d endpoint type %d", v, resp.EndpointType)
		}
		wantOps := int32(-2147483648) // not asked for
		if v == 1 {
			// KIP-430's bit set: CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
			// DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.
			wantOps = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12
		}
		if resp.ClusterAuthorizedOperations != wantOps {
			t.Errorf("v%d authorized operations %b, want %b", v, resp.ClusterAuthorizedOperations, wantOps)
		}
	}
	for typ, want := range map[int8]*kerr.Error{2: kerr.MismatchedEndpointType, 9: kerr.UnsupportedEndpointType} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = typ
		resp := c.do(1, req).(*kmsg.DescribeClusterResponse)
		wantCode(t, fmt.Sprintf("endpoint type %d", typ), resp.ErrorCode, want)
		if resp.ErrorMessage == nil || len(resp.Brokers) != 0 {
			t.Errorf("endpoint type %d: %+v", typ, resp)
		}
	}
}

// TestDescribeLogDirs shows partition sizes growing as records arrive,
// the volume's space from v4, the topic filter, and the v0 answer.
func TestDescribeLogDirs(t *testing.T) {
	adminIOPaths(t, brokerOpts{}, func(t *testing.T, b *testBroker) {
		for _, name := range []string{"sized", "other"} {
			createTopic(t, b, name, 2, nil)
		}
		adm, ctx := b.admin(), adminCtx(t)
		abs, _ := filepath.Abs(b.dir)
		describe := func() kadm.DescribedLogDir {
			t.Helper()
			all, err := adm.DescribeAllLogDirs(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			dirs := all[0]
			if len(all) != 1 || len(dirs) != 1 {
				t.Fatalf("log dirs: %+v", all)
			}
			d, ok := dirs[abs]
			if !ok || d.Err != nil {
				t.Fatalf("no dir %s in %+v", abs, dirs)
			}
			return d
		}
		before := describe()
		delete(before.Topics, group.OffsetsTopic) // the coordinator's, always there
		if len(before.Topics) != 2 || len(before.Topics["sized"]) != 2 {
			t.Fatalf("before: %+v", before.Topics)
		}
		if before.TotalBytes <= 0 || before.UsableBytes <= 0 || before.UsableBytes > before.TotalBytes {
			t.Errorf("volume: total %d usable %d", before.TotalBytes, before.UsableBytes)
		}
		adminProduce(t, b, "sized", 1, 20, 1000)
		after := describe()
		p1, _ := after.Topics.Lookup("sized", 1)
		p1Before, _ := before.Topics.Lookup("sized", 1)
		if p1.Size < p1Before.Size+20*1000 || p1.OffsetLag != 0 || p1.IsFuture {
			t.Errorf("sized-1 after producing 20 KB: %+v (before %d bytes)", p1, p1Before.Size)
		}
		if p0, _ := after.Topics.Lookup("sized", 0); p0.Size != 0 {
			t.Errorf("sized-0 grew to %d with nothing produced", p0.Size)
		}

		c := dialAdmin(t, b.Addr)
		req := kmsg.NewPtrDescribeLogDirsRequest()
		req.Topics = []kmsg.DescribeLogDirsRequestTopic{{Topic: "sized", Partitions: []int32{1, 9}}, {Topic: "nosuch", Partitions: []int32{0}}}
		for v := int16(0); v <= 5; v++ {
			resp := c.do(v, req).(*kmsg.DescribeLogDirsResponse)
			if resp.ErrorCode != 0 || len(resp.Dirs) != 1 {
				t.Fatalf("v%d: %+v", v, resp)
			}
			d := resp.Dirs[0]
			if d.Dir != abs || len(d.Topics) != 1 || d.Topics[0].Topic != "sized" || len(d.Topics[0].Partitions) != 1 || d.Topics[0].Partitions[0].Size != p1.Size {
				t.Errorf("v%d filtered: %+v", v, d)
			}
			if v >= 4 && (d.TotalBytes <= 0 || d.UsableBytes <= 0) {
				t.Errorf("v%d: total %d usable %d", v, d.TotalBytes, d.UsableBytes)
			}
		}
		// A null topic list is every partition; v0 included.
		req.Topics = nil
		resp := c.do(0, req).(*kmsg.DescribeLogDirsResponse)
		n := 0
		for _, tp := range resp.Dirs[0].Topics {
			if tp.Topic != group.OffsetsTopic {
				n += len(tp.Partitions)
			}
		}
		if n != 4 {
			t.Errorf("v0 all: %d partitions, want 4", n)
		}
	})
}
