// Package replication holds the decisions of Kafka's replication protocol
// for one partition, as code that runs without sockets, goroutines or a
// clock: the leader's view of its followers (LEO, last caught-up time),
// the high watermark, ISR shrink and expansion through the controller,
// acks=all and min.insync.replicas, the follower's truncation after a
// leader change (KIP-101, KIP-279), and leader election. Tests drive it
// step by step, and replay fault schedules from a seed, as etcd's raft is
// driven; the fetcher, the produce path and the controller call it and do
// the I/O.
//
// # The protocol, as this package sees it
//
//	producer ──append──▶ leader log ──LeaderAppended──▶ Leader
//	                          ▲                           │  HW = min LEO over the maximal ISR
//	    Fetch(offset = follower LEO)                       │  (and caught-up, eligible followers)
//	follower ───────FollowerFetch──────────────────────────┘
//	    ◀── records + HW ── FollowerHW(HW, logStart, LEO)
//
//	Leader ──ShrinkProposal/ExpandProposal──▶ ProposalSent ──AlterPartition──▶ controller
//	       ◀──ISRCommitted / ISRRejected / UpdateISR (metadata)────────────────┘
//
//	new leader epoch: follower ──StartTruncation──▶ OffsetForLeaderEpoch(Ask)
//	                  leader answers EndOffsetForEpoch(its cache, LEO, Ask)
//	                  follower ──TruncationStep──▶ truncate; ask again or fetch
//
// # Concurrency contract
//
// Nothing here is safe for concurrent use, and nothing needs to be: a
// Leader belongs to the goroutine that owns the partition (its shard), which
// feeds it fetches, appends, controller answers and the time, one call at a
// time. The functions (EndOffsetForEpoch, TruncationStep, ElectLeader, ...)
// are pure and may be called from anywhere.
//
// # Non-obvious invariants
//
//   - The HW never goes down on a leader, and never moves while the committed
//     ISR is below min.insync.replicas (capped at the replication factor;
//     KAFKA-15583), so that what consumers see was on that many replicas.
//   - A new leader knows no follower's LEO: an ISR member that has not
//     fetched from it holds the HW where it is. Counting the LEO a follower
//     had under the previous leader would count data it may truncate.
//   - While an ISR change is in flight the HW is computed over the union of
//     the committed and the proposed ISR (KIP-497's maximal ISR): a joining
//     follower counts at once (stricter is safe), a leaving one counts until
//     the controller agrees (if the shrink failed and it stayed in the ISR,
//     an HW past its LEO would make an electable replica miss committed
//     data).
//   - A metadata update at the partition epoch the leader already has keeps
//     a pending expansion counted. Kafka drops the pending change then; if
//     the controller later committed it, the new member could be in the ISR
//     with a LEO below an HW computed without it.
//   - A follower joins the ISR only with a LEO at or above both the HW and
//     this leader's epoch start offset: below the epoch start it may lack
//     committed data written between the HW and the start of the epoch.
//   - The leader changes its committed ISR only on the controller's word.
//   - A follower truncates only after asking the leader (or, without any
//     leader epoch, to its HW): truncating to its own HW on restart could
//     drop data the leader had already exposed (KIP-101's first scenario).
//   - The truncation walk asks about strictly smaller epochs each step
//     (KIP-279), so it ends; it takes the next epoch from the answer rather
//     than from the cache after truncating, because a cache entry for an
//     epoch that wrote nothing, at the LEO, survives a truncation to the LEO
//     in segment.Log.
//   - A fetch's last fetched epoch is the epoch of the follower's last batch,
//     not its cache's latest entry (see DivergingEpoch), for the same reason.
//   - An OffsetForLeaderEpoch about an epoch older than the leader's first
//     is answered with that epoch and the first start offset, not
//     Undefined (Kafka's LeaderEpochFileCache): the follower keeps nothing
//     from where the leader's known history starts.
package replication
