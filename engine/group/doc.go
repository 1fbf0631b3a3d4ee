// Package group is ringlog's group coordinator for Kafka's classic group
// protocol: consumers (and any other client of JoinGroup, such as Kafka
// Connect) form groups, a leader they elect assigns the partitions, the
// coordinator relays its assignment, fences stale members, and keeps the
// groups' committed offsets. It is Kafka-specific by nature and speaks in
// kmsg request and response types; the engine knows nothing of it (it
// only offers the hooks this package runs on: OnShard, AppendOnShard,
// ReadAll and EnsureTopic).
//
// # State on shards
//
// A group lives in one partition of the internal topic __consumer_offsets,
// chosen as Kafka chooses it: abs(Java hashCode(group id)) % partitions
// (offsets.topic.num.partitions, 50). Its in-memory state, its timers'
// effects and its writes all happen on the goroutine of the shard that
// owns that partition: every API call runs its work through
// engine.OnShard, writes go through engine.AppendOnShard from there, and
// answers are sent from the append's done callback, on the same goroutine.
// So a group's state and its log are touched by one goroutine and take no
// lock, and a shard never blocks on a group (a JoinGroup parked for a
// whole rebalance is a stored reply function, not a waiting goroutine).
//
// # The classic protocol, as Kafka's GroupCoordinator runs it
//
//	              join                    every member rejoined,
//	Empty ───────────────► Preparing ──── or the rebalance timeout ────► Completing
//	  ▲                    Rebalance ◄──────── join, leave, expiry ─────── Rebalance
//	  │                      │   ▲                                            │
//	  └── nobody rejoined ───┘   │                                            │ leader's SyncGroup,
//	                             │                                            │ group written
//	                             └──── join (a new member, the leader, ◄──── Stable
//	                                   new metadata), leave, expiry
//
// A generation starts when the join phase completes: every member that
// rejoined gets the generation, the leader gets the members' metadata,
// and the leader's assignment is written to the log before anyone gets
// its part. Requests from an older generation are ILLEGAL_GENERATION,
// from a member that is not there UNKNOWN_MEMBER_ID, from a replaced
// static member FENCED_INSTANCE_ID.
//
// # Timers
//
// Session timeouts, rebalance timeouts, the initial rebalance delay
// (KIP-134), the wait for SyncGroup and member ids handed out with
// MEMBER_ID_REQUIRED (KIP-394) are time.AfterFunc timers whose callback
// only queues work to the shard with OnShard; there the work first checks
// a sequence number or generation it captured, so that a timer that lost
// a race with the state it was armed for does nothing. A member's session
// timer is armed once and re-armed when it fires before the deadline that
// heartbeats moved, rather than reset on every heartbeat.
//
// # Records in __consumer_offsets (Kafka's formats)
//
//	offset commit    key   int16 version (1) | string group | string topic | int32 partition
//	                 value int16 version (3) | int64 offset | int32 leader epoch |
//	                       string metadata | int64 commit timestamp
//	                       (version 1: ... | int64 commit ts | int64 expire ts)
//	group metadata   key   int16 version (2) | string group
//	                 value int16 version (3) | string protocol type | int32 generation |
//	                       nullable string protocol | nullable string leader |
//	                       int64 state timestamp | [members: string id |
//	                       nullable string instance id | string client id |
//	                       string client host | int32 rebalance timeout |
//	                       int32 session timeout | bytes subscription | bytes assignment]
//	tombstone        the key with a null value: an offset deleted or expired,
//	                 a group deleted
//
// Strings are int16-length-prefixed. The topic is created compacted
// (cleanup.policy=compact) with Kafka's offsets.topic.segment.bytes, so
// that once the cleaner runs it keeps the last value of each key; replay
// applies the records in log order, which yields the same state before or
// after compaction. A record that does not decode (a client produced to
// the topic) is skipped and counted, not fatal. Versions 3 and up of the
// key are the records of KIP-848's groups, which replay ignores for now.
//
// # Loading
//
// At Start, each partition is replayed with engine.ReadAll on a goroutine
// of the coordinator's, then installed on its shard; until then its
// groups are answered COORDINATOR_LOAD_IN_PROGRESS (and heartbeats
// succeed, as in Kafka, since members' sessions restart at the install).
// A group with members comes back Stable with its generation and
// assignment: a broker restart does not make its consumers rebalance if
// they heartbeat within their session timeout.
//
// # Concurrency contract
//
// Every exported method of Coordinator may be called from any goroutine,
// and calls its reply function exactly once: from a shard goroutine (the
// usual case), or from the caller's goroutine when the request is refused
// before reaching a shard. Reply functions must not block; they encode and
// send. Start and Close must not be called concurrently; Close must come
// before the engine's Close.
//
// # Non-obvious invariants
//
//   - A request's byte slices alias the connection's frame; everything a
//     group keeps (protocol metadata, assignments) is copied first, and so
//     is everything replay keeps from the log's read buffer.
//   - A static member replaced by a new instance (KIP-345) is a new member
//     value, not the old one renamed: the old value's timers and parked
//     requests then check stale by identity.
//   - Offsets become visible when their write completes, never before; a
//     commit being written is UNSTABLE_OFFSET_COMMIT to a fetch with
//     require_stable (KIP-447) and never expires.
//   - Every parked request gets an answer: a member's superseded JoinGroup
//     or SyncGroup is answered REBALANCE_IN_PROGRESS, a removed member's
//     UNKNOWN_MEMBER_ID, everything at Close NOT_COORDINATOR (Kafka lets
//     some of these time out on the client).
//   - A member waiting in a rebalance is not expired by its session timer
//     (the rebalance timeout governs it), so whatever answers its parked
//     request must arm its session timer again.
//   - Bounds: a member's protocol metadata (MemberMetadataMaxBytes,
//     MESSAGE_TOO_LARGE beyond), a group's metadata and assignments
//     together (GroupMetadataMaxBytes, GROUP_MAX_SIZE_REACHED beyond), a
//     group's record (max.message.bytes of the topic: a leader's assignment
//     too large to write fails its SyncGroup), offset metadata
//     (offset.metadata.max.bytes, OFFSET_METADATA_TOO_LARGE). Requests that
//     name many groups make one shard call per partition, not per group.
package group
