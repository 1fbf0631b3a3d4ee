//go:build unix

package kafka_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchedFrom counts, per broker, the record batches a client read.
type fetchedFrom struct {
	mu sync.Mutex
	n  map[int32]int
}

func (f *fetchedFrom) OnFetchBatchRead(meta kgo.BrokerMetadata, _ string, _ int32, _ kgo.FetchBatchMetrics) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n[meta.NodeID]++
}

// TestClusterFollowerFetching (KIP-392): brokers in racks r1, r2, r3; a
// consumer with client.rack set to a follower's rack is sent there by the
// leader (preferred_read_replica) and reads everything from it, below its
// high watermark. A consumer without a rack reads from the leader.
func TestClusterFollowerFetching(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startCluster(t, 3, clusterProps, "r1", "r2", "r3")
	const topic = "racked"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.client())
	resp, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	prod := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	var rs []*kgo.Record
	for i := range 2000 {
		rs = append(rs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r-%d", i)})
	}
	if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	leader := c.leaderOf(topic, 0)
	follower := leader%3 + 1 // another broker, a replica (RF 3)
	consume := func(rack string) map[int32]int {
		t.Helper()
		from := &fetchedFrom{n: map[int32]int{}}
		opts := []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(from)}
		if rack != "" {
			opts = append(opts, kgo.Rack(rack))
		}
		cl := c.client(opts...)
		seen := map[string]bool{}
		for len(seen) < 2000 {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("rack %q: consumed %d of 2000", rack, len(seen))
			}
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		}
		cl.Close()
		from.mu.Lock()
		defer from.mu.Unlock()
		return from.n
	}
	if got := consume(fmt.Sprintf("r%d", follower)); got[follower] == 0 || got[leader] != 0 {
		t.Fatalf("a consumer in rack r%d read batches from brokers %v; want only the follower %d (leader %d)", follower, got, follower, leader)
	}
	if got := consume(""); got[leader] == 0 || len(got) != 1 {
		t.Fatalf("a consumer without a rack read batches from brokers %v; want only the leader %d", got, leader)
	}

	// Records deleted at the leader go from the followers too: their log
	// start follows the leader's, as a fetch from the follower shows.
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1000})
	if _, err := adm.DeleteRecords(ctx, offs); err != nil {
		t.Fatal(err)
	}
	cl := c.client()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	topicID := td[topic].ID
	fetch := func(offset int64) kmsg.FetchResponseTopicPartition {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.MaxBytes = 12, -1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID // kgo sends its highest common version
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 0, offset, 1<<20, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(follower)))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		p := fetch(1000)
		if p.ErrorCode == 0 && p.LogStartOffset == 1000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("follower %d still has log start %d (error %d) 15 s after DeleteRecords(1000) at the leader", follower, p.LogStartOffset, p.ErrorCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Below the new log start: out of range, with offsets unknown (-1), as
	// Kafka answers a consumer.
	if p := fetch(0); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != -1 {
		t.Fatalf("follower %d at offset 0: error %d, log start %d; want OFFSET_OUT_OF_RANGE, -1", follower, p.ErrorCode, p.LogStartOffset)
	}
}
