package broker

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/engine/txn"
	"ringlog/ioring"
	"ringlog/replication/controller"
)

// Config is everything a broker is configured with. cmd/ringlog fills it
// from flags and server.properties (Kafka's names are given beside each
// field); tests fill it directly. DefaultConfig has Kafka's defaults.
type Config struct {
	// Listen is the host:port of the Kafka listener (listeners); port 0
	// takes a free port, which Broker.Addr reports.
	Listen string
	// Advertise is the host:port clients are told (advertised.listeners);
	// empty: Listen's host and the port actually bound.
	Advertise string
	// InterBrokerName names the Listen listener (inter.broker.listener.name;
	// empty: PLAINTEXT). Followers fetch from it: a replica fetch is served
	// there only (see InterBroker and SuperUsers).
	InterBrokerName string
	// InterBroker is the inter-broker listener's security: its Protocol
	// (empty: PLAINTEXT), TLS, SASL mechanisms and users, as for
	// Listeners; its Name, Addr and Advertise are InterBrokerName, Listen
	// and Advertise, and are ignored here. On PLAINTEXT every client of
	// the listener may fetch as a replica (a trusted network, see
	// docs/security.md); on the other protocols only SuperUsers may.
	InterBroker Listener
	// InterBrokerClient is this broker as a client of the others'
	// inter-broker listeners (its followers' fetch connections): TLS when
	// the listener's protocol is SSL or SASL_SSL, SASL credentials when it
	// is SASL_PLAINTEXT or SASL_SSL.
	InterBrokerClient InterBrokerClient
	// SuperUsers is super.users: the principals ("User:<name>") that may
	// act as brokers (Kafka's CLUSTER_ACTION) on an authenticating
	// inter-broker listener and, with Authorizer, do everything.
	SuperUsers []string
	// Authorizer turns ACLs on (authorizer.class.name set): every request
	// is checked against the ACLs of the metadata quorum. Off, every
	// principal may do everything, as in Kafka without an authorizer.
	Authorizer bool
	// AllowEveryoneIfNoACL is allow.everyone.if.no.acl.found: with the
	// authorizer on, a resource no ACL names is open to everyone.
	AllowEveryoneIfNoACL bool
	// BootstrapScram are SCRAM credentials written into the metadata
	// quorum at the broker's first start, where the quorum lacks them
	// (Kafka's kafka-storage format --add-scram; ringlog -add-scram).
	BootstrapScram []ScramBootstrap
	// Listeners are the broker's other listeners, each with its own
	// security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).
	Listeners []Listener
	// DataDir holds the partition logs and the quorum (the first of
	// log.dirs); LogDirs are the other directories of log.dirs, which hold
	// partition logs only (JBOD).
	DataDir string
	LogDirs []string
	// MoveHook is engine.Config's: tests stop a replica's move between
	// log directories at a step with it. Nil in the binary.
	MoveHook func(engine.TP, engine.MoveStep)
	// NodeID is node.id; Rack is broker.rack; ClusterID is cluster.id
	// (empty: derived from the voters in a cluster, else the data
	// directory's own).
	NodeID    int32
	Rack      string
	ClusterID string
	// Shards is the engine's shard count (num.io.threads; 0: GOMAXPROCS);
	// NetworkLoops the event loops (num.network.threads; 0: GOMAXPROCS).
	Shards       int
	NetworkLoops int
	// IO chooses the I/O path (ringlog.io): ModePortable forces the
	// portable disk and network paths.
	IO ioring.Mode
	// Writes says how appends reach the disk (ringlog.writes, -writes;
	// engine.Config.Writes): DefaultConfig's engine.WritesAuto writes
	// with O_DIRECT when the disk path is io_uring.
	Writes engine.Writes
	// TailCacheBytes bounds the direct-written partitions' tail caches
	// together (ringlog.tail.cache.bytes; engine.Config.TailCacheBytes;
	// 0: its default).
	TailCacheBytes int64
	// Network chooses netpoll's implementation (netpoll.IOGnet, IOUring:
	// connections on the engine's shards' rings, or on netpoll's own
	// io_uring loops where the shards own no rings; IOUringShards, the
	// same that warns when they own none; IOUringLoops, netpoll's own
	// io_uring loops; IOPortable; see netpoll.Config.IO); "" follows IO:
	// portable with ModePortable, else uring (gnet where the kernel lacks
	// what it needs).
	Network string
	// AutoCreateTopics is auto.create.topics.enable; AutoCreateMax bounds
	// the topics one Metadata request may create (0: 100).
	AutoCreateTopics bool
	AutoCreateMax    int
	// NumPartitions is num.partitions, for auto-created topics and
	// CreateTopics without a count.
	NumPartitions int32
	// MaxPartitions is ringlog.max.partitions, the most partitions the
	// broker holds (0: engine.DefaultMaxPartitions, -1: no bound).
	MaxPartitions int
	// MaxFrameBytes is socket.request.max.bytes; MaxRequestBytes bounds
	// every request but Produce (0: kafka's default).
	MaxFrameBytes   int32
	MaxRequestBytes int
	// FetchMaxBytes is fetch.max.bytes and ReplicaFetchMaxBytes
	// replica.fetch.response.max.bytes: the most a Fetch response carries
	// (0: Kafka's 55 MiB and 10 MiB).
	FetchMaxBytes        int32
	ReplicaFetchMaxBytes int32
	// FetchSessionSlots is max.incremental.fetch.session.cache.slots (0:
	// Kafka's 1000; -1: no fetch sessions) and FetchSessionEviction
	// min.incremental.fetch.session.eviction.ms (0: 2 minutes), KIP-227.
	FetchSessionSlots    int
	FetchSessionEviction time.Duration
	// QuotaWindowNum and QuotaWindow are quota.window.num and
	// quota.window.size.seconds: client quotas are measured over that
	// many windows of that length (0: Kafka's 11 of 1 s).
	QuotaWindowNum int
	QuotaWindow    time.Duration
	// ControllerQuotaWindowNum and ControllerQuotaWindow are
	// controller.quota.window.num and controller.quota.window.size.seconds:
	// a controller_mutation_rate quota's burst is its rate times their
	// span (0: Kafka's 11 of 1 s).
	ControllerQuotaWindowNum int
	ControllerQuotaWindow    time.Duration
	// MaxConnectionCreationRate is max.connection.creation.rate: the
	// connections per second the broker accepts (KIP-612); over it the
	// acceptor waits. 0 means none (Kafka's default, Int.MaxValue).
	MaxConnectionCreationRate float64
	// Connections bounds what clients may hold, on every listener:
	// max.connections, max.connections.per.ip and its overrides,
	// connections.max.idle.ms, queued.max.request.bytes (zero values:
	// netpoll's defaults; see netpoll.Config).
	Connections ConnectionLimits
	// RetentionCheckInterval is log.retention.check.interval.ms;
	// ProducerIDExpiration is producer.id.expiration.ms.
	RetentionCheckInterval time.Duration
	ProducerIDExpiration   time.Duration
	Cleaner                engine.CleanerConfig
	Groups                 group.Config
	// Txns is the transaction coordinator's configuration (its hooks are
	// the broker's).
	Txns txn.Config
	// Topic is the default configuration of topics (log.* settings).
	Topic   engine.TopicConfig
	Cluster ClusterConfig
	// Roles is process.roles (the zero value: broker,controller).
	Roles Roles
	// Logger receives the broker's log; nil: slog.Default().
	Logger *slog.Logger
	// Metrics, when set, receives the broker's metrics (requests, network,
	// partition offsets).
	Metrics prometheus.Registerer
}

// ConnectionLimits are the bounds on what clients' connections may hold.
type ConnectionLimits struct {
	// MaxConnections is max.connections (0: netpoll's 10,000).
	MaxConnections int
	// MaxPerIP is max.connections.per.ip (0: no bound); PerIPOverrides
	// is max.connections.per.ip.overrides, by IP address.
	MaxPerIP       int
	PerIPOverrides map[string]int
	// IdleMax is connections.max.idle.ms (0: Kafka's 10 minutes; negative:
	// never).
	IdleMax time.Duration
	// QueuedRequestBytes is queued.max.request.bytes: request bytes read
	// and not yet answered, over all connections (0 or -1: no bound, as
	// Kafka's default).
	QueuedRequestBytes int64
}

// ClusterConfig is the broker's part in a cluster. Without Voters the
// broker is the only voter of a local quorum: the same metadata,
// replication and coordination code, one replica per partition.
type ClusterConfig struct {
	// Voters is controller.quorum.voters: "id@host:port,..." of each
	// voter's controller listener, this node's included when it is a
	// controller of the static quorum.
	Voters string
	// BootstrapServers is controller.quorum.bootstrap.servers:
	// "host:port,..." of controllers a node asks to join the quorum when
	// it is no static voter (any one of them names the leader).
	BootstrapServers string
	// ControllerListen is the host:port of this node's controller
	// listener when it is not in Voters (a controller to be added with
	// AddRaftVoter, or a broker-only node, where it defaults to a free
	// port on Listen's host).
	ControllerListen string
	// LagTimeMax is replica.lag.time.max.ms; SessionTimeout is
	// broker.session.timeout.ms; HeartbeatInterval is
	// broker.heartbeat.interval.ms.
	LagTimeMax        time.Duration
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	// UncleanRecoveryTimeout is unclean.recovery.timeout.ms (KIP-966): how
	// long a partition whose whole ISR restarted from an unclean shutdown
	// waits for its other replicas before the longest log among those back
	// leads (0: the controller's default, 2 minutes).
	UncleanRecoveryTimeout time.Duration
	// ReplicationFactor is default.replication.factor.
	ReplicationFactor int16
	// FetchSlots is ringlog.replica.fetch.slots: requests in flight per
	// follower stream (0: the fetcher's default).
	FetchSlots int
	// TLS runs the controller port (raft and the forwarding RPC) over
	// mutual TLS: the controller listener's SSL settings, each node's
	// certificate CN=node-<id> (controller.TLSConfig).
	TLS *controller.TLSConfig
}

// DefaultConfig is Kafka's defaults, with the listener and data directory
// the README promises (127.0.0.1:9092, ./data).
func DefaultConfig() Config {
	return Config{
		Listen:                 "127.0.0.1:9092",
		DataDir:                "./data",
		IO:                     ioring.ModeAuto,
		Writes:                 engine.WritesAuto,
		AutoCreateTopics:       true,
		NumPartitions:          1,
		MaxFrameBytes:          100 << 20,
		RetentionCheckInterval: 5 * time.Minute,
		ProducerIDExpiration:   24 * time.Hour,
		Groups:                 group.DefaultConfig(),
		Txns:                   txn.DefaultConfig(),
		Topic:                  engine.DefaultTopicConfig(),
		Cluster: ClusterConfig{LagTimeMax: 30 * time.Second, SessionTimeout: 9 * time.Second,
			HeartbeatInterval: 2 * time.Second, ReplicationFactor: 1},
	}
}

// local reports whether the broker is its own one-voter quorum.
func (c *Config) local() bool { return c.Cluster.Voters == "" && c.Cluster.BootstrapServers == "" }

// advertised is the host and port clients are told.
func (c *Config) advertised() (string, int32, error) {
	adv := c.Advertise
	if adv == "" {
		adv = c.Listen
	}
	host, portStr, err := net.SplitHostPort(adv)
	if err != nil {
		return "", 0, fmt.Errorf("broker: advertised address %q: %w", adv, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("broker: advertised port %q", portStr)
	}
	return host, int32(port), nil
}
