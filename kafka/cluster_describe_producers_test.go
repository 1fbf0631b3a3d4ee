//go:build unix

package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterDescribeProducers: on three broker processes, DescribeProducers
// of a partition with two replicas is answered by its leader and, as
// Kafka's Partition.activeProducerState answers it, by its follower (which
// learns producers from the batches it copies); the broker that hosts no
// replica answers NOT_LEADER_OR_FOLLOWER.
func TestClusterDescribeProducers(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startCluster(t, 3, clusterProps)
	cl := c.client(kgo.DefaultProduceTopic("dp-cluster"))
	adm := kadm.NewClient(cl)
	c.createTopic(adm, "dp-cluster", 1, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, v := range []string{"a", "b", "c"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pid, _, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md, err := adm.Metadata(ctx, "dp-cluster")
	if err != nil {
		t.Fatal(err)
	}
	p := md.Topics["dp-cluster"].Partitions[0]
	outsider := int32(-1)
	for _, b := range md.Brokers {
		if b.NodeID != p.Replicas[0] && b.NodeID != p.Replicas[1] {
			outsider = b.NodeID
		}
	}
	follower := p.Replicas[0]
	if follower == p.Leader {
		follower = p.Replicas[1]
	}
	if outsider < 0 || len(p.Replicas) != 2 {
		t.Fatalf("replicas %v of brokers %v", p.Replicas, md.Brokers)
	}
	ask := func(node int32) kmsg.DescribeProducersResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrDescribeProducersRequest()
		req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "dp-cluster", Partitions: []int32{0}}}
		resp, err := req.RequestWith(ctx, cl.Broker(int(node)))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	for _, node := range []int32{p.Leader, follower} {
		deadline := time.Now().Add(20 * time.Second)
		for {
			got := ask(node)
			if got.ErrorCode == 0 && len(got.ActiveProducers) == 1 && got.ActiveProducers[0].ProducerID == pid && got.ActiveProducers[0].LastSequence == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("broker %d (leader %d): %+v", node, p.Leader, got)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if got := ask(outsider); got.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("broker %d, no replica: %+v, want NOT_LEADER_OR_FOLLOWER", outsider, got)
	}
}
