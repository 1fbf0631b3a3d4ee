package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"ringlog/engine"
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
}

// newCluster returns nil without -controller-voters: a single broker
// without replication.
func newCluster(s settings, logger *slog.Logger) (*cluster, error) {
	if s.cluster.voters == "" {
		return nil, nil
	}
	n := node.New(node.Config{NodeID: s.nodeID, Addr: s.advertise, Rack: s.rack, LagTimeMax: s.cluster.lagTimeMax, Logger: logger,
		Fetch: fetcher.Config{Slots: s.cluster.fetchSlots}})
	return &cluster{s: s, log: logger, node: n}, nil
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
