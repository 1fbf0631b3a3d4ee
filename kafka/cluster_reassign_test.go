//go:build unix

package kafka_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/testkit"
)

// TestClusterReassignment: three broker processes. An idempotent acks=all
// producer (min.insync.replicas 2) writes to a partition on brokers {1,2}
// led by 1 while it is reassigned to {2,3} (KIP-455): broker 3 catches up
// as a follower and joins the ISR, the controller completes the move and
// the leadership leaves broker 1, which empties its log of the partition
// (it keeps the topic's other partition). Every
// acknowledged record is then read back once, in order, from the new
// replicas. Then a second partition's move to a broker that is down
// stays in progress (ListPartitionReassignments shows it), is cancelled
// half way, and leaves a consistent assignment that takes writes.
func TestClusterReassignment(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	c := startCluster(t, 3, clusterProps)
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Partition 1 stays on broker 1: the topic stays there too, and only
	// partition 0's log is emptied.
	createAssigned(t, c, "moving", []int32{1, 2}, []int32{1, 3})

	prod := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	var mu sync.Mutex
	acked := map[int64]string{}
	produce := func(topic string, from, to int) error {
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			rs = append(rs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v-%d", i)})
		}
		res := prod.ProduceSync(ctx, rs...)
		if err := res.FirstErr(); err != nil {
			return err
		}
		if topic == "moving" {
			mu.Lock()
			for _, r := range res {
				acked[r.Record.Offset] = string(r.Record.Value)
			}
			mu.Unlock()
		}
		return nil
	}
	if err := produce("moving", 0, 500); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	produced := make(chan error, 1)
	go func() {
		n := 500
		for {
			select {
			case <-stop:
				produced <- nil
				return
			default:
			}
			if err := produce("moving", n, n+50); err != nil {
				produced <- err
				return
			}
			n += 50
		}
	}()

	start := time.Now()
	alter(t, adm, "moving", []int32{2, 3})
	var p kadm.PartitionDetail
	waitFor(t, 20*time.Second, func() error {
		p = describePartition(t, adm, "moving")
		if !slices.Equal(p.Replicas, []int32{2, 3}) || len(p.ISR) != 2 || (p.Leader != 2 && p.Leader != 3) {
			return fmt.Errorf("moving-0: replicas %v, ISR %v, leader %d", p.Replicas, p.ISR, p.Leader)
		}
		if l := listReassignments(t, c); len(l) != 0 {
			return fmt.Errorf("still in progress: %v", l)
		}
		return nil
	})
	t.Logf("moved {1,2} -> {2,3} in %v under load: leader %d, leader epoch %d", time.Since(start).Round(time.Millisecond), p.Leader, p.LeaderEpoch)
	time.Sleep(300 * time.Millisecond) // the producer carries on with the new leader
	close(stop)
	if err := <-produced; err != nil {
		t.Fatalf("produce during the move: %v", err)
	}
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	checkReadBack(t, c, "moving", acked)
	t.Logf("%d acknowledged records read back once, in order", n)
	// Broker 1 no longer holds the partition's records (StopReplica with
	// delete), though it hosts the topic still.
	waitFor(t, 10*time.Second, func() error {
		if _, err := os.Stat(filepath.Join(c.procs[0].dir, "moving-1")); err != nil {
			return err
		}
		if sz := testkit.LogBytes(t, filepath.Join(c.procs[0].dir, "moving-0")); sz != 0 {
			return fmt.Errorf("broker 1 still holds %d bytes of moving-0", sz)
		}
		return nil
	})

	// A move to a broker that cannot catch up (killed), cancelled. The
	// killed broker x is not the raft leader (killing it would cost a
	// quorum election, not what is tested here); a and b hold the
	// partition, a leads it.
	ctrl := controllerID(t, adm)
	x := int32(3)
	if x == ctrl {
		x = 2
	}
	var a, b int32
	for id := int32(1); id <= 3; id++ {
		switch {
		case id == x:
		case a == 0:
			a = id
		default:
			b = id
		}
	}
	createAssigned(t, c, "stays", []int32{a, b})
	if err := produce("stays", 0, 100); err != nil {
		t.Fatal(err)
	}
	c.procs[x-1].signal(syscall.SIGKILL)
	alter(t, adm, "stays", []int32{b, x})
	waitFor(t, 5*time.Second, func() error {
		l := listReassignments(t, c)
		if got := l["stays"][0]; len(l) != 1 || !slices.Equal(got.Replicas, []int32{b, x, a}) || !slices.Equal(got.AddingReplicas, []int32{x}) ||
			!slices.Equal(got.RemovingReplicas, []int32{a}) {
			return fmt.Errorf("list during the move: %+v", l)
		}
		// Metadata shows the whole replica set meanwhile, as Kafka's does.
		if p := describePartition(t, adm, "stays"); !slices.Equal(p.Replicas, []int32{b, x, a}) || p.Leader != a {
			return fmt.Errorf("metadata during the move: replicas %v, leader %d", p.Replicas, p.Leader)
		}
		return nil
	})
	cancelReq := kadm.AlterPartitionAssignmentsReq{}
	cancelReq.CancelAssign("stays", 0)
	resps, err := adm.AlterPartitionAssignments(ctx, cancelReq)
	if err != nil {
		t.Fatal(err)
	}
	if e := resps.Error(); e != nil {
		t.Fatalf("cancel: %v", e)
	}
	// Back to the original replicas (Kafka's order: the full list without
	// the adding ones), leader and ISR unchanged.
	waitFor(t, 5*time.Second, func() error {
		if l := listReassignments(t, c); len(l) != 0 {
			return fmt.Errorf("list after the cancel: %+v", l)
		}
		if p := describePartition(t, adm, "stays"); !slices.Equal(p.Replicas, []int32{b, a}) || p.Leader != a || !slices.Equal(p.ISR, []int32{b, a}) {
			return fmt.Errorf("after the cancel: replicas %v, ISR %v, leader %d", p.Replicas, p.ISR, p.Leader)
		}
		return nil
	})
	if err := produce("stays", 100, 200); err != nil {
		t.Fatalf("produce after the cancel: %v", err)
	}
	// x comes back and is no replica of stays-0: it holds none of it.
	c.start(int(x - 1))
	c.waitBrokers(3)
	// A second cancel finds nothing in progress.
	resps, err = adm.AlterPartitionAssignments(ctx, cancelReq)
	if err != nil {
		t.Fatal(err)
	}
	if e := resps.Error(); e == nil || !strings.Contains(e.Error(), kerr.NoReassignmentInProgress.Message) {
		t.Fatalf("second cancel: %v, want NO_REASSIGNMENT_IN_PROGRESS", e)
	}
	if sz := testkit.LogBytes(t, filepath.Join(c.procs[x-1].dir, "stays-0")); sz != 0 {
		t.Fatalf("broker %d holds %d bytes of stays-0", x, sz)
	}
	if p := describePartition(t, adm, "stays"); !slices.Equal(p.Replicas, []int32{b, a}) || p.Leader != a {
		t.Fatalf("after broker %d returned: replicas %v, leader %d", x, p.Replicas, p.Leader)
	}
}

// controllerID is the controller the cluster's metadata names (the raft
// leader).
func controllerID(t *testing.T, adm *kadm.Client) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m.Controller
}

// createAssigned creates a topic with partition i on assignments[i], with
// min.insync.replicas 2, and waits for partition 0's ISR.
func createAssigned(t *testing.T, c *testCluster, topic string, assignments ...[]int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for i, replicas := range assignments {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), replicas
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "min.insync.replicas", kmsg.StringPtr("2")
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.client())
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	adm := kadm.NewClient(c.client())
	waitFor(t, 20*time.Second, func() error {
		if p := describePartition(t, adm, topic); len(p.ISR) != len(assignments[0]) || p.Leader != assignments[0][0] {
			return fmt.Errorf("%s-0: ISR %v, leader %d", topic, p.ISR, p.Leader)
		}
		return nil
	})
}

func alter(t *testing.T, adm *kadm.Client, topic string, replicas []int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign(topic, 0, replicas)
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := resps.Error(); err != nil {
		t.Fatalf("reassign %s-0 to %v: %v", topic, replicas, err)
	}
}

func describePartition(t *testing.T, adm *kadm.Client, topic string) kadm.PartitionDetail {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return td[topic].Partitions[0]
}

// listReassignments lists every reassignment in progress
// (ListPartitionReassignments with null topics: kadm sends none for an
// empty set).
func listReassignments(t *testing.T, c *testCluster) map[string]map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(ctx, c.client())
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if out[rt.Topic] == nil {
				out[rt.Topic] = map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition{}
			}
			out[rt.Topic][rp.Partition] = rp
		}
	}
	return out
}

func waitFor(t *testing.T, d time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkReadBack reads partition 0 of topic from the start up to the last
// acknowledged record and checks that every acknowledged record is there
// once, at its offset, and that no value repeats.
func checkReadBack(t *testing.T, c *testCluster, topic string, acked map[int64]string) {
	t.Helper()
	var last int64 = -1
	for o := range acked {
		last = max(last, o)
	}
	cons := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := map[string]int64{}
	next := int64(0)
	for next <= last {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read back: %v at offset %d of %d", err, next, last)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next {
				t.Fatalf("offset %d after %d", r.Offset, next-1)
			}
			next++
			if o, dup := seen[string(r.Value)]; dup {
				t.Fatalf("%s at offsets %d and %d", r.Value, o, r.Offset)
			}
			seen[string(r.Value)] = r.Offset
			if v, ok := acked[r.Offset]; ok && v != string(r.Value) {
				t.Fatalf("offset %d holds %s, acknowledged %s", r.Offset, r.Value, v)
			}
		})
	}
	for o, v := range acked {
		if seen[v] != o {
			t.Fatalf("acknowledged %s at %d, read at %d", v, o, seen[v])
		}
	}
}
