// Package replication holds the decisions of Kafka's replication protocol
// for one partition, as code that runs without sockets, goroutines or a
// clock: the leader's view of its followers (LEO, last caught-up time),
// the high watermark, ISR shrink and expansion through the controller, the
// follower's truncation after a leader change (KIP-101, KIP-279), and the
// controller's choice of a leader. Tests drive it step by step, and replay
// fault schedules from a seed, as etcd's raft is driven. The simulation
// (cluster_test.go, sim_test.go, scenarios_test.go) takes every decision
// with the functions production calls, listed below, not with copies of
// them; what it models is the rest: the messages between brokers, and the
// controller's bookkeeping (its epochs, AlterPartition's checks).
//
// # Who calls what
//
//   - replication/node, for each partition this broker leads: a Leader
//     (NewLeader; FollowerFetch and BrokerEpoch from the Fetch handler;
//     LeaderAppended from the engine's OnAppended; MaybeIncrementHW,
//     ShrinkProposal, ExpandProposal, ProposalSent and Pending on its ISR
//     ticker; ISRCommitted, ISRRejected and UpdateISR with the
//     controller's answers and metadata; SetFenced). It hands the HW and
//     the committed ISR's size to the engine (engine.SetHW, engine.SetISR).
//   - replication/node, for each partition this broker follows:
//     StartTruncation, TruncationStep (which reads the follower's own
//     cache with EndOffsetForEpoch), OutOfRange and FollowerHW.
//   - replication/controller's state machine: ElectLeader and FencedISR,
//     when it fences a broker or gives a leaderless partition a leader
//     (its election.go adds the epochs).
//
// Two rules live below this package. acks=all is the engine's (engine/acks:
// whether a produce may be appended, and when a parked one is answered),
// because the engine applies it and must not import this package; the
// simulation parks and answers its produces with it. The leader's answer
// to OffsetForLeaderEpoch is the segment's ((*segment.Log).EndOffsetForEpoch,
// through engine.EndOffsetForEpoch); the simulation answers with
// EndOffsetForEpoch here and checks every answer against the segment's:
// the two are one algorithm written twice, held together by
// TestEndOffsetForEpochMatchesSegment. DivergingEpoch (truncation on
// fetch, Fetch v12+) is called by tests only: the Fetch handler does not
// check a follower's last fetched epoch, and followers always ask
// OffsetForLeaderEpoch.
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
//	                  leader answers (*segment.Log).EndOffsetForEpoch(Ask)
//	                  follower ──TruncationStep──▶ truncate; ask again or fetch
//
//	producer, acks=all ──engine/acks: Enough(committed ISR)?──▶ append, Park(end)
//	       ◀── answered when engine.SetHW(Leader.HW()) covers end (Due)
//
//	broker fenced, or partition offline: controller ──FencedISR, ElectLeader──▶ new leader, ISR
//
// # Concurrency contract
//
// A Leader is not safe for concurrent use: its owner serialises every call
// (replication/node holds the partition's mutex around each; the Fetch
// handler, the engine's OnAppended, the ISR ticker and the controller's
// answers all come through it) and feeds it the time. The functions
// (EndOffsetForEpoch, TruncationStep, ElectLeader, FencedISR, ...) are
// pure and may be called from anywhere.
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
