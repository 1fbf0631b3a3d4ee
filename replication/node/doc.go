// Package node is one broker's part in the cluster: it turns the
// controller's metadata (package replication/controller) into the engine's
// state and keeps it there.
//
// For every partition this broker is a replica of, it makes the engine's
// partition a leader or a follower at the controller's leader epoch; as
// leader it keeps the replication decisions of package replication (the
// followers' LEOs from their fetches, the high watermark, ISR shrink and
// expansion proposed to the controller); as follower it copies the leader's
// log through one fetch stream per leader (package replication/fetcher),
// truncating first after every leader change (KIP-101, KIP-279). The kafka
// package asks it who leads what, hands it followers' fetches and forwards
// topic administration to the controller through it.
//
// # Concurrency
//
// One goroutine (run) applies each new controller image in order and checks
// the ISRs on a ticker. Each partition's replication state has its own
// mutex, held briefly by that goroutine, by the engine's shard (OnAppended),
// by fetch handlers of the leader side and by the fetch streams' callbacks;
// nothing blocking (no engine call that waits for a shard, no controller
// request) runs under it. Controller requests (AlterPartition) and engine
// calls that wait for a shard (BecomeLeader, Truncate) run on the apply
// goroutine or on goroutines of their own, never on a shard or a stream.
// Config.OnLeadership runs on the apply goroutine, after the engine's role
// changed, and must not block (the group coordinator only queues its load
// or unload to a shard there). A partition the engine holds offline gets
// no role; one goroutine (reportOffline) reports the engine's offline set
// to the controller whenever the image differs from it, woken by OnOffline
// (on a shard: it only signals) and by every apply.
//
// # Non-obvious invariants
//
//   - A reassignment (KIP-455) adds replicas at the same leader epoch: the
//     leader must take the new assignment from the metadata
//     (replication.Leader.UpdateISR with Replicas) or it refuses the new
//     follower's fetches as a non-replica's forever, and the move never
//     completes.
//   - A partition of a hosted topic that is no replica here has its engine
//     partition stopped (not a leader: producer appends fail) and its log
//     emptied (reassign.go), at the removal or at the next start; a topic
//     with no replica left here is deleted from the engine. Without it a
//     leader moved away keeps taking appends nobody replicates.
//   - Replication throttles (throttle.go) are read from each image applied
//     (the rates from the dynamic broker configs, the partitions from the
//     topics' throttled-replicas configs) and measured on a monotonic
//     clock; a window of the quota's ring that was never used must not
//     count as the oldest (internal/rate): it did for the first eleven
//     seconds of the process, and a move started then went unthrottled.
//   - The leader holds a throttled partition only from followers outside
//     its committed ISR; the follower only while it is behind the
//     leader's high watermark of its last fetch. Both count every byte
//     of a throttled partition, in sync or not.
//   - An ISR change is dropped (replication.Leader.ISRRejected) only when
//     the quorum refused it at the epochs it was based on
//     (controller.AlterPartitionOutcome): a timeout may hide an expansion
//     that committed, and a resent forward finds the epoch its first copy
//     bumped. Dropping such an expansion leaves in the quorum's ISR a
//     follower the HW no longer waits for, electable without records the
//     leader acknowledged (found by the controller's simulation).
package node
