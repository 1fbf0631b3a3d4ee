//go:build unix

package kafka_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine/group"
)

// Consumer groups in a cluster: the coordinator of a group is the leader
// of its partition of __consumer_offsets, a replicated topic, and moves
// with it.

// clusterGroupProps are clusterProps with groups that form at once, and
// KIP-848 members that heartbeat often enough to notice a failure fast.
const clusterGroupProps = clusterProps + `group.initial.rebalance.delay.ms=0
group.consumer.heartbeat.interval.ms=300
group.consumer.session.timeout.ms=10000
`

// TestClusterGroupCoordinatorFailover: three broker processes, a topic of
// replication factor 3, a producer writing all along and a group of three
// kgo consumers (classic cooperative-sticky, then KIP-848) committing as
// they go. The leader of the group's partition of __consumer_offsets, its
// coordinator, is SIGKILLed: the group moves to the new leader of that
// partition, which FindCoordinator names; the committed offsets, read all
// along, never go backwards (no acknowledged commit is lost) and move on
// again; every acknowledged record is consumed at least once; and once the
// producer stops, the group commits the end of every partition.
func TestClusterGroupCoordinatorFailover(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"classic", []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.HeartbeatInterval(300 * time.Millisecond), kgo.SessionTimeout(10 * time.Second)}},
		{"consumer", []kgo.Opt{kgo.ServerSideBalancer()}},
	} {
		t.Run(tc.name, func(t *testing.T) { testGroupFailover(t, "failover-"+tc.name, tc.name == "consumer", tc.opts...) })
	}
}

func testGroupFailover(t *testing.T, groupID string, consumerGroup bool, groupOpts ...kgo.Opt) {
	start := time.Now()
	c := startCluster(t, 3, clusterGroupProps)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	const topic, parts = "grouped", 6
	adm := kadm.NewClient(c.client())
	resp, err := adm.CreateTopic(ctx, parts, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	topicID := resp.ID // OffsetFetch v10 names topics by id (KIP-848)

	// The producer writes until told to stop; what is acknowledged must
	// be consumed.
	var mu sync.Mutex
	acked := map[int32]map[int64]bool{}
	consumed := map[int32]map[int64]bool{}
	prod := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	stopProducing := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; ; i++ {
			select {
			case <-stopProducing:
				return
			default:
			}
			var rs []*kgo.Record
			for j := range 50 {
				rs = append(rs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%d-%d", i, j)})
			}
			res := prod.ProduceSync(ctx, rs...)
			mu.Lock()
			for _, r := range res {
				if r.Err == nil {
					if acked[r.Record.Partition] == nil {
						acked[r.Record.Partition] = map[int64]bool{}
					}
					acked[r.Record.Partition][r.Record.Offset] = true
				}
			}
			mu.Unlock()
			if ctx.Err() != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	defer func() {
		select {
		case <-stopProducing:
		default:
			close(stopProducing)
		}
		<-produced
	}()

	// Three members, committing every 100 ms.
	var consumers []*kgo.Client
	var polling sync.WaitGroup
	for range 3 {
		cl := c.client(append([]kgo.Opt{kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond),
			kgo.AutoCommitInterval(100 * time.Millisecond), kgo.MetadataMaxAge(time.Second),
			kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}, groupOpts...)...)
		consumers = append(consumers, cl)
		polling.Add(1)
		go func() {
			defer polling.Done()
			for {
				fs := cl.PollFetches(ctx)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					if consumed[r.Partition] == nil {
						consumed[r.Partition] = map[int64]bool{}
					}
					consumed[r.Partition][r.Offset] = true
					mu.Unlock()
				})
			}
		}()
	}
	defer func() {
		for _, cl := range consumers {
			cl.Close()
		}
		polling.Wait()
	}()

	// The committed offsets, read from whichever broker coordinates the
	// group: per partition they never go backwards.
	var cmu sync.Mutex
	committed := map[int32]int64{}
	var backwards []string
	sum := func() (n int64) {
		cmu.Lock()
		defer cmu.Unlock()
		for _, o := range committed {
			n += o
		}
		return n
	}
	// Each read asks a live broker for the coordinator and that broker for
	// the offsets.
	mon := c.client()
	var victim atomic.Int32
	var coordinatorNow atomic.Int32
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for ctx.Err() == nil {
			asked := int32(1)
			if victim.Load() == 1 {
				asked = 2
			}
			id, offs, err := committedAt(ctx, mon, asked, groupID, topic, topicID)
			if err == nil {
				coordinatorNow.Store(id)
				cmu.Lock()
				for p, o := range offs {
					if prev, ok := committed[p]; ok && o < prev {
						backwards = append(backwards, fmt.Sprintf("partition %d: %d after %d (broker %d)", p, o, prev, id))
					}
					committed[p] = max(committed[p], o)
				}
				cmu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	defer func() { cancel(); <-watchDone }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("%s: not after %v", what, time.Since(start).Round(time.Millisecond))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("every partition committed", func() bool {
		cmu.Lock()
		defer cmu.Unlock()
		n := 0
		for _, o := range committed {
			if o > 0 {
				n++
			}
		}
		return n == parts
	})
	stable := func() bool {
		n, state := groupMembers(ctx, mon, coordinatorNow.Load(), groupID, consumerGroup)
		return n == 3 && state == "Stable"
	}
	waitFor("a stable group of three members", stable)

	// The coordinator is the leader of the group's partition of
	// __consumer_offsets, and FindCoordinator says so.
	offsetsPart := group.PartitionFor(groupID, 50)
	coordinator := func() (int32, error) {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		defer rcancel()
		r := adm.FindGroupCoordinators(rctx, groupID)[groupID]
		return r.NodeID, r.Err
	}
	leader := c.leaderOf(group.OffsetsTopic, offsetsPart)
	if id, err := coordinator(); err != nil || id != leader {
		t.Fatalf("FindCoordinator: broker %d (%v), the leader of %s-%d is %d", id, err, group.OffsetsTopic, offsetsPart, leader)
	}
	before := sum()
	t.Logf("group %s formed and committing after %v; its coordinator is broker %d (%s-%d); killing it",
		groupID, time.Since(start).Round(time.Millisecond), leader, group.OffsetsTopic, offsetsPart)
	victim.Store(leader)
	c.procs[leader-1].signal(syscall.SIGKILL)
	killed := time.Now()

	var moved time.Duration
	waitFor("a new coordinator", func() bool {
		id, err := coordinator()
		if err == nil && id != leader && id > 0 {
			moved = time.Since(killed)
			t.Logf("FindCoordinator names broker %d %v after the kill", id, moved.Round(time.Millisecond))
			return true
		}
		return false
	})
	waitFor("commits after the kill", func() bool { return sum() > before })
	recovered := time.Since(killed)
	t.Logf("the group commits again %v after the kill of its coordinator", recovered.Round(time.Millisecond))
	if now := coordinatorNow.Load(); now == leader {
		t.Fatalf("offsets read from broker %d, the killed coordinator", now)
	}
	// The metadata a broker answers with may lag the leader's election
	// for a moment.
	waitFor("the coordinator named the new leader of the group's partition", func() bool {
		return coordinatorNow.Load() == c.leaderOf(group.OffsetsTopic, offsetsPart)
	})
	waitFor("the group stable again with three members", stable)
	stableAgain := time.Since(killed)

	// Let it run on the new coordinator for a while, then drain.
	time.Sleep(time.Second)
	close(stopProducing)
	<-produced
	waitFor("every acknowledged record consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for p, offs := range acked {
			for o := range offs {
				if !consumed[p][o] {
					return false
				}
			}
		}
		return true
	})
	waitFor("the end of every partition committed", func() bool {
		mu.Lock()
		ends := map[int32]int64{}
		for p, offs := range acked {
			for o := range offs {
				ends[p] = max(ends[p], o+1)
			}
		}
		mu.Unlock()
		cmu.Lock()
		defer cmu.Unlock()
		for p, end := range ends {
			if committed[p] < end {
				return false
			}
		}
		return true
	})
	cmu.Lock()
	defer cmu.Unlock()
	if len(backwards) > 0 {
		t.Fatalf("committed offsets went backwards: %v", backwards)
	}
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, offs := range acked {
		n += len(offs)
	}
	t.Logf("%d acknowledged records consumed; after the kill: coordinator named again %v, commits again %v, stable with 3 members %v; %v in all",
		n, moved.Round(time.Millisecond), recovered.Round(time.Millisecond), stableAgain.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// groupMembers describes a group at its coordinator: how many members it
// has and its state (DescribeGroups for a classic group,
// ConsumerGroupDescribe for a KIP-848 one).
func groupMembers(ctx context.Context, cl *kgo.Client, coordinator int32, groupID string, consumer bool) (int, string) {
	if coordinator <= 0 {
		return 0, ""
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	br := cl.Broker(int(coordinator))
	if consumer {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{groupID}
		resp, err := req.RequestWith(ctx, br)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			return 0, ""
		}
		return len(resp.Groups[0].Members), resp.Groups[0].State
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{groupID}
	resp, err := req.RequestWith(ctx, br)
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		return 0, ""
	}
	return len(resp.Groups[0].Members), resp.Groups[0].State
}

// committedAt reads a group's committed offsets of topic (named by topicID
// from OffsetFetch v10) from the group's coordinator, as broker asked names
// it: FindCoordinator and OffsetFetch go to the brokers directly, past the
// client's cache of coordinators (kgo keeps dialing a dead one for a while).
func committedAt(ctx context.Context, cl *kgo.Client, asked int32, groupID, topic string, topicID [16]byte) (int32, map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = groupID, []string{groupID}
	fr, err := fc.RequestWith(ctx, cl.Broker(int(asked)))
	if err == nil && len(fr.Coordinators) == 1 {
		// v4+ answers per key (kgo sends the highest version).
		fr.NodeID, fr.ErrorCode = fr.Coordinators[0].NodeID, fr.Coordinators[0].ErrorCode
	}
	if err == nil {
		err = kerr.ErrorForCode(fr.ErrorCode)
	}
	if err != nil {
		return -1, nil, fmt.Errorf("FindCoordinator: %w", err)
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	og := kmsg.NewOffsetFetchRequestGroup() // v8+ (kgo sends v10); member epoch -1: not a member
	og.Group = groupID
	of.Groups = []kmsg.OffsetFetchRequestGroup{og}
	or, err := of.RequestWith(ctx, cl.Broker(int(fr.NodeID)))
	if err == nil && len(or.Groups) == 1 {
		or.ErrorCode = or.Groups[0].ErrorCode
	}
	if err == nil {
		err = kerr.ErrorForCode(or.ErrorCode)
	}
	if err != nil {
		return fr.NodeID, nil, fmt.Errorf("OffsetFetch from broker %d: %w", fr.NodeID, err)
	}
	offs := map[int32]int64{}
	for _, g := range or.Groups {
		for _, rt := range g.Topics {
			for _, rp := range rt.Partitions {
				if (rt.Topic == topic || rt.TopicID == topicID) && rp.ErrorCode == 0 && rp.Offset >= 0 {
					offs[rp.Partition] = rp.Offset
				}
			}
		}
	}
	return fr.NodeID, offs, nil
}
