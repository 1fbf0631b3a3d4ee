//go:build unix

package kafka_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/testkit"
	"ringlog/kafka"
)

// TestClusterCorruptReplicaMovesLeadership: three broker processes, a
// topic of replication factor 3. The leader of partition 0 is killed and
// its replica of partition 0 corrupted before it starts again: it starts
// (one bad log does not stop a broker), reports the replica offline, and
// partition 0 is led by another in-sync replica, without the restarted
// broker in its ISR and with it in offline_replicas, while every record
// acknowledged before is read back. The restarted broker answers
// KAFKA_STORAGE_ERROR for partition 0 and rejoins the ISR of partition 1.
func TestClusterCorruptReplicaMovesLeadership(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startCluster(t, 3, clusterProps)
	const topic = "corrupt"
	adm := kadm.NewClient(c.client())
	c.createTopic(adm, topic, 2, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	prod := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	acked := map[int32][]string{}
	produce := func(p int32, n int, prefix string) {
		t.Helper()
		for i := range n {
			v := fmt.Sprintf("%s-%d-%d", prefix, p, i)
			// One request per record: the segment holds many batches, so
			// that the corruption has valid batches after it.
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			acked[p] = append(acked[p], v)
		}
	}
	produce(0, 20, "before")
	produce(1, 20, "before")

	victim := c.leaderIndex(topic, 0)
	victimID := int32(victim + 1)
	t.Logf("killing broker %d, leader of partition 0, and corrupting its replica", victimID)
	c.procs[victim].signal(syscall.SIGKILL)
	testkit.CorruptSegment(t, filepath.Join(c.procs[victim].dir, topic+"-0"))
	c.start(victim)
	c.waitBrokers(3)
	if !strings.Contains(c.procs[victim].out.String(), "partition offline") {
		t.Fatalf("broker %d does not report its corrupted replica offline:\n%s", victimID, c.procs[victim].out)
	}

	// Partition 0: another in-sync replica leads, the restarted broker is
	// offline and out of the ISR, as every broker's Metadata says. Each
	// is asked at the address its process listens on now: a client's
	// broker list, from whichever broker answered its metadata, could
	// still hold the restarted broker's previous address (a dial refused
	// for 30 s once).
	deadline := time.Now().Add(30 * time.Second)
	for i := range c.procs {
		pc := c.client(kgo.SeedBrokers(c.procs[i].addr))
		for {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			resp, err := req.RequestWith(rctx, pc.SeedBrokers()[0])
			rcancel()
			var p0 kmsg.MetadataResponseTopicPartition
			ok := err == nil && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 2
			if ok {
				p0 = resp.Topics[0].Partitions[0]
				ok = p0.Leader >= 1 && p0.Leader != victimID && !slices.Contains(p0.ISR, victimID) &&
					slices.Equal(p0.OfflineReplicas, []int32{victimID}) && p0.ErrorCode == 0
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("broker %d's metadata of partition 0: %+v (err %v)", i+1, p0, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// The restarted broker itself answers KAFKA_STORAGE_ERROR for it.
	w := dialWire(t, c.procs[victim].addr)
	produceResp := w.roundTrip(kafka.ProduceReq(9, -1, topic, 0, kafka.MakeBatch(t, "x", 1, -1, 0))).(*kmsg.ProduceResponse)
	if code := produceResp.Topics[0].Partitions[0].ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce to broker %d's offline replica: %s, want KAFKA_STORAGE_ERROR", victimID, kerr.ErrorForCode(code))
	}

	// Partition 1's replica on it is sound: it rejoins that ISR.
	for {
		td, err := adm.ListTopics(ctx, topic)
		if err == nil && len(td[topic].Partitions[1].ISR) == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("partition 1's ISR without broker %d: %+v (err %v)", victimID, td[topic].Partitions, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Writes go on (min.insync.replicas 2 of the 2 left for partition 0),
	// and everything acknowledged is read back, in order.
	produce(0, 5, "after")
	produce(1, 5, "after")
	for _, p := range []int32{0, 1} {
		got := consumeAll(t, c.seeds(), topic, []int32{p}, len(acked[p]))
		if !slices.Equal(got, acked[p]) {
			t.Fatalf("partition %d: read %v, acknowledged %v", p, got, acked[p])
		}
	}
}
