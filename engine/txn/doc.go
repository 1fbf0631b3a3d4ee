// Package txn is ringlog's transaction coordinator (KIP-98, with KIP-360's
// producer recovery and KIP-890's epoch bump per transaction): it hands
// transactional producers their producer id and epoch, records which
// partitions each transaction writes to, and ends a transaction by having
// a COMMIT or ABORT marker written to each of them. It is the group
// coordinator's sibling (engine/group) and built the same way; it speaks
// in Kafka's codes and record formats, and the engine knows nothing of it.
//
// # State on shards
//
// A transactional id lives in one partition of the internal topic
// __transaction_state, chosen as Kafka chooses it:
// abs(Java hashCode(id)) % partitions (transaction.state.log.num.partitions,
// 50), the rule groups are routed by (group.PartitionFor). Its state, its
// timers' effects and its writes happen on the goroutine of the shard that
// owns that partition: every call runs through engine.OnShard, writes go
// through engine.AppendOnShard from there with acks=all (RequireISR), and
// answers are sent from the append's done callback. The coordinator of an
// id is the leader of its partition; replication/node reports each
// election (Elected, at a leader epoch, which is the coordinator epoch the
// markers carry) and resignation, and a partition goes through the group
// coordinator's terms: unloaded (NOT_COORDINATOR), loading
// (COORDINATOR_LOAD_IN_PROGRESS, replaying its log up to the LEO), loaded.
// The topic is created through the controller by the first broker that
// needs it (a FindCoordinator for a transaction), compacted, with
// transaction.state.log.replication.factor replicas capped by the live
// brokers and min.insync.replicas = transaction.state.log.min.isr.
//
// # The state machine (Kafka's TransactionMetadata)
//
//	                 AddPartitionsToTxn,
//	InitProducerId   AddOffsetsToTxn            EndTxn(commit)
//	 ┌──► Empty ────────────────────► Ongoing ───────────────► PrepareCommit
//	 │      ▲                          │  │ ▲                       │ every marker
//	 │      │ InitProducerId           │  │ └─ more partitions      │ written
//	 │      │ (epoch bump)             │  │                         ▼
//	 │   CompleteCommit ◄──────────────┼──┼──────────────────── CompleteCommit
//	 │   CompleteAbort                 │  │ EndTxn(abort)
//	 │                                 │  └──────────────────► PrepareAbort ──► CompleteAbort
//	 │      InitProducerId, or the     │                          ▲
//	 │      transaction's timeout ─────┴─► PrepareEpochFence ─────┘
//	 │                                     (epoch bumped in memory, never written)
//	 └── Dead: transactional.id.expiration.ms after the last use of an idle
//	     id (Empty, CompleteCommit, CompleteAbort), written as a tombstone
//
// One transition is pending at a time (Kafka's pendingState): it is
// prepared (a transit), written, and applied when the write is
// acknowledged; a request meeting a pending transition, or a prepared
// transaction, waits for the id to settle (settle.go), up to 100 ms, then
// runs again from the start, or is answered CONCURRENT_TRANSACTIONS and
// retried by the client. A producer's epoch is bumped by every InitProducerId (which
// fences the older instances: PRODUCER_FENCED, and INVALID_PRODUCER_EPOCH
// on their produces) and, for transactions v2 clients (EndTxn v5+,
// KIP-890 part 2), by every EndTxn, so that a delayed produce or EndTxn of
// a finished transaction can never land in the next one; such a client may
// also abort a transaction that holds nothing (Empty or completed: the
// epoch is bumped, no marker written). An epoch that reaches 32766 moves
// the id to a new producer id at epoch 0.
//
// # Markers
//
// EndTxn is answered once PrepareCommit or PrepareAbort is written; the
// markers are then written by the MarkerWriter (kafka's, which appends to
// this broker's own partitions through the engine and sends WriteTxnMarkers
// to the leaders of the others over the inter-broker listener), retried
// every MarkerRetryBackoff while a leader is unavailable, and the
// completion (CompleteCommit, CompleteAbort) is written when every one
// is. A coordinator elected for a partition sends the markers of every
// transaction it finds prepared in the log, since its predecessor may
// have died between the two writes: a prepared transaction is always
// finished, which the partitions' last stable offsets wait for.
//
// # Records in __transaction_state (Kafka's formats)
//
//	key    int16 version (0) | string transactional id
//	value  int16 version (1) | int64 producer id | int16 producer epoch |
//	       int32 timeout ms | int8 state | nullable [topic: compact string |
//	       [int32 partition] | tags] | int64 last update ms |
//	       int64 start ms | tags: 0 previous producer id, 1 next producer id,
//	       2 client transaction version, 3 next producer epoch (KIP-939)
//	tombstone  the key with a null value: an expired id
//
// Version 1 is flexible (compact strings and arrays); version 0 (Kafka
// before transaction.version 1) is read too. An Empty transaction's
// partition list is null, as Kafka writes it.
//
// # Concurrency contract
//
// Every exported method of Coordinator may be called from any goroutine,
// and calls its reply function exactly once, from a shard goroutine or the
// caller's (or, for a call that needs a new producer id, from the
// allocating goroutine when allocation fails). Reply functions must not
// block. Elected and Resigned only queue work to the partition's shard.
// MarkerWriter.WriteMarkers is called on a shard goroutine and must not
// block; its done must not be called on a shard goroutine (the coordinator
// queues to a shard from it). Close must come before the engine's Close.
//
// # Non-obvious invariants
//
//   - A transition is applied only once its write is acknowledged by the
//     ISR; a failed write leaves the state as it was, but an epoch fence
//     has bumped the epoch in memory already (the old producer must stay
//     fenced), and the next fence does not bump it again.
//   - The answer to EndTxn leaves after PrepareCommit/PrepareAbort is
//     written, before the markers: the client's next transaction waits
//     (or meets CONCURRENT_TRANSACTIONS) until the completion is written.
//   - A parked call runs exactly once: again when its id settles or the
//     term ends (the partition then says why it cannot serve), or with
//     CONCURRENT_TRANSACTIONS at settleWait.
//   - A term's replay starts once the previous term's writes completed
//     (afterWrites), as in the group coordinator.
//   - Marker completions carry the transaction's marker round; a round
//     that a newer one superseded, or a term that ended, does nothing.
//   - Producer ids are allocated off the shard (the allocator may wait on
//     the quorum); the request then runs again on the shard, where the
//     state may have moved.
package txn
