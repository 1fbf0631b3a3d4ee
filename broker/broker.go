package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/engine/txn"
	"ringlog/internal/acl"
	"ringlog/ioring"
	"ringlog/kafka"
	"ringlog/netpoll"
	"ringlog/replication/fetcher"
)

// Broker is one running broker: its engine, its part in the (possibly
// local) cluster, its group coordinator and its Kafka listener.
type Broker struct {
	cfg    Config
	log    *slog.Logger
	addr   string // the listener's bound address
	eng    *engine.Core
	cl     *cluster
	groups *group.Coordinator
	txns   *txn.Coordinator
	srv    *kafka.Server
	net    *netpoll.Server
	others []namedServer // the listeners besides the inter-broker one
	// connLimit paces the listeners' new connections (KIP-612);
	// connLimitInter the inter-broker listener's, exempt from the broker rate.
	connLimit, connLimitInter netpoll.ConnLimiter

	// stack holds what Start opened, in order; Close (or a failed Start)
	// closes it in reverse.
	stack  []closer
	closed atomic.Bool

	failedOnce sync.Once
	failed     chan error // Failed's
}

// closer is one step of the shutdown.
type closer struct {
	name string
	fn   func(context.Context) error
}

func (b *Broker) push(name string, fn func(context.Context) error) {
	b.stack = append(b.stack, closer{name, fn})
}

// unwind closes what is on the stack, last opened first.
func (b *Broker) unwind(ctx context.Context) error {
	var errs []error
	for i := len(b.stack) - 1; i >= 0; i-- {
		if err := b.stack[i].fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("broker: close %s: %w", b.stack[i].name, err))
		}
	}
	b.stack = nil
	return errors.Join(errs...)
}

// Start opens a broker: the engine recovers its logs, the broker joins
// its quorum (the local one when Cluster.Voters is empty) and catches up
// with it, the group coordinator starts, and last the listener binds, so
// that clients find the broker ready or not at all (a connection refused is
// retried by every client; one accepted and closed is not, by all). ctx
// bounds the start: a quorum that cannot be reached waits until ctx ends.
// A Listen port of 0 takes a free port, chosen before the start so that the
// broker can register its address; if another process takes it meanwhile
// the start fails with an error wrapping syscall.EADDRINUSE.
func Start(ctx context.Context, cfg Config) (_ *Broker, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &Broker{cfg: cfg, log: cfg.Logger}
	defer func() {
		if err != nil {
			b.unwind(context.Background())
		}
	}()
	if err := b.cfg.validateRoles(); err != nil {
		return nil, err
	}
	if !cfg.Roles.Broker() {
		if err := startController(ctx, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	if b.cfg.Listen, err = freePort(cfg.Listen); err != nil {
		return nil, err
	}
	advHost, advPort, err := b.cfg.advertised()
	if err != nil {
		return nil, err
	}
	advertise := net.JoinHostPort(advHost, strconv.Itoa(int(advPort)))
	if err := b.cfg.validateListeners(); err != nil {
		return nil, err
	}
	for _, s := range cfg.BootstrapScram {
		if err := s.check(); err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
	}
	listeners, err := b.resolveListeners(advertise)
	if err != nil {
		return nil, err
	}

	b.cl = newCluster(&b.cfg, advertise, listeners)
	clusterID, err := b.cl.clusterID()
	if err != nil {
		return nil, err
	}
	b.eng, err = engine.OpenCore(engine.Config{
		Dir: cfg.DataDir, LogDirs: cfg.LogDirs, MoveHook: cfg.MoveHook, Shards: cfg.Shards, IO: cfg.IO, Writes: cfg.Writes, TailCacheBytes: cfg.TailCacheBytes, Topic: cfg.Topic, NumPartitions: cfg.NumPartitions, MaxPartitions: cfg.MaxPartitions,
		RetentionCheckInterval: cfg.RetentionCheckInterval, ProducerIDExpiration: cfg.ProducerIDExpiration,
		Cleaner: cfg.Cleaner, NodeID: cfg.NodeID, Logger: cfg.Logger, ClusterID: clusterID,
		// Producer ids come from the quorum, in blocks per incarnation.
		ProducerIDBlock: b.cl.producerIDBlock,
		OnAppended:      b.cl.node.OnAppended,
		// A partition whose disk fails is reported to the quorum.
		OnOffline: b.cl.node.OnOffline,
		// On io_uring the shards own their rings, whatever the network:
		// their rounds overlap there (a partition's appends are written
		// while other partitions' writes are in flight). Connections go
		// on those rings on the io_uring network path (-net uring, the
		// default there, or uring-shards; not uring-loops).
		RingOwners: true,
	})
	if err != nil {
		return nil, err
	}
	b.push("engine", func(context.Context) error { return b.eng.Close() })
	if err := b.cl.start(b.eng); err != nil {
		return nil, err
	}
	b.push("cluster", func(context.Context) error { return b.cl.close() })
	if err := b.cl.waitReady(ctx); err != nil {
		return nil, err
	}
	if err := b.bootstrapScram(ctx); err != nil {
		return nil, err
	}

	gcfg := cfg.Groups
	gcfg.Logger = cfg.Logger
	gcfg.Authorizing = cfg.Authorizer
	// __consumer_offsets is the cluster's: created through the controller
	// when first needed, its partitions coordinated by their leaders.
	gcfg.OffsetsTopicPartitions = b.cl.offsetsPartitions(gcfg.OffsetsTopicPartitions)
	if b.groups, err = group.Start(b.eng, gcfg); err != nil {
		return nil, err
	}
	b.push("groups", func(context.Context) error { b.groups.Close(); return nil })
	b.cl.hostGroups(b.groups)

	// The transaction coordinator, on __transaction_state as the group
	// coordinator is on __consumer_offsets; its markers reach other
	// brokers over the inter-broker listener with this broker's client
	// side of it.
	var fetchSec fetcher.Config
	b.cfg.fetchSecurity(&fetchSec)
	markers := kafka.NewMarkerSender(kafka.MarkerSenderConfig{Engine: b.eng, Node: b.cl.node, Groups: b.groups,
		TLS: fetchSec.TLS, TLSFor: fetchSec.TLSFor, SASL: fetchSec.SASL, Logger: cfg.Logger})
	b.push("transaction markers", func(context.Context) error { markers.Close(); return nil })
	tcfg := cfg.Txns
	tcfg.Logger = cfg.Logger
	tcfg.Partitions = b.cl.topicPartitions(txn.StateTopic, tcfg.Partitions)
	tcfg.AllocateProducerID = b.eng.AllocateProducerID
	tcfg.OffsetsPartitionFor = b.groups.PartitionOf
	tcfg.Markers = markers
	if b.txns, err = txn.Start(b.eng, tcfg); err != nil {
		return nil, err
	}
	b.push("transactions", func(context.Context) error { b.txns.Close(); return nil })
	b.cl.hostTxns(b.txns)

	var metrics *kafka.Metrics
	if cfg.Metrics != nil {
		metrics = kafka.NewMetrics(cfg.Metrics)
		registerEngineMetrics(cfg.Metrics, b.eng)
		registerClusterMetrics(cfg.Metrics, b.cl.node, b.cl.ctl, b.eng)
		registerGroupLagMetrics(cfg.Metrics, b.groups, b.eng)
	}
	var authz *acl.Authorizer
	if cfg.Authorizer {
		node := b.cl.node
		authz = acl.NewAuthorizer(cfg.SuperUsers, cfg.AllowEveryoneIfNoACL, func() *acl.Set { return node.Image().ACLs() })
	}
	b.srv = kafka.NewServer(kafka.Config{
		NodeID: cfg.NodeID, AdvertisedHost: advHost, AdvertisedPort: advPort, Rack: cfg.Rack,
		AutoCreateTopics: cfg.AutoCreateTopics, AutoCreateMax: cfg.AutoCreateMax, MaxRequestBytes: cfg.MaxRequestBytes,
		FetchMaxBytes: cfg.FetchMaxBytes, ReplicaFetchMaxBytes: cfg.ReplicaFetchMaxBytes,
		FetchSessionSlots: cfg.FetchSessionSlots, FetchSessionEviction: cfg.FetchSessionEviction,
		QuotaWindowNum: cfg.QuotaWindowNum, QuotaWindow: cfg.QuotaWindow,
		ControllerQuotaWindowNum: cfg.ControllerQuotaWindowNum, ControllerQuotaWindow: cfg.ControllerQuotaWindow,
		Logger: cfg.Logger, Metrics: metrics, Groups: b.groups, Txns: b.txns, Markers: markers, Node: b.cl.node, SuperUsers: cfg.SuperUsers,
		Authorizer: authz,
	}, b.eng)
	lim := cfg.Connections
	base := netpoll.Config{Portable: cfg.IO == ioring.ModePortable, IO: cfg.Network, Loops: cfg.NetworkLoops,
		MaxFrameBytes: cfg.MaxFrameBytes, Logger: cfg.Logger, MaxConns: lim.MaxConnections,
		MaxConnsPerIP: lim.MaxPerIP, MaxConnsPerIPOverrides: lim.PerIPOverrides, IdleTimeout: lim.IdleMax,
		MaxQueuedRequestBytes: max(lim.QueuedRequestBytes, 0)}
	switch {
	case cfg.Network == netpoll.IOUringShards:
		// Each listener's connections go on the shards' rings; netpoll
		// falls back to loops of its own without owners.
		base.Owners = b.eng.RingOwners()
		if base.Owners == nil {
			b.log.Warn("connections cannot go on the shards' rings; io_uring loops of netpoll's own serve them", "reason", b.eng.RingOwnersWhy())
		}
	case cfg.Network == netpoll.IOUring || (cfg.Network == "" && cfg.IO != ioring.ModePortable):
		// The io_uring network path (the default): on the shards' rings
		// where they own some, as -net uring-shards; netpoll's own
		// loops otherwise, with the reason at start.
		base.Owners = b.eng.RingOwners()
		if base.Owners == nil && b.eng.RingOwnersWhy() != "" {
			b.log.Info("connections on io_uring loops of netpoll's own: the shards own no rings", "reason", b.eng.RingOwnersWhy())
		}
	}
	b.connLimit, b.connLimitInter = b.srv.ConnLimiters(cfg.MaxConnectionCreationRate)
	inter := b.cfg.interBrokerListener()
	inter.Addr = b.cfg.Listen
	ns, err := b.listen(base, inter, advertise, true)
	if err != nil {
		return nil, err
	}
	b.net, b.addr = ns, ns.Addr().String()
	b.push("network", ns.Close)
	if err := b.listenOthers(base, listeners); err != nil {
		return nil, err
	}
	if cfg.Metrics != nil {
		registerNetMetrics(cfg.Metrics, ns)
	}
	b.log.Info("ringlog started", "listen", b.addr, "advertise", advertise, "data_dir", cfg.DataDir,
		"node_id", cfg.NodeID, "cluster_id", b.eng.ClusterID(), "io", b.eng.IOChoice().Kind, "io_reason", b.eng.IOChoice().Reason,
		"network", ns.IO(), "flush", cfg.Topic.Log.Flush, "writes", b.eng.Writes(),
		"portable_disk", b.eng.IOChoice().Kind == ioring.Portable)
	return b, nil
}

// freePort returns addr with a free port in place of port 0 (addr itself
// otherwise).
func freePort(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("broker: listen address %q: %w", addr, err)
	}
	if port != "0" {
		return addr, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("broker: listen on %s: %w", addr, err)
	}
	defer ln.Close()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return net.JoinHostPort(host, port), nil
}

// Close stops the broker: a cluster member hands its leaderships over
// first (controlled shutdown), parked requests are answered, the network
// drains what is in flight (bounded by ctx), then replication, the quorum
// and the engine close; the logs are flushed and marked cleanly shut down.
// Close is idempotent.
func (b *Broker) Close(ctx context.Context) error {
	if b.closed.Swap(true) {
		return nil
	}
	if b.eng == nil {
		// A controller-only node: its quorum member is all there is.
		return b.unwind(ctx)
	}
	// Leaderships first, while clients can still be told where they went
	// (NOT_LEADER_OR_FOLLOWER, then Metadata naming the new leaders).
	b.cl.handOver()
	// Parked long-poll fetches are answered now rather than after their
	// max_wait_ms, and the coordinator answers its parked joins and syncs,
	// so that the network can drain at once; then the stack: network,
	// coordinator (closed already), replication and quorum, engine.
	b.srv.StopLongPolls()
	b.groups.Close()
	b.txns.Close()
	return b.unwind(ctx)
}

// Addr is the address the Kafka listener is bound to.
func (b *Broker) Addr() string { return b.addr }

// Engine is the broker's engine (its partitions, for metrics and tests).
func (b *Broker) Engine() *engine.Core { return b.eng }

// Groups is the broker's group coordinator.
func (b *Broker) Groups() *group.Coordinator { return b.groups }

// Txns is the broker's transaction coordinator.
func (b *Broker) Txns() *txn.Coordinator { return b.txns }

// Server is the broker's Kafka protocol handler.
func (b *Broker) Server() *kafka.Server { return b.srv }

// Network is the broker's listener (its counters: Stats).
func (b *Broker) Network() *netpoll.Server { return b.net }
