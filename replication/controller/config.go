package controller

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Voter is one member of the quorum.
type Voter struct {
	ID int32
	// Addr is the host:port of its controller listener (raft and
	// forwarding RPC). The one voter of a local quorum has none.
	Addr string
}

// LocalQuorum is the quorum of a broker that runs alone: node id is its
// only voter, and as no other node ever talks to it, raft runs over an
// in-memory transport and nothing listens. It is the same state machine,
// log and code path as any other quorum (a single broker is a one-voter
// quorum, as a KRaft broker in combined mode is), without a port.
func LocalQuorum(id int32) []Voter { return []Voter{{ID: id}} }

// local reports whether cfg is a local quorum.
func (cfg *Config) local() bool { return len(cfg.Voters) == 1 && cfg.Voters[0].Addr == "" }

// localElectionTimeout is the election timeout of a local quorum: its only
// voter elects itself without a message, so waiting longer only delays
// the start.
const localElectionTimeout = 20 * time.Millisecond

// Config configures a controller node.
type Config struct {
	// NodeID is this node's id.
	NodeID int32
	// Voters is the static quorum (controller.quorum.voters): 1 or 3 (any
	// odd count works) voters, the same list on every node. It bootstraps
	// the raft configuration on a voter's first start only; afterwards the
	// voter set is raft's, changed by AddVoter and RemoveVoter. It may be
	// empty when BootstrapServers is set.
	Voters []Voter
	// NonVoter is set on a node whose process.roles lack controller
	// (process.roles=broker): it never votes. The leader adds it as a raft
	// non-voter, an observer that receives the metadata log and applies it
	// as every node does. A controller (NonVoter unset) votes when it is
	// in Voters or was added by AddVoter, and observes until then.
	NonVoter bool
	// Addr is the host:port this node's controller port listens on and is
	// known by when it is not in Voters (a broker-only node, or a
	// controller to be added as a voter). A broker announces it when it
	// joins, so port 0 (a free port) is fine there.
	Addr string
	// BootstrapServers are controller addresses
	// (controller.quorum.bootstrap.servers) a node that is not in Voters
	// asks to join: any one of them answers with the leader's address.
	BootstrapServers []string
	// ClusterID is the node's cluster.id: the leader refuses a node that
	// joins with another one (INCONSISTENT_CLUSTER_ID). Empty: unchecked.
	ClusterID string
	// Dir holds the raft log and stable store (raft.db) and snapshots.
	Dir string
	// Listener, if set, is used instead of listening on this node's voter
	// address (tests pass a listener on port 0). Close closes it.
	Listener net.Listener
	// TLS, when set, runs the controller port over mutual TLS: every
	// node's certificate is CN=node-<id> (NodeCertName), signed by the CA
	// the others trust (tls.go). Without it the port trusts its network.
	TLS *TLSConfig

	// BrokerSessionTimeout is Kafka's broker.session.timeout.ms: a broker
	// that has not heartbeated for this long is fenced. Default 9s.
	BrokerSessionTimeout time.Duration
	// BrokerHeartbeatInterval is Kafka's broker.heartbeat.interval.ms: how
	// often RegisterAndHeartbeat heartbeats. Default 2s.
	BrokerHeartbeatInterval time.Duration
	// LeaderRebalanceInterval is how often the raft leader moves leadership
	// back to preferred replicas (Kafka's auto.leader.rebalance.enable with
	// leader.imbalance.check.interval.seconds, without the imbalance
	// threshold). Default 300s; negative disables.
	LeaderRebalanceInterval time.Duration
	// UncleanRecoveryTimeout is how long a partition whose whole ISR
	// restarted from an unclean shutdown waits for its other replicas to
	// come back and report their logs before the longest log among those
	// that did is elected (KIP-966's unclean.recovery.timeout.ms;
	// election.go). Default 2 minutes.
	UncleanRecoveryTimeout time.Duration

	// ElectionTimeout is raft's heartbeat and election timeout (the leader
	// lease is half). Default 1s, Kafka's controller.quorum.election.timeout.ms:
	// 500ms made a leader on a saturated 2-core machine step down (its lease
	// expired before its heartbeats went out).
	ElectionTimeout time.Duration
	// SnapshotThreshold is how many log entries raft writes between
	// snapshots; as many are kept behind the snapshot for slow followers.
	// Default 1024.
	SnapshotThreshold uint64
	// SnapshotInterval is how often raft checks the threshold. Default 10s.
	SnapshotInterval time.Duration

	// DefaultPartitions and DefaultReplicationFactor answer a CreateTopic
	// with -1 (Kafka's num.partitions and default.replication.factor).
	// Default 1 each.
	DefaultPartitions        int32
	DefaultReplicationFactor int16

	// Logger receives the controller's log and raft's at WARN and above.
	// Default slog.Default().
	Logger *slog.Logger
}

func (cfg *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.BrokerSessionTimeout, 9*time.Second)
	def(&cfg.BrokerHeartbeatInterval, 2*time.Second)
	def(&cfg.LeaderRebalanceInterval, 300*time.Second)
	def(&cfg.UncleanRecoveryTimeout, 2*time.Minute)
	if cfg.local() {
		def(&cfg.ElectionTimeout, localElectionTimeout)
	}
	def(&cfg.ElectionTimeout, time.Second)
	def(&cfg.SnapshotInterval, 10*time.Second)
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = 1024
	}
	if cfg.DefaultPartitions == 0 {
		cfg.DefaultPartitions = 1
	}
	if cfg.DefaultReplicationFactor == 0 {
		cfg.DefaultReplicationFactor = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
}

func (cfg *Config) validate() error {
	if cfg.Dir == "" {
		return fmt.Errorf("controller: Dir is empty")
	}
	if len(cfg.Voters) == 0 && len(cfg.BootstrapServers) == 0 {
		return fmt.Errorf("controller: neither voters nor bootstrap servers")
	}
	seen := map[int32]bool{}
	for _, v := range cfg.Voters {
		if seen[v.ID] || v.ID < 0 {
			return fmt.Errorf("controller: voter id %d negative or listed twice", v.ID)
		}
		seen[v.ID] = true
		if cfg.local() {
			break
		}
		if _, _, err := net.SplitHostPort(v.Addr); err != nil {
			return fmt.Errorf("controller: voter %d: %w", v.ID, err)
		}
	}
	if seen[cfg.NodeID] && cfg.NonVoter {
		return fmt.Errorf("controller: node id %d is in the voters but no controller", cfg.NodeID)
	}
	if !seen[cfg.NodeID] {
		if cfg.local() {
			return fmt.Errorf("controller: node id %d is not the local quorum's voter", cfg.NodeID)
		}
		if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
			return fmt.Errorf("controller: node %d is no static voter and has no address of its own: %w", cfg.NodeID, err)
		}
	}
	for _, a := range cfg.BootstrapServers {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("controller: bootstrap server: %w", err)
		}
	}
	if cfg.BrokerHeartbeatInterval >= cfg.BrokerSessionTimeout {
		return fmt.Errorf("controller: heartbeat interval %v must be below the session timeout %v",
			cfg.BrokerHeartbeatInterval, cfg.BrokerSessionTimeout)
	}
	if cfg.ElectionTimeout < 10*time.Millisecond {
		return fmt.Errorf("controller: election timeout %v is below 10ms", cfg.ElectionTimeout)
	}
	return nil
}

func (cfg *Config) voterAddr(id int32) string {
	for _, v := range cfg.Voters {
		if v.ID == id {
			return v.Addr
		}
	}
	return ""
}

// staticVoter reports whether this node is in Voters.
func (cfg *Config) staticVoter() bool {
	return slices.ContainsFunc(cfg.Voters, func(v Voter) bool { return v.ID == cfg.NodeID })
}

// ownAddr is the address this node's controller port is known by.
func (cfg *Config) ownAddr() string {
	if a := cfg.voterAddr(cfg.NodeID); a != "" {
		return a
	}
	return cfg.Addr
}

// ParseBootstrapServers parses controller.quorum.bootstrap.servers:
// "host:port,host:port".
func ParseBootstrapServers(s string) ([]string, error) {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(part); err != nil {
			return nil, fmt.Errorf("controller: bootstrap server %q: %w", part, err)
		}
		out = append(out, part)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("controller: bootstrap servers %q name no address", s)
	}
	return out, nil
}

// ParseVoters parses Kafka's controller.quorum.voters syntax:
// "1@host:port,2@host:port,3@host:port".
func ParseVoters(s string) ([]Voter, error) {
	var vs []Voter
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		idStr, addr, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("controller: voter %q is not id@host:port", part)
		}
		id, err := strconv.ParseInt(idStr, 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("controller: voter %q: bad id", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("controller: voter %q: %w", part, err)
		}
		if slices.ContainsFunc(vs, func(v Voter) bool { return v.ID == int32(id) }) {
			return nil, fmt.Errorf("controller: voter id %d listed twice", id)
		}
		vs = append(vs, Voter{ID: int32(id), Addr: addr})
	}
	return vs, nil
}

// ClusterIDFromVoters derives a cluster id from the quorum, for brokers
// started without cluster.id: the first 16 bytes of SHA-256 over
// "ringlog-cluster-id/1" and the voters as "id@host:port" sorted by id and
// joined by commas, in Kafka's Uuid form (unpadded base64url, 22
// characters, never starting with '-'). Brokers given the same voters (ids
// and addresses spelled alike, in any order) derive the same id, as
// Kafka's brokers formatted with one cluster.id report one id. A quorum
// whose addresses change gets another id: give such a cluster a cluster.id.
func ClusterIDFromVoters(voters []Voter) string {
	vs := slices.Clone(voters)
	slices.SortFunc(vs, func(a, b Voter) int { return int(a.ID) - int(b.ID) })
	h := sha256.New()
	h.Write([]byte("ringlog-cluster-id/1"))
	for i, v := range vs {
		if i > 0 {
			h.Write([]byte{','})
		}
		fmt.Fprintf(h, "%d@%s", v.ID, v.Addr)
	}
	var id [16]byte
	copy(id[:], h.Sum(nil))
	// Kafka's Uuid.randomUuid redraws an id whose base64 starts with '-'
	// (command-line tools take it for a flag); a derived id cannot redraw,
	// so its top bit is cleared instead ('-' is 62, 0b111110).
	if id[0]>>2 == 62 {
		id[0] &^= 0x80
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}
