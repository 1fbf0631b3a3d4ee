package node

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"ringlog/engine"
	"ringlog/internal/rate"
	"ringlog/replication/controller"
)

// Replication throttles (KIP-73), as Kafka's ReplicationQuotaManager has
// them: a broker measures the bytes it replicates of throttled partitions,
// as a leader (the records it answers followers' fetches with) and as a
// follower (the records its fetches bring), each against its own rate,
// leader.replication.throttled.rate and follower.replication.throttled.rate
// (dynamic broker configs in the quorum: the broker's own, else the
// cluster default, else no bound). A partition is throttled on this broker
// when the topic's leader.replication.throttled.replicas (for the leader
// side) or follower.replication.throttled.replicas (follower side) is "*"
// or names it with this broker's id.
//
// While a side's rate is over its bound, the leader answers a follower that
// is not in the ISR no records of a throttled partition
// (ReplicaManager.shouldLeaderThrottle), and the follower leaves its
// throttled partitions out of its fetches unless it has caught up with the
// leader's high watermark (ReplicaFetcherThread's shouldFollowerThrottle).
// Every byte of a throttled partition counts, in sync or not: the bound is
// on the replication traffic as a whole. Unthrottled partitions always
// flow.

// Kafka's replication.quota.window.num and
// replication.quota.window.size.seconds defaults.
const (
	replicationQuotaWindows    = 11
	replicationQuotaWindowSize = time.Second
)

// throttleEpoch is the origin of the throttles' clock: monotonic time
// since the process started.
var throttleEpoch = time.Now()

func throttleNow() int64 { return int64(time.Since(throttleEpoch)) }

// replicationQuota is one side's measurement.
type replicationQuota struct {
	mu    sync.Mutex
	w     *rate.Windows
	total atomic.Int64 // bytes recorded since the start (metrics)
}

func newReplicationQuota() *replicationQuota {
	return &replicationQuota{w: rate.New(replicationQuotaWindows, replicationQuotaWindowSize)}
}

func (q *replicationQuota) record(bytes int64) {
	q.total.Add(bytes)
	now := throttleNow()
	q.mu.Lock()
	q.w.Record(now, float64(bytes))
	q.mu.Unlock()
}

// over returns how long the rate stays above bound if nothing more is
// recorded (0: within it). Kafka's replication quotas measure with
// SimpleRate: over at least one window, so that a move is held to its
// rate from its first second.
func (q *replicationQuota) over(bound float64) time.Duration {
	now := throttleNow()
	q.mu.Lock()
	r, span := q.w.Rate(now, q.w.Size())
	q.mu.Unlock()
	if r <= bound {
		return 0
	}
	return max(q.w.ThrottleTime(r, bound, span), time.Millisecond)
}

// byteRate is the rate over the windows, for metrics.
func (q *replicationQuota) byteRate() float64 {
	now := throttleNow()
	q.mu.Lock()
	defer q.mu.Unlock()
	r, _ := q.w.Rate(now, q.w.Size())
	return r
}

// throttledSet is the partitions one side throttles on this broker, from
// one image.
type throttledSet map[string]throttledTopic

type throttledTopic struct {
	all   bool
	parts []int32
}

func (s throttledSet) has(tp engine.TP) bool {
	t, ok := s[tp.Topic]
	return ok && (t.all || slices.Contains(t.parts, tp.Partition))
}

// throttles is what the image says of the throttles on this broker.
type throttles struct {
	leaderRate, followerRate float64 // +Inf: no bound
	leader, follower         throttledSet
}

// updateThrottles reads img's throttles for this broker. It runs on the
// apply goroutine, before the partitions take their roles.
func (n *Node) updateThrottles(img *controller.Image) {
	me := n.cfg.NodeID
	th := &throttles{}
	th.leaderRate, _ = img.BrokerRate(me, controller.LeaderReplicationThrottledRate)
	th.followerRate, _ = img.BrokerRate(me, controller.FollowerReplicationThrottledRate)
	for _, name := range img.TopicNames() {
		cfg := img.Topic(name).Configs
		for _, side := range [...]struct {
			key string
			set *throttledSet
		}{{engine.LeaderThrottledReplicasConfig, &th.leader}, {engine.FollowerThrottledReplicasConfig, &th.follower}} {
			v, ok := cfg[side.key]
			if !ok {
				continue
			}
			all, parts := engine.ThrottledReplicas(v, me)
			if !all && len(parts) == 0 {
				continue
			}
			if *side.set == nil {
				*side.set = throttledSet{}
			}
			(*side.set)[name] = throttledTopic{all: all, parts: parts}
		}
	}
	n.throttles.Store(th)
}

// LeaderThrottled reports whether tp is throttled on this broker as a
// leader (leader.replication.throttled.replicas): the bytes it sends
// followers of it count against leader.replication.throttled.rate
// (RecordLeaderReplication).
func (n *Node) LeaderThrottled(tp engine.TP) bool {
	th := n.throttles.Load()
	return th != nil && th.leader.has(tp)
}

// HoldLeaderReplication returns how long the leader answers follower
// replica's fetches of tp with no records (0: it reads them): tp is
// throttled here, replica is not in its ISR, and the leader's replication
// rate is over its bound (Kafka's ReplicaManager.shouldLeaderThrottle);
// the time is how long the rate stays over it if nothing more is sent.
func (n *Node) HoldLeaderReplication(tp engine.TP, replica int32) time.Duration {
	th := n.throttles.Load()
	if th == nil || !th.leader.has(tp) {
		return 0
	}
	pt := n.part(tp)
	if pt == nil {
		return 0
	}
	pt.mu.Lock()
	inSync := slices.Contains(pt.isr, replica)
	pt.mu.Unlock()
	if inSync {
		return 0
	}
	return n.leaderQuota.over(th.leaderRate)
}

// RecordLeaderReplication counts bytes of throttled partitions sent to
// followers.
func (n *Node) RecordLeaderReplication(bytes int64) {
	if bytes > 0 {
		n.leaderQuota.record(bytes)
	}
}

// followerThrottle is the follower side, as the fetch streams see it
// (fetcher.Throttle).
type followerThrottle Node

// Hold says how long a throttled partition that has not caught up stays
// out of the fetches: while the follower's rate is over its bound.
func (f *followerThrottle) Hold(tp engine.TP) time.Duration {
	n := (*Node)(f)
	th := n.throttles.Load()
	if th == nil || !th.follower.has(tp) {
		return 0
	}
	return n.followerQuota.over(th.followerRate)
}

// Record counts the bytes a fetch brought of tp if it is throttled.
func (f *followerThrottle) Record(tp engine.TP, bytes int) {
	n := (*Node)(f)
	th := n.throttles.Load()
	if th != nil && bytes > 0 && th.follower.has(tp) {
		n.followerQuota.record(int64(bytes))
	}
}

// ReplicationRates are the byte rates of throttled replication, leader
// and follower side, over the quota's windows: Kafka's LeaderReplication
// and FollowerReplication byte-rate; and the bytes counted since the
// start.
type ReplicationRates struct {
	LeaderByteRate, FollowerByteRate float64
	LeaderBytes, FollowerBytes       int64
}

// ReplicationRates measures them now.
func (n *Node) ReplicationRates() ReplicationRates {
	return ReplicationRates{
		LeaderByteRate: n.leaderQuota.byteRate(), FollowerByteRate: n.followerQuota.byteRate(),
		LeaderBytes: n.leaderQuota.total.Load(), FollowerBytes: n.followerQuota.total.Load(),
	}
}
