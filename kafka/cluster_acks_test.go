//go:build unix

package kafka_test

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"ringlog/kafka"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterAcksAllTimeout: an acks=all produce whose follower stopped
// answering is answered REQUEST_TIMED_OUT after the request's timeout.ms,
// as Kafka's produce purgatory does, rather than held until the ISR
// shrinks (replica.lag.time.max.ms later). The record was appended on the
// leader: once the follower resumes it is committed and read back, and the
// next acks=all produce succeeds.
func TestClusterAcksAllTimeout(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	if testing.Short() {
		t.Skip("starts two broker processes")
	}
	c := startCluster(t, 2, clusterProps)
	const topic = "acks-timeout"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.createTopic(kadm.NewClient(c.client()), topic, 1, 2, nil)
	leader := c.leaderIndex(topic, 0)
	follower := 1 - leader
	w := dialWire(t, c.procs[leader].addr)
	produce := func(value string, timeout time.Duration) *kmsg.ProduceResponseTopicPartition {
		t.Helper()
		req := kafka.ProduceReq(9, -1, topic, 0, kafka.MakeBatch(t, value, 1, -1, 0))
		req.TimeoutMillis = int32(timeout / time.Millisecond)
		res := w.roundTrip(req).(*kmsg.ProduceResponse)
		return &res.Topics[0].Partitions[0]
	}
	if p := produce("before", 10*time.Second); p.ErrorCode != 0 {
		t.Fatalf("acks=all produce with both replicas: %v", kerr.ErrorForCode(p.ErrorCode))
	}

	stopped := c.procs[follower].cmd.Process
	stopProcess(t, stopped)
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = stopped.Signal(syscall.SIGCONT)
		}
	}
	defer resume()
	// 300 ms is well inside replica.lag.time.max.ms and the session
	// timeout (2 s): the follower is still in the ISR when the answer
	// comes, so only the request's own timeout can explain it.
	sent := time.Now()
	p := produce("stuck", 300*time.Millisecond)
	took := time.Since(sent)
	resume()
	if p.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("acks=all produce with the follower stopped: %v after %v, want REQUEST_TIMED_OUT", kerr.ErrorForCode(p.ErrorCode), took)
	}
	if p.BaseOffset != -1 {
		t.Fatalf("timed out partition answered with base offset %d, want -1", p.BaseOffset)
	}
	t.Logf("REQUEST_TIMED_OUT after %v", took.Round(time.Millisecond))

	if p := produce("after", 10*time.Second); p.ErrorCode != 0 {
		t.Fatalf("acks=all produce after the follower resumed: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	cons := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	var got []string
	for len(got) < 3 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume: %v (read %v)", err, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if len(got) != 3 || got[0] != "before-0" || got[1] != "stuck-0" || got[2] != "after-0" {
		t.Fatalf("read %q, want the three records in order, the timed out one committed since", got)
	}
}

// TestClusterControlledShutdown: a broker stopped with SIGTERM hands its
// leaderships to the other in-sync replicas before it exits (Kafka's
// controlled shutdown), so they move at once, not after the session
// timeout, which here is a minute: without the hand-over the partition
// would stay on the stopped broker that long.
func TestClusterControlledShutdown(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startCluster(t, 3, "replica.lag.time.max.ms=2000\nbroker.session.timeout.ms=60000\nbroker.heartbeat.interval.ms=300\n")
	const topic = "handover"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.createTopic(kadm.NewClient(c.client()), topic, 3, 3, nil)
	leader := c.leaderIndex(topic, 0)
	if err := c.procs[leader].signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, c.procs[leader].out)
	}
	stopped := time.Now()
	if !strings.Contains(c.procs[leader].out.String(), "controlled shutdown: leaderships handed over") {
		t.Fatalf("broker %d did not hand over its leaderships:\n%s", leader+1, c.procs[leader].out)
	}
	// Every partition has a live leader well inside the session timeout.
	live := c.client()
	ladm := kadm.NewClient(live)
	for {
		td, err := ladm.ListTopics(ctx, topic)
		ok := err == nil && len(td[topic].Partitions) == 3
		if ok {
			for _, p := range td[topic].Partitions {
				ok = ok && p.Leader >= 1 && int(p.Leader) != leader+1 && !slices.Contains(p.ISR, int32(leader+1))
			}
		}
		if ok {
			break
		}
		if time.Since(stopped) > 15*time.Second {
			t.Fatalf("15 s after broker %d stopped its partitions are %+v (err %v)", leader+1, td[topic].Partitions, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	prod := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(3) {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("after")}).FirstErr(); err != nil {
			t.Fatalf("acks=all produce to partition %d after the hand-over: %v", p, err)
		}
	}
}
