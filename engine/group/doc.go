// Package group is ringlog's group coordinator for Kafka's two group
// protocols. In the classic one, consumers (and any other client of
// JoinGroup, such as Kafka Connect) form groups, a leader they elect
// assigns the partitions, the coordinator relays its assignment and
// fences stale members. In KIP-848's consumer group protocol
// (ConsumerGroupHeartbeat), the coordinator assigns the partitions itself
// and hands them to each member incrementally. It keeps the groups'
// committed offsets for both. It is Kafka-specific by nature and speaks in
// kmsg request and response types; the engine knows nothing of it (it
// only offers the hooks this package runs on: OnShard, AppendOnShard and
// ReadAllToLEO).
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
// # Leadership
//
// __consumer_offsets is a replicated topic like any other, created through
// the controller by the first broker that needs it (the kafka package, at
// a FindCoordinator, with Partitions, ReplicationFactor and TopicConfigs),
// and the coordinator of a group is the leader of its partition, as in
// Kafka. The coordinator creates nothing itself and has one mode: a broker
// coordinates the partitions it leads, which on a single broker (a
// one-voter quorum) is every one. replication/node reports each change of
// leadership (Elected at a leader epoch, Resigned), and each partition
// goes through terms:
//
//	          Elected(e), e newer               replayed up to the LEO
//	unloaded ─────────────────────────► loading ─────────────────────► loaded
//	   ▲        (NOT_COORDINATOR)   (LOAD_IN_PROGRESS)                   │
//	   └──────────── Resigned, or Elected at a newer epoch ◄─────────────┘
//	                 (parked requests NOT_COORDINATOR, timers stopped)
//
// Writes are answered once the partition's high watermark covers them
// (acks=all, engine.AppendOptions.RequireISR), so an acknowledged commit
// or group change is on every in-sync replica and survives the leader's
// loss; a write still waiting when leadership moves fails (the engine
// fails it with ErrNotLeader) and is answered NOT_COORDINATOR. The client
// then asks FindCoordinator again and finds the new leader, which replays
// the partition from its log: a group comes back with its generation and
// members, so a failover costs the group no rebalance.
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
// # KIP-848 consumer groups (consumer*.go, reconcile.go, assignor.go)
//
// A group id is either a classic group or a consumer group (group.consumer
// set); the offsets are the same either way. Every member heartbeats; the
// coordinator answers with the member's epoch and, when it changed, its
// assignment. Three epochs order everything:
//
//	group epoch        moves when a member joins or leaves, a subscription
//	                   changes, or a subscribed topic is created, deleted
//	                   or grows (the engine's TopicsVersion moved and the
//	                   subscribed topics' ids and partition counts differ)
//	assignment epoch   the group epoch the target assignment was computed
//	                   at, by the uniform or range assignor, at the first
//	                   heartbeat after the group epoch moved
//	member epoch       where a member's reconciliation stands
//
//	            the target takes partitions it owns
//	   STABLE ──────────────────────────────────► UNREVOKED_PARTITIONS
//	    ▲  │                                      (keeps its epoch, is told
//	    │  │ the target moved; nothing to give     to keep only the rest)
//	    │  │ up, some target partitions held               │
//	    │  ▼ by others                                     │ reports them
//	    │ UNRELEASED_PARTITIONS ◄─── some still held ──────┤ revoked: moves
//	    │ (at the target epoch)                            │ to the target
//	    │         │ all released                           │ epoch
//	    └─────────┴──────────────────◄─── all free ────────┘
//
// A member is given a partition only once no other member holds it
// (assigned, or pending its revocation), so no partition is owned twice;
// a member that does not revoke within its rebalance timeout is fenced,
// one that does not heartbeat within group.consumer.session.timeout.ms is
// removed. Static members (KIP-345's instance ids) leave with epoch -2 and
// keep their partitions until a new instance takes their place or their
// session ends. The state machine is pure (consumer.go: the time and the
// topics come in, records and the answer go out); consumer_coord.go runs it
// on the shards.
//
// # Timers
//
// Session timeouts, rebalance timeouts, the initial rebalance delay
// (KIP-134), the wait for SyncGroup, member ids handed out with
// MEMBER_ID_REQUIRED (KIP-394) and consumer group members' sessions and
// rebalance timeouts are time.AfterFunc timers whose callback
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
//	consumer groups  key types 3 to 8 (group epoch, subscribed topics,
//	                 member subscription, target assignment epoch, member
//	                 target, member reconciliation), Kafka 4.0's
//	                 flexible-version records, drawn in records848.go
//
// Strings are int16-length-prefixed. The topic is created compacted
// (cleanup.policy=compact) with Kafka's offsets.topic.segment.bytes, so
// that once the cleaner runs it keeps the last value of each key; replay
// applies the records in log order, which yields the same state before or
// after compaction. A record that does not decode (a client produced to
// the topic) is skipped and counted, not fatal. Key types above 8 (share
// and streams groups, Kafka's ConsumerGroupRegularExpression) are skipped.
//
// # Loading
//
// A partition is loaded when this broker is elected its leader: it is
// replayed on a goroutine of the coordinator's (a few partitions at a
// time) and installed on its shard; until then its groups are answered
// COORDINATOR_LOAD_IN_PROGRESS (and heartbeats succeed, as in Kafka, since
// members' sessions restart at the install). The replay reads up to the
// LEO (engine.ReadAllToLEO): a new leader's high watermark may still lag
// what the previous leader acknowledged, which its log holds, and a
// leader never truncates its own log. WaitLoaded waits for the elections
// reported so far to settle (their partitions serving, or their terms
// over); partitions this broker was not elected for are not waited for.
// A group with members comes back Stable with its generation and
// assignment, and a consumer group with its epochs and every member's
// reconciliation: a broker restart does not make its consumers rebalance
// if they heartbeat within their session timeout.
//
// # Concurrency contract
//
// Every exported method of Coordinator may be called from any goroutine,
// and calls its reply function exactly once: from a shard goroutine (the
// usual case), or from the caller's goroutine when the request is refused
// before reaching a shard. Reply functions must not block; they encode and
// send. Elected and Resigned only queue work to the partition's shard (the
// replay runs on a goroutine of its own), so replication/node calls them
// from its apply goroutine; calls for one partition must come in the order
// of the changes, which the epochs they carry check besides. Start and
// Close must not be called concurrently; Close must come before the
// engine's Close. CommittedOffsets (a metrics scrape's) waits for the
// shards, bounded by its context, and must not run on one.
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
//   - A transactional offset commit (TxnOffsetCommit, txn_offsets.go) is
//     written in a transactional batch of its producer and stays pending,
//     counted in pendingCommits as a commit being written is, until the
//     transaction's marker lands on the partition: TxnCompleted, called on
//     the partition's shard by the leader that wrote the marker, makes a
//     COMMIT's offsets the group's and drops an ABORT's; replay applies
//     the markers it meets the same way.
//   - Every parked request gets an answer: a member's superseded JoinGroup
//     or SyncGroup is answered REBALANCE_IN_PROGRESS, a removed member's
//     UNKNOWN_MEMBER_ID, everything at Close NOT_COORDINATOR (Kafka lets
//     some of these time out on the client).
//   - A member waiting in a rebalance is not expired by its session timer
//     (the rebalance timeout governs it), so whatever answers its parked
//     request must arm its session timer again.
//   - A consumer group's answer leaves after the records it reports are
//     written; one that writes nothing still waits for the partition's
//     writes in flight (afterWrites), which may hold what it reports.
//   - A consumer group refuses a request before changing anything: the
//     state machine checks everything first, then mutates, so a refused
//     heartbeat writes nothing.
//   - A consumer group whose write failed keeps its members' partitions
//     held (they may still consume them) and fences each member at its
//     next heartbeat (lostWrite); their rejoins write everything again.
//   - A known member joining again with epoch 0 has given up all its
//     partitions (a join carries none): it starts over, releasing them.
//     Kafka fences such a join unless it repeats a lost first join.
//   - A term's replay starts once the previous term's writes completed
//     (afterWrites): a write of the old term still in flight when this
//     broker is elected again without a resignation between would
//     otherwise land in the log after the replay read it, and be missing
//     from memory.
//   - An election older than the last election or resignation seen is
//     stale, one at the same epoch a repeat: the node's hook and the
//     catch-up at start (broker's hostGroups) may report the same
//     change twice, in either order. A topic id that changed (the topic
//     was deleted and created again) starts the epochs over.
//   - Elected counts its election for WaitLoaded before it queues its
//     work, so a WaitLoaded that follows waits for it, and every path an
//     election takes (stale, a repeat, not queued, replayed, failed, its
//     term over before the install) settles it exactly once: one path that
//     forgot would keep WaitLoaded waiting until its context ends.
//   - A heartbeat that writes nothing but waits for the writes in flight
//     fails as the last of them did: after a lost leadership its answer
//     would report state that no replica may keep.
//   - The partition count is fixed at Start (the topic's, or
//     offsets.topic.num.partitions before the topic exists);
//     FindCoordinator refuses to route groups while the topic has another
//     count (COORDINATOR_NOT_AVAILABLE), rather than send them to the
//     wrong partition's leader.
//   - Bounds: a member's protocol metadata (MemberMetadataMaxBytes,
//     MESSAGE_TOO_LARGE beyond), a group's metadata and assignments
//     together (GroupMetadataMaxBytes, GROUP_MAX_SIZE_REACHED beyond), a
//     group's record (max.message.bytes of the topic: a leader's assignment
//     too large to write fails its SyncGroup), offset metadata
//     (offset.metadata.max.bytes, OFFSET_METADATA_TOO_LARGE). Requests that
//     name many groups make one shard call per partition, not per group.
package group
