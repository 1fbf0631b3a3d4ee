package main

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
	"ringlog/replication/controller"
	"ringlog/replication/fetcher"
	"ringlog/replication/node"
)

// cluster is a broker's membership of a cluster: the metadata quorum's
// node (controller) and the replication (node).
type cluster struct {
	s    settings
	log  *slog.Logger
	node *node.Node
	ctl  *controller.Controller
	// groups is the group coordinator once started: the node tells it
	// which partitions of __consumer_offsets this broker leads.
	groups atomic.Pointer[group.Coordinator]
}

// newCluster returns nil without -controller-voters: a single broker
// without replication.
func newCluster(s settings, logger *slog.Logger) (*cluster, error) {
	if s.cluster.voters == "" {
		return nil, nil
	}
	c := &cluster{s: s, log: logger}
	c.node = node.New(node.Config{NodeID: s.nodeID, Addr: s.advertise, Rack: s.rack, LagTimeMax: s.cluster.lagTimeMax, Logger: logger,
		Fetch: fetcher.Config{Slots: s.cluster.fetchSlots}, OnLeadership: c.onLeadership})
	return c, nil
}

// onLeadership hands the leadership changes of __consumer_offsets'
// partitions to the group coordinator (node.Config.OnLeadership, on the
// node's apply goroutine; the coordinator only queues them to its shards).
// Before the coordinator starts they are dropped: hostGroups catches up.
func (c *cluster) onLeadership(tp engine.TP, leader bool, epoch int32) {
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

// offsetsPartitions is the partition count of the cluster's
// __consumer_offsets when it exists (an existing topic keeps its count,
// whatever offsets.topic.num.partitions says now), else def.
func (c *cluster) offsetsPartitions(def int32) int32 {
	if t := c.node.Image().Topic(group.OffsetsTopic); t != nil {
		return int32(len(t.Partitions))
	}
	return def
}

// clusterID is cluster.id, or without one the id derived from the voter
// list (controller.ClusterIDFromVoters): brokers started with the same
// -controller-voters report one cluster id, as Kafka's do.
func (c *cluster) clusterID() (string, error) {
	if c.s.clusterID != "" {
		return c.s.clusterID, nil
	}
	voters, err := controller.ParseVoters(c.s.cluster.voters)
	if err != nil {
		return "", fmt.Errorf("controller voters: %w", err)
	}
	return controller.ClusterIDFromVoters(voters), nil
}

// producerIDBlock is the engine's ProducerIDBlock: a block of producer ids
// from the quorum for this broker's current incarnation (KIP-730), so that
// no two brokers give one id to two producers. It runs on an
// InitProducerId request's goroutine, after start.
func (c *cluster) producerIDBlock() (start, end int64, err error) {
	b, ok := c.ctl.Image().Broker(c.s.nodeID)
	if !ok {
		return 0, 0, fmt.Errorf("broker %d is not registered with the quorum yet", c.s.nodeID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start, n, err := c.ctl.AllocateProducerIDs(ctx, c.s.nodeID, b.Epoch)
	return start, start + n, err
}

// start opens the controller (raft under <data-dir>/controller) and starts
// replication on eng.
func (c *cluster) start(eng *engine.Engine) error {
	voters, err := controller.ParseVoters(c.s.cluster.voters)
	if err != nil {
		return fmt.Errorf("controller voters: %w", err)
	}
	ctl, err := controller.Open(controller.Config{
		NodeID: c.s.nodeID, Voters: voters, Dir: filepath.Join(c.s.dataDir, "controller"),
		BrokerSessionTimeout: c.s.cluster.sessionTimeout, BrokerHeartbeatInterval: c.s.cluster.heartbeatInterval,
		DefaultPartitions: c.s.numPartitions, DefaultReplicationFactor: c.s.cluster.replicationFactor, Logger: c.log,
	})
	if err != nil {
		return err
	}
	c.ctl = ctl
	if err := c.node.Start(eng, ctl); err != nil {
		ctl.Close()
		return err
	}
	c.log.Info("cluster member", "node_id", c.s.nodeID, "voters", c.s.cluster.voters)
	return nil
}

// waitReady waits until the node caught up with the metadata quorum (a
// majority of the voters must be up), logging every 5 s, or until a signal
// asks to stop (false).
func (c *cluster) waitReady(sig <-chan os.Signal) bool {
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		done := make(chan error, 1)
		go func() { done <- c.node.WaitReady(ctx) }()
		select {
		case err := <-done:
			cancel()
			if err == nil {
				c.log.Info("caught up with the metadata quorum", "took", time.Since(start).Round(time.Millisecond))
				return true
			}
			c.log.Warn("waiting for the metadata quorum (a majority of -controller-voters must be up)", "waited", time.Since(start).Round(time.Second))
		case s := <-sig:
			cancel()
			c.log.Info("stopping before the metadata quorum was reached", "signal", s.String())
			return false
		}
	}
}

// close stops replication, then the controller. A nil cluster is a single
// broker: nothing to close.
func (c *cluster) close() error {
	if c == nil {
		return nil
	}
	c.node.Close()
	if c.ctl != nil {
		return c.ctl.Close()
	}
	return nil
}
