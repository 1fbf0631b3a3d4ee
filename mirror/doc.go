// Package mirror is `ringlog mirror`: MirrorMaker 2's replication flows
// between Kafka-compatible clusters, built on franz-go (kgo, kadm). It
// imports no broker package and speaks only the Kafka protocol to both
// sides, so either may be ringlog, Apache Kafka or Redpanda.
//
// A Flow (source alias -> target alias) is run by one worker goroutine:
//
//	source                      worker                          target
//	topics (read_committed) --> polls <= 5000 records --> txn { A.<topic>  (same partition, key,
//	                            (several per txn)               value, headers, timestamp)
//	                                                          mm2-offset-syncs.<source>.internal
//	                                                          heartbeats
//	                                                          mm2-offsets.<source>.internal }
//
// A transaction (commit.go's batch) stays open across polls: each poll's
// records are produced while the previous ones are in flight, and the
// transaction is committed once it holds Options.TxnRecordsMax records or
// TxnBytesMax bytes, has been open TxnInterval, or the source has nothing
// more (every partition fetched up to its high watermark).
//
// With tasks.max > 1 the flow's partitions are split into tasks with
// transactional ids of their own, shared by several processes through a
// consumer group on the source (tasks.go); a process fences a task's ids
// before it resumes the task.
//
// A second goroutine per flow reads the offset syncs back and writes
// checkpoints (checkpoint.go). The record formats are MM2's (format.go). Remote topic names come from
// a Policy (DefaultReplicationPolicy or IdentityReplicationPolicy).
//
// Concurrency: Run starts one goroutine per flow and one for the progress
// line; a worker's state is its own goroutine's. Metrics are atomics and
// Prometheus collectors, safe from any goroutine.
//
// Non-obvious invariants:
//   - The offsets read at start must be read read_committed up to the
//     LSO, with control records kept: the offsets topic usually ends in a
//     commit marker, which a consumer never returns as a record, and a
//     reader waiting for a record at LSO-1 would wait forever.
//   - The producer id is loaded (InitProducerId) before the offsets are
//     read, never after: it aborts the killed run's open transaction, and
//     only then is the committed state final.
//   - kgo answers a Metadata request from its cache when the cache is
//     younger than MetadataMinAge (5 s by default): the source's admin
//     client runs with a small one, or a refresh misses new partitions.
//   - The source consumer runs with the Java consumer's fetch.max.wait
//     (500 ms), not kgo's 5 s: partitions whose start offsets are still
//     being listed join only the next fetch, after a whole wait.
//   - The offset syncs topic on the target is named after the source
//     (MM2's rule for offset-syncs.topic.location=target): named after
//     the target, every flow into it shared one topic, and syncs of A's
//     "t" and B's "t" (the same keys) translated each other's groups.
//   - A task's ids are fenced before its offsets are read, in the group's
//     assignment callback (AdjustFetchOffsetsFn): returning the offsets
//     unchanged on an error would consume from the group's offsets (none:
//     the reset offset) and mirror the partition again from its start.
//   - The group's callbacks and the poll loop share the worker's tasks and
//     positions under worker.mu; rebalances wait for AllowRebalance,
//     called only once no transaction is open (a transaction stays open
//     at most TxnInterval, so a rebalance waits no longer).
//   - Several processes of a flow grow a remote topic at once: the
//     loser's CreatePartitions answers INVALID_PARTITIONS ("already has
//     N"), which is not a failure of its run.
//   - A flow's processes must not pass the codec or task of a partition
//     through anything but taskOf and codecOf: an id that two owners of
//     one partition do not share does not fence.
//   - Offset syncs need the records' target offsets, known only once the
//     records are acknowledged: a transaction flushes the records, then
//     produces the syncs and offsets, then commits.
//   - A source partition is in at most one open batch (one producer's
//     transaction) at a time: records of another codec wait for the
//     batch holding its earlier records to commit. Two open transactions
//     holding one partition wrote its records out of order
//     (TestMirrorKeepsCompression's codec switch).
//   - A poll asks for no more records than the fullest open batch has
//     room for, and the first poll of a batch no more than TxnRecordsMax.
//     The syncs' translation granularity is offset.lag.max, not the
//     transaction's size: a batch marks every offset.lag.max-th record of
//     a partition, and its commit writes a sync for each once the
//     records are acknowledged (their target offsets known), in order.
package mirror
