package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"ringlog/replication/controller"
)

// Roles is process.roles: what a node runs. The zero value is
// broker,controller (combined mode, a node that is both), ringlog's
// default: a single broker is a one-voter quorum.
//
//   - broker: the engine, replication and the Kafka listeners. Not a voter:
//     the quorum's leader adds it as a raft non-voter (an observer), which
//     receives and applies the metadata log as a voter does.
//   - controller: a voter of the metadata quorum (raft, the state machine,
//     the controller port) and nothing else: no engine, no Kafka listener,
//     nothing in the data directory but the quorum's state.
type Roles uint8

const (
	RoleBroker Roles = 1 << iota
	RoleController
)

// ParseRoles reads process.roles: "broker", "controller" or both, comma
// separated in any order, with Kafka's errors for an unknown or repeated
// role and for an empty list.
func ParseRoles(s string) (Roles, error) {
	var r Roles
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		var role Roles
		switch part {
		case "broker":
			role = RoleBroker
		case "controller":
			role = RoleController
		default:
			return 0, fmt.Errorf("unknown process role '%s' (only 'broker' and 'controller' are allowed roles)", part)
		}
		if r&role != 0 {
			return 0, fmt.Errorf("duplicate role names found in `process.roles`: %s", s)
		}
		r |= role
	}
	return r, nil
}

// Broker reports whether the node runs a broker.
func (r Roles) Broker() bool { return r == 0 || r&RoleBroker != 0 }

// Controller reports whether the node is a controller (a voter, or one to
// be added).
func (r Roles) Controller() bool { return r == 0 || r&RoleController != 0 }

func (r Roles) String() string {
	switch {
	case !r.Controller():
		return "broker"
	case !r.Broker():
		return "controller"
	}
	return "broker,controller"
}

// validateRoles checks the roles against the quorum settings, with
// Kafka's rules (KafkaConfig's validation of process.roles): a node that
// is not combined needs a quorum to talk to; a broker-only node is not a
// voter; a controller is a voter of the static quorum unless it finds the
// quorum by bootstrap servers (to be added with AddRaftVoter).
func (c *Config) validateRoles() error {
	cl := c.Cluster
	if c.Roles != 0 && c.Roles.String() != "broker,controller" && cl.Voters == "" && cl.BootstrapServers == "" {
		return errors.New("broker: if using process.roles, either controller.quorum.bootstrap.servers must contain the set of bootstrap controllers or controller.quorum.voters must contain a parseable set of controllers")
	}
	if cl.Voters == "" && cl.BootstrapServers != "" && c.ClusterID == "" {
		return errors.New("broker: controller.quorum.bootstrap.servers without controller.quorum.voters needs cluster.id (Kafka's kafka-storage format -t): the id cannot be derived from a voter list")
	}
	if cl.BootstrapServers != "" {
		if _, err := controller.ParseBootstrapServers(cl.BootstrapServers); err != nil {
			return fmt.Errorf("broker: controller.quorum.bootstrap.servers: %w", err)
		}
	}
	inVoters := false
	if cl.Voters != "" {
		voters, err := controller.ParseVoters(cl.Voters)
		if err != nil {
			return fmt.Errorf("broker: controller.quorum.voters: %w", err)
		}
		inVoters = slices.ContainsFunc(voters, func(v controller.Voter) bool { return v.ID == c.NodeID })
	}
	switch {
	case !c.Roles.Controller() && inVoters:
		return fmt.Errorf("broker: if process.roles contains just the 'broker' role, the node id %d must not be included in the set of voters controller.quorum.voters=%s", c.NodeID, cl.Voters)
	case c.Roles.Controller() && cl.Voters != "" && !inVoters && cl.BootstrapServers == "":
		return fmt.Errorf("broker: if process.roles contains the 'controller' role, the node id %d must be included in the set of voters controller.quorum.voters=%s", c.NodeID, cl.Voters)
	case c.Roles.Controller() && !c.local() && !inVoters && cl.ControllerListen == "":
		return fmt.Errorf("broker: node %d is a controller outside controller.quorum.voters: its controller listener is needed (listeners=CONTROLLER://host:port with controller.listener.names=CONTROLLER, or -controller-listen)", c.NodeID)
	}
	return nil
}

// controllerAddr returns the address this node's controller port is known
// by and, when it must be bound here (not a static voter), its listener.
// A broker-only node without a controller listener of its own listens on
// a free port of its Kafka listener's host: it announces the address
// when it joins, so the port need not be known in advance.
func (c *cluster) controllerAddr() (string, net.Listener, error) {
	if c.cfg.Cluster.Voters != "" {
		voters, err := controller.ParseVoters(c.cfg.Cluster.Voters)
		if err != nil {
			return "", nil, err
		}
		for _, v := range voters {
			if v.ID == c.cfg.NodeID {
				return v.Addr, nil, nil
			}
		}
	}
	bind := c.cfg.Cluster.ControllerListen
	if bind == "" {
		host, _, err := net.SplitHostPort(c.cfg.Listen)
		if err != nil {
			return "", nil, err
		}
		bind = net.JoinHostPort(host, "0")
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return "", nil, fmt.Errorf("controller listener: %w", err)
	}
	// The advertised host is the Kafka listener's when the bind address
	// names none (0.0.0.0, ::).
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() && c.addr != "" {
		host, _, _ = net.SplitHostPort(c.addr)
	}
	return net.JoinHostPort(host, port), ln, nil
}

// openController opens this node's member of the quorum under
// <data-dir>/controller.
func (c *cluster) openController() (*controller.Controller, error) {
	voters, err := c.voters()
	if err != nil {
		return nil, fmt.Errorf("controller voters: %w", err)
	}
	cfg := controller.Config{
		NodeID: c.cfg.NodeID, Voters: voters, Dir: filepath.Join(c.cfg.DataDir, "controller"),
		NonVoter:             !c.cfg.Roles.Controller(),
		ClusterID:            c.cfg.ClusterID,
		BrokerSessionTimeout: c.cfg.Cluster.SessionTimeout, BrokerHeartbeatInterval: c.cfg.Cluster.HeartbeatInterval,
		UncleanRecoveryTimeout: c.cfg.Cluster.UncleanRecoveryTimeout,
		DefaultPartitions:      c.cfg.NumPartitions, DefaultReplicationFactor: c.cfg.Cluster.ReplicationFactor, Logger: c.log,
		TLS: c.cfg.Cluster.TLS,
	}
	if cfg.ClusterID == "" && !c.local() {
		cfg.ClusterID = controller.ClusterIDFromVoters(voters)
	}
	if c.cfg.Cluster.BootstrapServers != "" {
		if cfg.BootstrapServers, err = controller.ParseBootstrapServers(c.cfg.Cluster.BootstrapServers); err != nil {
			return nil, err
		}
	}
	if !c.local() {
		addr, ln, err := c.controllerAddr()
		if err != nil {
			return nil, err
		}
		cfg.Addr, cfg.Listener = addr, ln
	}
	return controller.Open(cfg)
}

// startController starts a controller-only node (process.roles=controller):
// its member of the quorum and nothing else.
func startController(ctx context.Context, b *Broker) error {
	// A controller never opens the engine, so meta.properties here is a
	// broker's: its partitions would stay unserved (Kafka does not change
	// a node's roles either).
	if _, err := os.Stat(filepath.Join(b.cfg.DataDir, "meta.properties")); err == nil {
		return fmt.Errorf("broker: %s holds a broker's logs (meta.properties): process.roles=controller would leave its "+
			"partitions unserved; start it with process.roles=broker,controller (as a cluster's seed, with "+
			"controller.quorum.voters naming it alone), or give the controller an empty directory", b.cfg.DataDir)
	}
	b.cl = &cluster{cfg: &b.cfg, log: b.log}
	ctl, err := b.cl.openController()
	if err != nil {
		return err
	}
	b.cl.ctl = ctl
	b.push("controller", func(context.Context) error { return ctl.Close() })
	if b.cfg.Metrics != nil {
		// KafkaController's metrics: the active controller is one of
		// these nodes when the controllers are apart from the brokers.
		registerControllerMetrics(b.cfg.Metrics, ctl)
	}
	b.log.Info("ringlog controller started", "node_id", b.cfg.NodeID, "roles", b.cfg.Roles.String(),
		"voters", b.cfg.Cluster.Voters, "bootstrap_servers", b.cfg.Cluster.BootstrapServers)
	return nil
}

// Controller is the node's member of the metadata quorum.
func (b *Broker) Controller() *controller.Controller { return b.cl.ctl }
