package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"ringlog/engine"
	"ringlog/replication"
	"ringlog/replication/controller"
	"ringlog/replication/fetcher"
)

// Config configures a broker's node.
type Config struct {
	// NodeID is this broker's id; Addr the host:port clients and followers
	// reach its Kafka listener at; Rack is broker.rack.
	NodeID int32
	Addr   string
	Rack   string
	// Listeners are the broker's advertised listeners by name, registered
	// with the quorum (nil: Addr is the only one).
	Listeners map[string]string
	// LagTimeMax is replica.lag.time.max.ms (default 30s): a follower that
	// has not caught up for longer leaves the ISR.
	LagTimeMax time.Duration
	// ISRCheckInterval is how often the leaders' ISRs are checked for
	// shrinking and paused fetches retried (default LagTimeMax/2, at most
	// 1s... see withDefaults).
	ISRCheckInterval time.Duration
	// Fetch is the template of the follower fetch streams (Addr,
	// ReplicaID and BrokerEpoch are filled in per stream).
	Fetch fetcher.Config
	// AlterPartitionTimeout bounds one ISR change request (default 10s).
	AlterPartitionTimeout time.Duration
	// OnLeadership, when set, is told of every change of this broker's
	// leadership of a partition: leader true once the engine's partition
	// became the leader at leaderEpoch; false once it stopped being it
	// (a follower at leaderEpoch, or -1 when the partition left this
	// broker), whether or not the engine took the new role. It runs on
	// the apply goroutine, in the order of the changes, and must not
	// block: the group coordinator loads and unloads its partitions of
	// __consumer_offsets from it, in the background.
	OnLeadership func(tp engine.TP, leader bool, leaderEpoch int32)
	Logger       *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.LagTimeMax <= 0 {
		c.LagTimeMax = 30 * time.Second
	}
	if c.ISRCheckInterval <= 0 {
		// Kafka checks every replica.lag.time.max.ms / 2; paused fetches
		// are retried on the same tick, so it is also bounded above.
		c.ISRCheckInterval = min(c.LagTimeMax/2, time.Second)
	}
	if c.AlterPartitionTimeout <= 0 {
		c.AlterPartitionTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Node runs one broker's replication. New makes it; the engine is opened
// with OnAppended set to the node's OnAppended; Start begins applying the
// controller's metadata.
type Node struct {
	cfg Config
	log *slog.Logger
	eng *engine.Core
	ctl *controller.Controller

	mu      sync.Mutex
	parts   map[engine.TP]*part
	streams map[int32]*stream // follower fetch streams, by leader id

	img atomic.Pointer[controller.Image] // the image last applied
	// rolesWaiting is set while apply holds back partition roles until
	// the image shows this process's registration.
	rolesWaiting atomic.Bool
	applied      chan struct{} // closed and replaced after each apply
	ready        chan struct{} // closed after the first apply
	kick         chan struct{} // wakes run for an ISR check
	// offlineKick wakes the reporter of offline partitions (offline.go).
	offlineKick chan struct{}
	// isr counts the ISR changes of led partitions (metrics.go).
	isr isrCounters
	// throttles are the replication throttles of the image last applied,
	// and leaderQuota and followerQuota their measurements (throttle.go).
	throttles                  atomic.Pointer[throttles]
	leaderQuota, followerQuota *replicationQuota

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// stopHeartbeats ends the session's heartbeats alone (controlled
	// shutdown); cancel ends them too.
	stopHeartbeats context.CancelFunc
	// stopped are the partitions of hosted topics that are no replica
	// here and whose engine partition was stopped and emptied
	// (stopReplicas; apply goroutine only).
	stopped map[engine.TP]bool
}

// stream is the fetch stream to one leader.
type stream struct {
	addr  string
	epoch int64 // this broker's epoch its fetches carry
	s     *fetcher.Stream
}

// part is one partition this broker is a replica of.
type part struct {
	mu sync.Mutex
	tp engine.TP
	id [16]byte

	role           engine.Role
	leaderID       int32 // the leader this replica follows or is
	leaderEpoch    int32
	partitionEpoch int32
	replicas       []int32
	isr            []int32

	leader *replication.Leader // when this broker leads
	// alterSent is the leader whose AlterPartition is in flight (nil:
	// none); alterResend says its pending change got no answer and goes
	// again at the next ISR check (controller.AlterUnknown).
	alterSent   *replication.Leader
	alterResend bool

	// Follower side: the epoch asked about in the truncation under way,
	// and when the stream paused the partition (0: fetching).
	asked    int32
	pausedAt time.Time
	// movingStart is set while the log start follows the leader's.
	movingStart atomic.Bool
	// announced: the last OnLeadership call for the partition said
	// leader (apply goroutine only).
	announced bool
}

// New returns a node; Start runs it.
func New(cfg Config) *Node {
	cfg = cfg.withDefaults()
	n := &Node{cfg: cfg, log: cfg.Logger, parts: map[engine.TP]*part{}, streams: map[int32]*stream{},
		applied: make(chan struct{}), ready: make(chan struct{}), kick: make(chan struct{}, 1), offlineKick: make(chan struct{}, 1),
		stopped: map[engine.TP]bool{}, leaderQuota: newReplicationQuota(), followerQuota: newReplicationQuota()}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	return n
}

// Start registers the broker with the controller and applies its metadata
// from now on, until Close.
func (n *Node) Start(eng *engine.Core, ctl *controller.Controller) error {
	n.eng, n.ctl = eng, ctl
	hb, stop := context.WithCancel(n.ctx)
	n.stopHeartbeats = stop
	if err := ctl.RegisterAndHeartbeat(hb, controller.BrokerInfo{ID: n.cfg.NodeID, Addr: n.cfg.Addr, Rack: n.cfg.Rack, Listeners: n.cfg.Listeners,
		Offline: n.offlineSet, RecoveredLogEnds: n.recoveredLogEnds}); err != nil {
		stop()
		return err
	}
	n.wg.Add(2)
	go n.run()
	go n.reportOffline()
	return nil
}

// ControlledShutdown hands this broker's leaderships to other in-sync
// replicas before it stops (Kafka's controlled shutdown): its heartbeats
// end, its registration is fenced at once rather than after the session
// timeout, so the controller moves each partition it leads to the next
// live ISR member and drops it from the ISRs, and the call returns once
// this broker applied that (it then leads nothing another replica could).
// Partitions with no other live in-sync replica stay here, offline, until
// it returns. Without another live broker there is nothing to hand over,
// and ControlledShutdown returns at once.
func (n *Node) ControlledShutdown(ctx context.Context) error {
	if n.stopHeartbeats == nil {
		return nil
	}
	n.stopHeartbeats()
	img := n.ctl.Image()
	b, ok := img.Broker(n.cfg.NodeID)
	if !ok || b.Fenced {
		return nil
	}
	other := false
	for _, o := range img.Brokers() {
		other = other || (o.ID != n.cfg.NodeID && !o.Fenced)
	}
	if !other {
		// Nobody to hand over to (the last broker of a cluster that is
		// stopping, whose quorum may be gone already).
		return nil
	}
	index, err := n.ctl.ControlledShutdown(ctx, n.cfg.NodeID, b.Epoch)
	if err != nil {
		return err
	}
	return n.WaitApplied(ctx, index)
}

// Close stops the fetch streams and the apply loop. The engine and the
// controller are the caller's to close, after.
func (n *Node) Close() {
	n.cancel()
	n.wg.Wait()
	n.mu.Lock()
	streams := n.streams
	n.streams = map[int32]*stream{}
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, st := range streams {
		_ = st.s.Close(ctx)
	}
}

// Controller is the metadata quorum this node follows.
func (n *Node) Controller() *controller.Controller { return n.ctl }

// NodeID is this broker's id.
func (n *Node) NodeID() int32 { return n.cfg.NodeID }

// Image is the controller image the node last applied to the engine: what
// Metadata should answer, since the engine matches it. Before the first
// apply (WaitReady) it is the controller's, which may still be replaying
// an old state.
func (n *Node) Image() *controller.Image {
	if img := n.img.Load(); img != nil {
		return img
	}
	return n.ctl.Image()
}

// WaitReady waits until the node caught up with the metadata quorum,
// applied its state to the engine, and sees this broker registered at its
// current address: before that, this broker knows neither its partitions'
// roles nor the cluster's current state, and must not serve clients.
func (n *Node) WaitReady(ctx context.Context) error {
	select {
	case <-n.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-n.ctx.Done():
		return engine.ErrClosed
	}
}

// WaitApplied waits until the node has applied the controller's image at
// index or later (so that a topic just created is in the engine).
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	for {
		n.mu.Lock()
		ch := n.applied
		n.mu.Unlock()
		if img := n.img.Load(); img != nil && img.Index >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.ctx.Done():
			return engine.ErrClosed
		}
	}
}

func (n *Node) run() {
	defer n.wg.Done()
	// The controller's image starts empty and fills as raft replays its
	// log: acted on before it caught up, it would have this broker delete
	// every topic it hosts. A no-op written through the raft leader and
	// applied here is the proof that it caught up.
	for {
		ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
		err := n.ctl.Sync(ctx)
		cancel()
		if err == nil {
			break
		}
		if n.ctx.Err() != nil {
			return
		}
		n.log.Warn("node: waiting for the metadata quorum", "err", err)
	}
	tick := time.NewTicker(n.cfg.ISRCheckInterval)
	defer tick.Stop()
	for {
		img := n.ctl.Image()
		if last := n.img.Load(); last == nil || img.Index != last.Index || n.rolesWaiting.Load() {
			n.apply(img)
		}
		// Waiting for this process's registration (apply's roles): the
		// image that shows it may be applied before the heartbeat loop
		// records the epoch, so look again shortly.
		var retry <-chan time.Time
		if n.rolesWaiting.Load() {
			retry = time.After(20 * time.Millisecond)
		}
		select {
		case <-n.ctx.Done():
			return
		case <-retry:
		case <-img.Superseded():
		case <-tick.C:
			n.checkISRs()
			n.retryPaused()
		case <-n.kick:
			n.checkISRs()
		}
	}
}

// apply makes the engine match img: topics with their ids, partitions'
// roles and epochs, leader state, fetch streams.
func (n *Node) apply(img *controller.Image) {
	me := n.cfg.NodeID
	n.updateThrottles(img)
	local := map[string]engine.TopicInfo{}
	for _, t := range n.eng.Topics() {
		local[t.Name] = t
	}
	mine := map[engine.TP]bool{}
	// Partitions of topics hosted here that are not replicas here (a
	// reassignment moved them away, or never placed them here), with
	// their leader epoch.
	others := map[engine.TP]int32{}
	// Decided once for all partitions: the first follower of a stale
	// stream replaces it, and every other one must then move too.
	stale := n.staleStreams(img)
	// No role before the image shows this process's registration: until
	// then it names the previous incarnation, which may have led
	// partitions whose logs lost their tails since (a power loss); led
	// again, its followers would truncate to them. The registration fences
	// that incarnation and moves its leaderships first.
	reg := n.ctl.Registered(me)
	self, known := img.Broker(me)
	roles := reg > 0 && known && self.Epoch >= reg
	n.rolesWaiting.Store(!roles)
	for _, name := range img.TopicNames() {
		t := img.Topic(name)
		replica := false
		for _, p := range t.Partitions {
			replica = replica || slices.Contains(p.Replicas, me)
		}
		if !replica {
			continue
		}
		if err := n.ensureTopic(t, local[name]); err != nil {
			n.log.Error("node: cannot host topic", "topic", name, "err", err)
			continue
		}
		for i, p := range t.Partitions {
			if !slices.Contains(p.Replicas, me) {
				others[engine.TP{Topic: name, Partition: int32(i)}] = p.LeaderEpoch
				continue
			}
			tp := engine.TP{Topic: name, Partition: int32(i)}
			mine[tp] = true
			if roles {
				n.applyPartition(img, tp, [16]byte(t.ID), p, stale)
			}
		}
	}
	// Partitions no longer ours (their topic was deleted).
	n.mu.Lock()
	var gone []*part
	for tp, p := range n.parts {
		if !mine[tp] {
			gone = append(gone, p)
			delete(n.parts, tp)
		}
	}
	n.mu.Unlock()
	for _, p := range gone {
		n.stopFollowing(p)
		n.dropLeader(p)
		n.resigned(p, -1)
	}
	if roles {
		n.stopReplicas(others)
	}
	for name, t := range local {
		if ct := img.Topic(name); ct == nil || [16]byte(ct.ID) != t.ID || !hosts(ct, me) {
			if err := n.eng.DeleteTopic(name); err != nil && !errors.Is(err, engine.ErrUnknownTopicOrPartition) {
				n.log.Error("node: cannot delete a topic the cluster no longer has here", "topic", name, "err", err)
			}
		}
	}
	n.closeIdleStreams(img)
	n.kickOffline()
	n.img.Store(img)
	n.mu.Lock()
	close(n.applied)
	n.applied = make(chan struct{})
	select {
	case <-n.ready:
	default:
		// Ready once the cluster knows this broker as it is now (this
		// process's registration at this address applied, so its roles
		// are too): before that, Metadata from here would send clients to
		// an address of a previous run.
		if b, ok := img.Broker(me); ok && roles && !b.Fenced && b.Addr == n.cfg.Addr && maps.Equal(b.Listeners, n.cfg.Listeners) {
			close(n.ready)
		}
	}
	n.mu.Unlock()
}

func hosts(t *controller.Topic, id int32) bool {
	for _, p := range t.Partitions {
		if slices.Contains(p.Replicas, id) {
			return true
		}
	}
	return false
}

// ensureTopic creates the engine's topic with the cluster's id, grows it,
// and keeps its configuration equal to the cluster's.
func (n *Node) ensureTopic(t *controller.Topic, have engine.TopicInfo) error {
	parts := int32(len(t.Partitions))
	if have.Name != "" && have.ID != [16]byte(t.ID) {
		// A topic of that name from before (deleted and created again
		// while this broker was away): its data is not this topic's.
		if err := n.eng.DeleteTopic(t.Name); err != nil {
			return err
		}
		have = engine.TopicInfo{}
	}
	if have.Name == "" {
		_, err := n.eng.CreateTopicWithID(t.Name, [16]byte(t.ID), parts, t.Configs)
		return err
	}
	if have.Partitions < parts {
		if err := n.eng.CreatePartitions(t.Name, parts, false); err != nil {
			return err
		}
	}
	if !maps.Equal(have.Overrides, t.Configs) && !(len(have.Overrides) == 0 && len(t.Configs) == 0) {
		if err := n.eng.AlterTopicConfig(t.Name, t.Configs, false); err != nil {
			return err
		}
	}
	return nil
}

// applyPartition brings one partition to the role and epochs of p; a
// follower of a leader in stale starts again on a new stream.
func (n *Node) applyPartition(img *controller.Image, tp engine.TP, id [16]byte, p controller.Partition, stale map[int32]bool) {
	me := n.cfg.NodeID
	n.mu.Lock()
	pt := n.parts[tp]
	if pt == nil {
		pt = &part{tp: tp, leaderID: -2, leaderEpoch: -1}
		n.parts[tp] = pt
	}
	n.mu.Unlock()

	pt.mu.Lock()
	same := pt.leaderID == p.Leader && pt.leaderEpoch == p.LeaderEpoch && pt.id == id
	pt.id = id
	pt.replicas, pt.isr = slices.Clone(p.Replicas), slices.Clone(p.ISR)
	epochChanged := pt.partitionEpoch != p.PartitionEpoch
	pt.partitionEpoch = p.PartitionEpoch
	pt.mu.Unlock()

	if n.applyOffline(pt, p) {
		return
	}
	if p.Leader == me {
		if same && pt.role == engine.RoleLeader {
			if epochChanged {
				n.leaderUpdate(img, pt, p)
			}
			n.setFenced(img, pt)
			return
		}
		n.becomeLeader(img, pt, p)
		return
	}
	if same && pt.role == engine.RoleFollower && !stale[p.Leader] {
		return
	}
	n.becomeFollower(img, pt, p)
}

// becomeLeader makes this broker tp's leader at p.LeaderEpoch.
func (n *Node) becomeLeader(img *controller.Image, pt *part, p controller.Partition) {
	n.stopFollowing(pt)
	if err := n.eng.BecomeLeader(pt.tp, p.LeaderEpoch); err != nil {
		n.log.Error("node: cannot become leader", "topic", pt.tp.Topic, "partition", pt.tp.Partition, "epoch", p.LeaderEpoch, "err", err)
		return
	}
	st, err := n.eng.State(pt.tp)
	if err != nil {
		return
	}
	l, err := replication.NewLeader(replication.LeaderState{ID: n.cfg.NodeID, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
		Replicas: p.Replicas, ISR: p.ISR, LEO: st.LEO, HW: st.HW}, n.topicConfig(pt.tp.Topic), time.Now())
	if err != nil {
		n.log.Error("node: invalid leader state", "topic", pt.tp.Topic, "partition", pt.tp.Partition, "err", err)
		return
	}
	l.MaybeIncrementHW(time.Now())
	pt.mu.Lock()
	pt.role, pt.leaderID, pt.leaderEpoch, pt.leader = engine.RoleLeader, p.Leader, p.LeaderEpoch, l
	hw := l.HW()
	pt.mu.Unlock()
	_ = n.eng.SetISR(pt.tp, int32(len(p.ISR)), int32(len(p.Replicas)))
	_ = n.eng.SetHW(pt.tp, hw)
	n.setFenced(img, pt)
	n.log.Info("node: leader", "topic", pt.tp.Topic, "partition", pt.tp.Partition, "epoch", p.LeaderEpoch, "isr", p.ISR, "leo", st.LEO, "hw", st.HW)
	pt.announced = true
	if n.cfg.OnLeadership != nil {
		n.cfg.OnLeadership(pt.tp, true, p.LeaderEpoch)
	}
}

// resigned tells OnLeadership that this broker no longer leads pt, if the
// last call said it did (apply goroutine only).
func (n *Node) resigned(pt *part, epoch int32) {
	if !pt.announced {
		return
	}
	pt.announced = false
	if n.cfg.OnLeadership != nil {
		n.cfg.OnLeadership(pt.tp, false, epoch)
	}
}

// leaderUpdate applies a new partition epoch (an ISR change) to a leader.
func (n *Node) leaderUpdate(img *controller.Image, pt *part, p controller.Partition) {
	pt.mu.Lock()
	l := pt.leader
	if l == nil {
		pt.mu.Unlock()
		return
	}
	before := l.ISR()
	moved, err := l.UpdateISR(replication.PartitionState{LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: p.ISR,
		Replicas: p.Replicas}, time.Now())
	hw := l.HW()
	if err == nil {
		n.countISRChange(before, l.ISR())
	}
	pt.mu.Unlock()
	if err != nil && !errors.Is(err, replication.ErrStale) {
		n.log.Warn("node: ISR update refused", "topic", pt.tp.Topic, "partition", pt.tp.Partition, "err", err)
	}
	_ = n.eng.SetISR(pt.tp, int32(len(p.ISR)), int32(len(p.Replicas)))
	if moved {
		_ = n.eng.SetHW(pt.tp, hw)
	}
}

// setFenced tells a leader which of its followers the controller fenced
// (they cannot join the ISR) and their current broker epochs (a follower
// that registered again restarted: the leader forgets what its previous
// incarnation fetched).
func (n *Node) setFenced(img *controller.Image, pt *part) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.leader == nil {
		return
	}
	for _, r := range pt.replicas {
		if r == n.cfg.NodeID {
			continue
		}
		b, ok := img.Broker(r)
		_ = pt.leader.SetFenced(r, !ok || b.Fenced)
		if ok {
			// An error is a fetch that told of a newer epoch than this
			// image: the image is behind, and the fetch was right.
			_ = pt.leader.BrokerEpoch(r, b.Epoch)
		}
	}
}

// dropLeader forgets the leader state of a partition that is no longer
// led here; the engine fails its waiting acks=all appends itself.
func (n *Node) dropLeader(pt *part) {
	pt.mu.Lock()
	pt.leader = nil
	pt.mu.Unlock()
}

// topicConfig is the part of a topic's configuration the leader's
// decisions read.
func (n *Node) topicConfig(topic string) replication.Config {
	cfg := replication.Config{LagTimeMax: n.cfg.LagTimeMax, MinISR: 1}
	if t, ok := n.eng.Topic(topic); ok {
		cfg.MinISR = int(t.Config.MinInsyncReplicas)
	}
	return cfg
}

// Leads reports whether this broker leads tp, and the leader epoch.
func (n *Node) Leads(tp engine.TP) (epoch int32, ok bool) {
	n.mu.Lock()
	pt := n.parts[tp]
	n.mu.Unlock()
	if pt == nil {
		return 0, false
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.leaderEpoch, pt.role == engine.RoleLeader && pt.leader != nil
}

func (n *Node) part(tp engine.TP) *part {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.parts[tp]
}

func (n *Node) String() string { return fmt.Sprintf("node %d", n.cfg.NodeID) }
