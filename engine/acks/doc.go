// Package acks is the acks=all rule of a partition leader, as pure code:
// whether an acks=all produce may be appended at all, and when each one
// that was appended is answered. It reads no clock, takes no lock and calls
// nothing back; its caller does what it decides.
//
// Two callers run it. The engine (engine/replication.go) keeps one Queue
// per partition, on the shard that owns the partition, and answers the
// produce requests that Due and Fail hand back. The seeded simulation of
// replication (replication/cluster_test.go) drives the same Queue with the
// high watermark its leaders compute (replication.Leader), so that what it
// checks (no acknowledged batch is ever lost) is checked of the rule the
// broker runs, not of a model beside it.
//
// # Why it lives here
//
// The engine applies the rule, and the engine must not import the
// replication layer (arrows point down: engine <- replication). A package
// that the engine owns, below it and importing nothing of ringlog, may be
// imported by both; the decisions that need the cluster's view (the HW, the
// ISR) stay in replication, which hands their results to the engine
// (engine.SetHW, engine.SetISR).
//
// # The rule
//
//	produce, acks=all ──Enough(in sync, min.insync.replicas, replicas)?──no──▶ NOT_ENOUGH_REPLICAS
//	        │ yes: appended, its records end before `end`
//	        ▼
//	Park(end) ──HW >= end (Covered)──▶ Due: answered with success
//	        └── leadership lost, or the log truncated below end ──▶ Fail
//
// Each step as Kafka's Partition and DelayedProduce take it:
//
//   - Enough: an acks=all produce is refused before it is appended when
//     fewer replicas are in sync than min.insync.replicas, capped at the
//     replica count (Kafka 4's effectiveMinIsr). "In sync" is
//     the committed ISR, the leader included (Kafka checks the committed
//     ISR too: a pending expansion may yet be refused), and one on an
//     engine that is not replicated.
//   - Covered: an appended one is committed, and answered, once the high
//     watermark reaches the offset after its last record. The retry of a
//     duplicate waits for the end of the original's batches, which may not
//     be committed yet (Kafka's DelayedProduce does the same).
//   - Fail: one still waiting when the leader becomes a follower, or
//     truncates its log below its end, fails: its records may or may not
//     survive, and the producer retries against the new leader.
//
// The deadline of a produce (timeout.ms, REQUEST_TIMED_OUT) is not part of
// the rule: the protocol layer answers a request whose time ran out
// (kafka/00_produce.go) and ignores the engine's later answer.
//
// # Concurrency contract
//
// A Queue is not safe for concurrent use: its owner serialises every call
// (in the engine, the partition's shard goroutine). Enough and Covered are
// pure and may be called from anywhere.
//
// # Non-obvious invariants
//
//   - Ends are not parked in order: the retry of a duplicate waits for the
//     original's end, below the ends of appends parked before it. Due and
//     Fail look at every waiting produce, and Due answers in the order
//     they were parked, not by end.
//   - min.insync.replicas is capped at the replication factor here, as the
//     HW rule caps it (replication.Leader, KAFKA-15583) and as Kafka 4
//     does: a topic whose min.insync.replicas exceeds its replication
//     factor once refused every acks=all produce (NOT_ENOUGH_REPLICAS),
//     which internal/difftest found against Kafka.
package acks
