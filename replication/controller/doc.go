// Package controller is ringlog's metadata quorum, the counterpart of
// Kafka's KRaft controller: github.com/hashicorp/raft (v1.7.3, with
// raft-boltdb/v2 as log and stable store) embedded in the broker, 1 or 3
// voters (a single node is a one-voter quorum running the same code). Its
// replicated state machine holds the brokers (id, listener, rack,
// registration epoch, fenced), the topics (name, 16-byte id, config
// overrides) and their partitions (replicas, ISR, leader, leader epoch,
// partition epoch), and the start of the next block of producer ids.
//
// # Nodes and the port
//
// A controller node is a voter, configured with its id and the voter list
// (ParseVoters reads Kafka's "1@host:port,2@host:port" syntax). On first
// start each static voter bootstraps raft with the whole list
// (BootstrapCluster is skipped when the directory holds raft state, so
// restarts are no-ops). Every other node (Config.NonVoter, a broker-only
// node; or a controller outside the list, found by its
// BootstrapServers) starts with no configuration, heartbeats the leader
// on the quorum RPC, and is added as a raft non-voter: an observer that
// receives and applies the log (quorum.go).
// The voter address carries raft's NetworkTransport and the package's own
// forwarding RPC on one port: the mux (mux.go) reads the first byte of each
// accepted connection; raft always opens with an RPC type (0..4), the
// forwarding client with 0xC7, the quorum RPC (membership, progress,
// DescribeQuorum: quorum.go) with 0xC8.
//
//	forwarding connection:  0xC7 | frame | frame | ...   (one request at a time)
//	frame:     length u32 (at most 4 MiB + 64) | body
//	request:   timeout ms u32 | command
//	response:  error code i16 | message | raft index u64 | payload
//
// # Commands and raft entries
//
// A write becomes a command; the same encoding is a forwarding request (as
// the caller built it) and a raft entry (as the leader completed it):
//
//	+-------------+----------+-------------------------------------+
//	| version = 1 | type u8  | fields of that type (commands.go)   |
//	+-------------+----------+-------------------------------------+
//
// integers big-endian, counts and string lengths uvarints. The state
// machine (statemachine.go) is a pure function of the previous Image, the
// entry index and the command: no clock, no randomness, no node config.
// What needs those is done by the raft leader before it proposes (leader.go):
// the topic id (random, Kafka's rules), the replica placement (placement.go:
// Kafka's round robin from a random start, rack-aware), and everything about
// liveness. The snapshot is the encoded Image (snapshot.go).
//
// # Liveness
//
// Brokers heartbeat the leader (RegisterAndHeartbeat: one goroutine, one
// ticker). Heartbeats are not written to the log: the leader keeps the
// time of each broker's last heartbeat in memory and writes FenceBroker when
// a broker was silent for longer than BrokerSessionTimeout. A new leader
// starts every session afresh, after a raft barrier so that it judges a
// current image. A fenced broker that heartbeats again is unfenced
// (UnfenceBroker).
//
// # Decisions
//
//   - The broker epoch is the raft index of the registration entry: unique
//     and growing without a counter in the state.
//   - Registering a broker that is registered and unfenced fences the old
//     incarnation first (its leaderships move, it leaves ISRs), then
//     unfences the new one: a restarted broker may have lost the unflushed
//     tail of its logs, so it must catch up and rejoin ISRs through
//     AlterPartition. KRaft instead refuses the registration until the old
//     session expires; this reaches the same state without the wait.
//   - Leader election follows KRaft's PartitionChangeBuilder (election.go,
//     which takes the choice from replication.ElectLeader and
//     replication.FencedISR, the functions the simulation of replication
//     checks): leader from the live ISR in replica order; a fenced broker
//     leaves every ISR except as its last member; the leader epoch grows only when the
//     leader changes, the partition epoch on every change; unclean election
//     only when the topic sets unclean.leader.election.enable=true (there is
//     no cluster-wide default: it would be node configuration inside the
//     state machine).
//   - Writes are retried on NOT_CONTROLLER and broken connections until the
//     caller's deadline. raft cannot tell whether an entry proposed by a
//     leader that lost leadership was committed, so a retry may find its
//     first attempt applied (CreateTopic then says TOPIC_ALREADY_EXISTS), as
//     with Kafka's own retries.
//   - Topic configs are stored as given, except the keys the controller acts
//     on (unclean.leader.election.enable); the kafka layer validates the rest
//     with the engine's parser first.
//   - Automatic preferred leader election (LeaderRebalanceInterval) moves
//     every partition it can, without Kafka's imbalance threshold.
//   - Producer ids come from the quorum in blocks of 1000
//     (AllocateProducerIDs, Kafka's AllocateProducerIds of KIP-730): the
//     state keeps the next block's start, each command takes one block for
//     the broker incarnation that names its current epoch. A broker hands
//     out ids of its block only, so no two idempotent producers share an
//     id anywhere in the cluster, and the ids of a broker's log follow it
//     through a failover. Blocks are not returned: a block taken twice by a
//     retried request, or lost with a broker's restart, is skipped.
//   - The cluster id is not in the replicated state: like Kafka's, it is
//     each broker's configuration (cluster.id), recorded in its data
//     directory by the engine. Without one, ClusterIDFromVoters derives it
//     from the voter list, so brokers started with the same list report
//     the same id.
//   - Offline replicas (KIP-858's offline log directories, per partition
//     here): a broker reports the partitions whose log it cannot serve,
//     its whole set, in its registration and in OfflineReplicas. The
//     replica leaves the ISR as a fenced broker does (not as its last
//     member), its leadership goes to the next eligible ISR member or
//     nowhere, and it neither leads (clean, unclean or preferred election)
//     nor rejoins the ISR (INELIGIBLE_REPLICA) until its broker registers
//     without it. Partitions are named by topic id: a name may be reused.
//   - Unclean recovery (KIP-966's, simplified; election.go): a broker
//     reports in its first registration where each log it recovered from
//     an unclean shutdown ends (last leader epoch, LEO). A leaderless
//     partition whose live ISR members all reported waits until every
//     replica not offline has reported (or UncleanRecoveryTimeout, after
//     which the leader logs an ElectRecovery), then the longest log leads
//     alone. So a power loss of a whole ISR under -flush never loses only
//     what the best replica lost, not what the first one back lost.
//   - Partition reassignment (KIP-455, reassign.go): replicas are the
//     target followed by the replicas leaving, with the adding and
//     removing ones recorded, until the ISR holds the whole target; that
//     change completes it in the same entry. A cancellation reverts to the
//     replicas without the adding ones.
//
// # Concurrency contract
//
// Every exported method of Controller may be called from any goroutine.
// Image and LeaderID never block. Write methods block until the entry is
// applied on this node or ctx expires. raft calls the FSM (Apply, Snapshot,
// Restore) from its one FSM goroutine, which alone publishes images (Close
// publishes none); FSMSnapshot.Persist runs on another goroutine and reads
// an immutable Image. An Image and everything reachable from it are
// read-only for everyone.
//
// # Non-obvious invariants
//
//   - A command that fails validation changes nothing but Image.Index; every
//     node rejects it the same way, so rejected entries are harmless. An
//     undecodable entry is skipped the same way, never panicked on.
//   - Image.Index is the index of the last command entry applied, not
//     raft's applied index (raft's no-op and configuration entries do not
//     reach the FSM): wait for indexes of commands only (Sync writes one).
//   - A partition's leader is live, in its ISR and not offline; an ISR
//     holds a fenced broker or an offline replica only as its single
//     member; offline replicas are replicas, in replica order (checkImage
//     asserts these on every restored snapshot, and after every entry with
//     -tags invariants).
//   - No producer id is handed out twice: the next block starts at
//     Image.NextProducerID, which only grows, and it is in the snapshot
//     (version 2; a version 1 snapshot predates the command and reads as 0).
//     A node running a binary without the command would skip its entries
//     as undecodable and diverge: every voter must know it before a broker
//     asks. The same holds for OfflineReplicas and a registration carrying
//     offline replicas (snapshot version 4): upgrade every voter before a
//     broker with an offline partition registers.
//   - A reassignment in progress has its removing replicas, sorted, as
//     the tail of Replicas and its adding ones, sorted, among the others
//     (checkReassignment). Every change of the ISR must try to complete
//     it (completeReassignment: AlterPartition, and electInto for the
//     ISRs an election sets), or a move whose target is all in sync would
//     never finish. A replica leaving Replicas bumps the leader epoch
//     (finish): without it a leader that stays would keep counting the
//     removed follower, and that follower's fetches would not be fenced.
//     Snapshot version 7 holds adding and removing replicas: upgrade every
//     voter before a reassignment is asked for (an older binary skips the
//     command as undecodable and diverges).
//   - Encodings are canonical (maps in key order, sorted brokers and topics),
//     so equal states have byte-identical snapshots.
//   - A decoder never allocates for a count the remaining bytes cannot
//     hold, and a frame's buffer grows with the bytes received, never to the
//     announced length.
//   - Close cancels the controller's context under the lock that guards
//     starting heartbeat loops, so no loop starts after Close waits for them.
//   - Raft's configuration is the one record of the quorum's membership
//     (voters and non-voters); the image's brokers are registrations, a
//     separate thing: a non-voter pruned for its silence stays registered
//     (fenced), and UnregisterBroker removes both, in two steps. Only a
//     static voter bootstraps raft: a node outside Voters that
//     bootstrapped would start a quorum of its own.
//   - A node's controller address is announced in each quorum heartbeat,
//     so a broker-only node may listen on a new free port at every start:
//     the leader moves its membership to where it is (quorum.go).
//   - A directory with raft state rejoins the configuration it stored,
//     whatever Voters says: a local quorum's directory opens networked only
//     as the seed (its own id the one voter in Voters, not a non-voter),
//     and its voter's address stays the in-memory one until the seed leads
//     and moves it; every other mismatch between the stored configuration
//     and the start is refused (bootstrap.go), because each ends with one
//     quorum's log replacing another's.
package controller
