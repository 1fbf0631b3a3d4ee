//go:build unix

package kafka_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit"
)

// TestClusterReplicationThrottle: two broker processes; a partition with
// 8 MB on broker 1 is reassigned to {1,2} with replication throttles of
// 2 MB/s on leader and follower (the cluster default of
// leader.replication.throttled.rate and follower.replication.throttled.rate,
// and the topic's throttled-replicas naming broker 1 as leader and broker
// 2 as follower, as kafka-reassign-partitions --throttle sets them). The
// new replica's catch-up rate, read from its log's bytes on disk over the
// middle of the copy, is within 20% of the throttle; unthrottled, loopback
// copies it many times faster.
func TestClusterReplicationThrottle(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	const (
		throttle = 2_000_000 // bytes/s
		total    = 8 << 20
		value    = 8 << 10
	)
	c := startCluster(t, 2, clusterProps)
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createAssigned(t, c, "throttled", []int32{1})

	prod := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(256<<10))
	v := make([]byte, value)
	var rs []*kgo.Record
	for i := 0; i < total/value; i++ {
		rs = append(rs, &kgo.Record{Topic: "throttled", Value: v})
	}
	if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	leaderBytes := testkit.LogBytes(t, filepath.Join(c.procs[0].dir, "throttled-0"))

	rate := fmt.Sprint(throttle)
	resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "leader.replication.throttled.rate", Value: &rate},
		{Op: kadm.SetConfig, Name: "follower.replication.throttled.rate", Value: &rate},
	})
	if err == nil {
		err = firstAlterErr(resps)
	}
	if err != nil {
		t.Fatalf("broker configs: %v", err)
	}
	leaders, followers := "0:1", "0:2"
	resps, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "leader.replication.throttled.replicas", Value: &leaders},
		{Op: kadm.SetConfig, Name: "follower.replication.throttled.replicas", Value: &followers},
	}, "throttled")
	if err == nil {
		err = firstAlterErr(resps)
	}
	if err != nil {
		t.Fatalf("topic configs: %v", err)
	}

	alter(t, adm, "throttled", []int32{1, 2})
	// Sample the new replica's log every 20 ms until it holds the
	// leader's bytes; the rate is taken between 25% and 90% of them,
	// away from the first burst (a quota allows one window's worth at
	// the start) and the tail.
	dir := filepath.Join(c.procs[1].dir, "throttled-0")
	type sample struct {
		at    time.Time
		bytes int64
	}
	var from, to sample
	start := time.Now()
	for {
		s := sample{time.Now(), testkit.LogBytes(t, dir)}
		if from.at.IsZero() && s.bytes >= leaderBytes/4 {
			from = s
		}
		if s.bytes >= leaderBytes*9/10 {
			to = s
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("broker 2 holds %d of %d bytes after %v", s.bytes, leaderBytes, time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := float64(to.bytes-from.bytes) / to.at.Sub(from.at).Seconds()
	t.Logf("caught up %d bytes in %v; %.2f MB/s between 25%% and 90%% (throttle %.2f MB/s): %.2fx",
		leaderBytes, time.Since(start).Round(time.Millisecond), got/1e6, float64(throttle)/1e6, got/throttle)
	// (Written so that NaN fails too: unthrottled, the copy can end
	// between two samples.)
	if !(got >= 0.8*throttle && got <= 1.2*throttle) {
		t.Fatalf("catch-up rate %.0f B/s, want within 20%% of %d", got, throttle)
	}
	// The move completes: broker 2 joins the ISR.
	waitFor(t, 20*time.Second, func() error {
		if p := describePartition(t, adm, "throttled"); len(p.ISR) != 2 {
			return fmt.Errorf("ISR %v", p.ISR)
		}
		return nil
	})
}

func firstAlterErr(rs kadm.AlterConfigsResponses) error {
	for _, r := range rs {
		if r.Err != nil {
			return fmt.Errorf("%s: %w (%s)", r.Name, r.Err, r.ErrMessage)
		}
	}
	return nil
}
