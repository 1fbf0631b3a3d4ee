package broker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/engine/txn"
	"ringlog/internal/fsutil"
	"ringlog/replication/controller"
	"ringlog/replication/fetcher"
	"ringlog/replication/node"
)

// cluster is a broker's membership of a cluster: the metadata quorum's
// node (controller) and the replication (node).
type cluster struct {
	cfg  *Config
	addr string // the advertised host:port of the Kafka listener
	log  *slog.Logger
	node *node.Node
	ctl  *controller.Controller
	// groups is the group coordinator once started: the node tells it
	// which partitions of __consumer_offsets this broker leads.
	groups atomic.Pointer[group.Coordinator]
	// txns is the transaction coordinator once started, told of the
	// partitions of __transaction_state this broker leads.
	txns atomic.Pointer[txn.Coordinator]
}

// newCluster returns the broker's membership: of the quorum in
// -controller-voters, or without it of a local quorum whose only voter it
// is (a single broker runs the same metadata, replication and
// coordination code as a cluster, with one replica per partition).
// newCluster makes the broker's part in its quorum. addr is the
// inter-broker listener's advertised address; listeners every listener's
// by name, registered only when there is more than that one (a broker with
// one listener registers as brokers always did: Addr serves every name).
func newCluster(cfg *Config, addr string, listeners map[string]string) *cluster {
	c := &cluster{cfg: cfg, addr: addr, log: cfg.Logger}
	if len(listeners) < 2 {
		listeners = nil
	}
	// Followers dial the leaders' inter-broker listeners with this
	// broker's client side of it: TLS and SASL as the listener needs.
	fetch := fetcher.Config{Slots: cfg.Cluster.FetchSlots}
	cfg.fetchSecurity(&fetch)
	c.node = node.New(node.Config{NodeID: cfg.NodeID, Addr: addr, Listeners: listeners, Rack: cfg.Rack, LagTimeMax: cfg.Cluster.LagTimeMax, Logger: cfg.Logger,
		Fetch: fetch, OnLeadership: c.onLeadership})
	return c
}

// onLeadership hands the leadership changes of __consumer_offsets'
// partitions to the group coordinator (node.Config.OnLeadership, on the
// node's apply goroutine; the coordinator only queues them to its shards).
// Before the coordinator starts they are dropped: hostGroups catches up.
func (c *cluster) onLeadership(tp engine.TP, leader bool, epoch int32) {
	if tp.Topic == txn.StateTopic {
		t := c.txns.Load()
		switch {
		case t == nil:
		case leader:
			t.Elected(tp.Partition, epoch)
		default:
			t.Resigned(tp.Partition, epoch)
		}
		return
	}
	if tp.Topic != group.OffsetsTopic {
		return
	}
	g := c.groups.Load()
	switch {
	case g == nil:
	case leader:
		g.Elected(tp.Partition, epoch)
	default:
		g.Resigned(tp.Partition, epoch)
	}
}

// hostGroups connects the group coordinator to the node: changes are
// passed on from now on, and the partitions this broker already leads are
// elected. A change that the hook also passes on arrives twice, which the
// coordinator takes as a repeat (the same epoch) or as stale (an election
// older than a resignation it has seen), whichever order the two take.
func (c *cluster) hostGroups(g *group.Coordinator) {
	c.groups.Store(g)
	for i := range g.Partitions() {
		if epoch, ok := c.node.Leads(engine.TP{Topic: group.OffsetsTopic, Partition: i}); ok {
			g.Elected(i, epoch)
		}
	}
}

// hostTxns connects the transaction coordinator to the node, as
// hostGroups does the group coordinator.
func (c *cluster) hostTxns(t *txn.Coordinator) {
	c.txns.Store(t)
	for i := range t.Partitions() {
		if epoch, ok := c.node.Leads(engine.TP{Topic: txn.StateTopic, Partition: i}); ok {
			t.Elected(i, epoch)
		}
	}
}

// topicPartitions is the partition count of the cluster's topic name when
// it exists (an internal topic keeps its count, whatever its setting says
// now), else def.
func (c *cluster) topicPartitions(name string, def int32) int32 {
	if t := c.node.Image().Topic(name); t != nil {
		return int32(len(t.Partitions))
	}
	return def
}

// offsetsPartitions is the partition count of the cluster's
// __consumer_offsets when it exists (an existing topic keeps its count,
// whatever offsets.topic.num.partitions says now), else def.
func (c *cluster) offsetsPartitions(def int32) int32 {
	if t := c.node.Image().Topic(group.OffsetsTopic); t != nil {
		return int32(len(t.Partitions))
	}
	return def
}

// local reports whether the broker runs alone, its own one-voter quorum.
func (c *cluster) local() bool { return c.cfg.local() }

// voters is the static quorum (none when the node knows it by bootstrap
// servers only).
func (c *cluster) voters() ([]controller.Voter, error) {
	if c.local() {
		return controller.LocalQuorum(c.cfg.NodeID), nil
	}
	if c.cfg.Cluster.Voters == "" {
		return nil, nil
	}
	return controller.ParseVoters(c.cfg.Cluster.Voters)
}

// clusterID is cluster.id, or without one the id derived from the voter
// list (controller.ClusterIDFromVoters): brokers started with the same
// -controller-voters report one cluster id, as Kafka's do. A broker on
// its own keeps the id its data directory recorded, or records a random
// one (empty here: the engine's choice).
func (c *cluster) clusterID() (string, error) {
	if c.cfg.ClusterID != "" || c.local() {
		return c.cfg.ClusterID, nil
	}
	if c.cfg.Cluster.Voters == "" {
		// validateRoles refuses this: bootstrap servers alone name no id.
		return "", fmt.Errorf("controller.quorum.bootstrap.servers without controller.quorum.voters needs cluster.id")
	}
	voters, err := controller.ParseVoters(c.cfg.Cluster.Voters)
	if err != nil {
		return "", fmt.Errorf("controller voters: %w", err)
	}
	return controller.ClusterIDFromVoters(voters), nil
}

// producerIDBlock is the engine's ProducerIDBlock: a block of producer ids
// from the quorum for this broker's current incarnation (KIP-730), so that
// no two brokers give one id to two producers. It runs on an
// InitProducerId request's goroutine, after start.
func (c *cluster) producerIDBlock(floor int64) (start, end int64, err error) {
	b, ok := c.ctl.Image().Broker(c.cfg.NodeID)
	if !ok {
		return 0, 0, fmt.Errorf("broker %d is not registered with the quorum yet", c.cfg.NodeID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start, n, err := c.ctl.AllocateProducerIDs(ctx, c.cfg.NodeID, b.Epoch, floor)
	return start, start + n, err
}

// start opens the controller (raft under <data-dir>/controller) and starts
// replication on eng.
func (c *cluster) start(eng *engine.Core) error {
	ctlDir := filepath.Join(c.cfg.DataDir, "controller")
	pending := filepath.Join(c.cfg.DataDir, AdoptPendingFile)
	markPending := func() error {
		return fsutil.WriteFileAtomic(c.cfg.DataDir, AdoptPendingFile, []byte("adopt local topics into the local quorum\n"))
	}
	if c.local() && len(eng.Topics()) > 0 {
		if _, err := os.Stat(filepath.Join(ctlDir, controller.StoreFile)); os.IsNotExist(err) {
			// Marked before the quorum's first entry, so that adoption
			// resumes if this start dies half way (a later start finds
			// the quorum no longer fresh, and would otherwise have the
			// node delete the topics not adopted yet).
			if err := markPending(); err != nil {
				return err
			}
		}
	}
	ctl, err := c.openController()
	if err != nil {
		return err
	}
	c.ctl = ctl
	_, statErr := os.Stat(pending)
	if c.local() && ctl.Fresh() && len(eng.Topics()) > 0 && os.IsNotExist(statErr) {
		// A store that exists but holds no state while the engine has
		// topics: a start that died between creating the store and its
		// first entry, or a store lost (a power loss used to do that,
		// issue 20). The engine's topics are all there is; deleting them
		// as unknown to the quorum would lose every record.
		c.log.Warn("local quorum store empty while the data directory has topics: adopting them", "topics", len(eng.Topics()))
		if err := markPending(); err != nil {
			ctl.Close()
			return err
		}
		statErr = nil
	}
	if statErr == nil {
		// A data directory written before the broker had a quorum: its
		// topics become the quorum's, or the node would delete them as
		// unknown to the cluster.
		if err := c.adopt(eng); err != nil {
			ctl.Close()
			return err
		}
		// The quorum's entries are durable (bolt syncs each commit, and
		// the store's name was synced when it opened): the mark may go.
		if err := os.Remove(pending); err != nil {
			ctl.Close()
			return err
		}
		if err := fsutil.SyncDir(c.cfg.DataDir); err != nil {
			ctl.Close()
			return err
		}
	}
	if err := c.node.Start(eng, ctl); err != nil {
		ctl.Close()
		return err
	}
	if c.local() {
		c.log.Info("metadata quorum: local, this broker its only voter", "node_id", c.cfg.NodeID)
	} else {
		c.log.Info("cluster member", "node_id", c.cfg.NodeID, "roles", c.cfg.Roles.String(), "voters", c.cfg.Cluster.Voters,
			"bootstrap_servers", c.cfg.Cluster.BootstrapServers)
	}
	return nil
}

// AdoptPendingFile marks a data directory whose topics are being adopted
// by its new local quorum.
const AdoptPendingFile = "adopt-pending"

// adopt registers the topics of eng in a new local quorum, with their ids,
// partition counts and configs, every partition on this broker alone. A
// topic the quorum has with that id already (adopted by a start that died
// half way) is left as it is.
func (c *cluster) adopt(eng *engine.Core) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The image fills as raft replays its log: current only after a Sync.
	if err := c.ctl.Sync(ctx); err != nil {
		return fmt.Errorf("adopting the topics of %s: %w", c.cfg.DataDir, err)
	}
	var topics []engine.TopicInfo
	for _, t := range eng.Topics() {
		if ct := c.ctl.Image().Topic(t.Name); ct == nil || [16]byte(ct.ID) != t.ID {
			topics = append(topics, t)
		}
	}
	if len(topics) == 0 {
		return nil
	}
	// Partitions are placed on registered brokers only; the node registers
	// again when it starts (a new epoch, which changes nothing here).
	if _, err := c.ctl.RegisterBroker(ctx, controller.BrokerInfo{ID: c.cfg.NodeID, Addr: c.addr, Rack: c.cfg.Rack}); err != nil {
		return fmt.Errorf("adopting the topics of %s: %w", c.cfg.DataDir, err)
	}
	for _, t := range topics {
		as := make([][]int32, t.Partitions)
		for i := range as {
			as[i] = []int32{c.cfg.NodeID}
		}
		_, err := c.ctl.CreateTopic(ctx, controller.CreateTopicRequest{Name: t.Name, Partitions: -1, ReplicationFactor: -1,
			Assignments: as, Configs: t.Overrides, ID: controller.TopicID(t.ID)})
		if err != nil {
			return fmt.Errorf("adopting topic %q of %s: %w", t.Name, c.cfg.DataDir, err)
		}
	}
	c.log.Info("topics adopted by the new local metadata quorum", "topics", len(topics))
	return nil
}

// waitReady waits until the node caught up with the metadata quorum (a
// majority of the voters must be up), logging every 5 s, or until ctx
// ends.
func (c *cluster) waitReady(ctx context.Context) error {
	start := time.Now()
	for {
		wait, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.node.WaitReady(wait)
		cancel()
		switch {
		case err == nil:
			c.log.Info("caught up with the metadata quorum", "took", time.Since(start).Round(time.Millisecond))
			return nil
		case ctx.Err() != nil:
			c.log.Info("stopping before the metadata quorum was reached")
			return fmt.Errorf("broker: waiting for the metadata quorum: %w", ctx.Err())
		}
		c.log.Warn("waiting for the metadata quorum (a majority of -controller-voters must be up)", "waited", time.Since(start).Round(time.Second))
	}
}

// handOver is a cluster broker's controlled shutdown: its leaderships
// move to other in-sync replicas before it stops serving (bounded: a lost
// quorum cannot keep the broker from stopping; its session then times
// out as after a crash).
func (c *cluster) handOver() {
	if c == nil || c.local() || c.ctl == nil || c.node == nil {
		return
	}
	// A hand-over takes tens of milliseconds; the bound is for a quorum
	// that is stopping too (a whole cluster stopped at once).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := c.node.ControlledShutdown(ctx); err != nil {
		c.log.Warn("controlled shutdown: leaderships not handed over, they move after the session timeout", "err", err)
		return
	}
	c.log.Info("controlled shutdown: leaderships handed over", "took", time.Since(start).Round(time.Millisecond))
}

// close stops replication, then the controller. A nil cluster is a single
// broker: nothing to close.
func (c *cluster) close() error {
	if c == nil {
		return nil
	}
	if c.node != nil {
		c.node.Close()
	}
	if c.ctl != nil {
		return c.ctl.Close()
	}
	return nil
}
