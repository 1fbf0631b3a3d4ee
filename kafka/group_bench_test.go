package kafka_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/segment"
)

// Measures of the group coordinator, over loopback with kgo clients and an
// in-process broker:
//
//	go test ./kafka/ -run '^$' -bench 'GroupRebalance|GroupCommit' -benchtime 10x
//
// BenchmarkGroupRebalance: a 3-member group over 12 partitions; one member
// leaves (LeaveGroup, or a ConsumerGroupHeartbeat at epoch -1 with
// KIP-848); the time until the 2 others own every partition again. The
// others learn of the rebalance from a heartbeat, so half the heartbeat
// interval on average is the clients' share (measured with 100 ms and
// 10 ms; with KIP-848 the interval is the broker's
// group.consumer.heartbeat.interval.ms); the rest is the protocol's round
// trips and the broker's work (with cooperative-sticky, its second
// rebalance; with KIP-848, none: the leaver's partitions are free, so the
// next heartbeat of each member hands them out).
//
// BenchmarkGroupCommit: OffsetCommit requests per second (one partition
// each, simple-consumer commits to a group per client), each client with
// one request in flight at a time or 16 (pipelined on its connection).

func BenchmarkGroupRebalance(b *testing.B) {
	for _, c := range []struct {
		name   string
		bal    kgo.GroupBalancer
		kip848 bool
	}{
		{"range", kgo.RangeBalancer(), false},
		{"cooperative-sticky", kgo.CooperativeStickyBalancer(), false},
		// KIP-848 with the broker's uniform assignor (kgo maps its sticky
		// balancers to it).
		{"kip848-uniform", kgo.CooperativeStickyBalancer(), true},
	} {
		for _, hb := range []time.Duration{100 * time.Millisecond, 10 * time.Millisecond} {
			b.Run(fmt.Sprintf("%s/heartbeat=%v", c.name, hb), func(b *testing.B) {
				benchRebalance(b, c.name, c.bal, hb, c.kip848)
			})
		}
	}
}

func benchRebalance(b *testing.B, name string, bal kgo.GroupBalancer, hb time.Duration, kip848 bool) {
	br := startBroker(b, brokerOpts{Groups: func(c *group.Config) {
		c.ConsumerHeartbeatInterval, c.ConsumerSessionTimeout = hb, 10*time.Second
	}})
	const parts = 12
	topic := "rebalance-" + name
	e2eCreateTopic(b, br, topic, parts, nil)
	var took []time.Duration
	for i := range b.N {
		took = append(took, measureRebalance(b, br, bal, hb, kip848, topic, fmt.Sprintf("rb-%s-%d", name, i), parts))
	}
	slices.Sort(took)
	var sum time.Duration
	for _, d := range took {
		sum += d
	}
	b.ReportMetric(float64(sum.Microseconds())/float64(len(took))/1000, "ms/rebalance")
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
}

// measureRebalance forms a group of 3, waits until it is stable, makes
// one member leave, and returns how long until the others own every
// partition.
func measureRebalance(b *testing.B, br *testBroker, bal kgo.GroupBalancer, hb time.Duration, kip848 bool, topic, groupID string, parts int) time.Duration {
	var mu sync.Mutex
	owner := map[int32]int{} // partition -> member index
	changed := make(chan struct{}, 64)
	clients := make([]*kgo.Client, 3)
	for i := range clients {
		opts := []kgo.Opt{kgo.SeedBrokers(br.Addr), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
			kgo.Balancers(bal), kgo.HeartbeatInterval(hb), kgo.SessionTimeout(10 * time.Second),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				mu.Lock()
				for _, p := range a[topic] {
					owner[p] = i
				}
				mu.Unlock()
				changed <- struct{}{}
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				mu.Lock()
				for _, p := range a[topic] {
					if owner[p] == i {
						delete(owner, p)
					}
				}
				mu.Unlock()
			})}
		if kip848 {
			opts = append(opts, kgo.ServerSideBalancer())
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			b.Fatal(err)
		}
		clients[i] = cl
		go func() {
			for !cl.PollFetches(context.Background()).IsClientClosed() {
			}
		}()
	}
	// Stable: every partition owned, by all three members.
	owned := func(members int) bool {
		mu.Lock()
		defer mu.Unlock()
		who := map[int]bool{}
		for _, m := range owner {
			who[m] = true
		}
		return len(owner) == parts && len(who) == members
	}
	waitFor := func(what string, cond func() bool) {
		deadline := time.After(30 * time.Second)
		for !cond() {
			select {
			case <-changed:
			case <-time.After(5 * time.Millisecond):
			case <-deadline:
				b.Fatalf("%s: owners %v", what, owner)
			}
		}
	}
	waitFor("three members", func() bool { return owned(3) })
	// Let a cooperative group settle its follow-up rebalance, then leave
	// at a random phase of the members' heartbeats (they heartbeat
	// together, having synced together): a fixed delay would always land
	// at the same distance before their next heartbeat.
	time.Sleep(300*time.Millisecond + time.Duration(rand.Int64N(int64(hb))))
	waitFor("three members, settled", func() bool { return owned(3) })

	start := time.Now()
	clients[0].Close() // LeaveGroup
	mu.Lock()
	for p, m := range owner {
		if m == 0 {
			delete(owner, p)
		}
	}
	mu.Unlock()
	waitFor("two members", func() bool { return owned(2) })
	took := time.Since(start)
	clients[1].Close()
	clients[2].Close()
	return took
}

func BenchmarkGroupCommit(b *testing.B) {
	for _, c := range []struct {
		name     string
		clients  int
		inflight int
		always   bool
	}{
		{"clients=1/inflight=1", 1, 1, false},
		{"clients=1/inflight=16", 1, 16, false},
		{"clients=8/inflight=1", 8, 1, false},
		{"clients=8/inflight=16", 8, 16, false},
		{"clients=8/inflight=16/flush=always", 8, 16, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			opts := brokerOpts{}
			if c.always {
				opts.Config = func(cfg *broker.Config) {
					cfg.Topic = engine.DefaultTopicConfig()
					cfg.Topic.Log.FlushMessages, cfg.Topic.Log.Flush = 1, segment.FlushAlways
				}
			}
			br := startBroker(b, opts)
			e2eCreateTopic(b, br, "committed", 64, nil)
			clients := make([]*kgo.Client, c.clients)
			for i := range clients {
				clients[i] = br.client()
			}
			var next atomic.Int64
			var failed atomic.Value
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for i, cl := range clients {
				for j := range c.inflight {
					wg.Add(1)
					go func() {
						defer wg.Done()
						req := kmsg.NewPtrOffsetCommitRequest()
						req.Group = fmt.Sprintf("committer-%d", i)
						rt := kmsg.NewOffsetCommitRequestTopic()
						rt.Topic = "committed"
						rp := kmsg.NewOffsetCommitRequestTopicPartition()
						rp.Partition = int32(j % 64)
						rt.Partitions = append(rt.Partitions, rp)
						req.Topics = append(req.Topics, rt)
						for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
							req.Topics[0].Partitions[0].Offset = n
							resp, err := req.RequestWith(context.Background(), cl)
							if err == nil {
								err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
							}
							if err != nil {
								failed.Store(err)
								return
							}
						}
					}()
				}
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if err := failed.Load(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "commits/s")
		})
	}
}
