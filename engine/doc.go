// Package engine is ringlog's broker core without any protocol: topics,
// partitions pinned to shards, produce and fetch semantics, idempotent
// producers. The Kafka layer drives it; so can any Go program that wants a
// durable partitioned log behind a protocol of its own (see the example).
//
// # Shards
//
// N shards (default GOMAXPROCS), each a goroutine locked to an OS thread
// with its own io_uring ring and inbox. A partition is assigned to a shard
// when it is opened (hash of the topic plus the partition number, so a
// topic's partitions spread over the shards) and stays there. Appends are
// validated on the caller's goroutine (CRC, records, size, timestamps), then
// queued in the shard's inbox. Each round the shard takes what the inbox
// holds, checks each request against the partition's producer state,
// prepares one write per partition for all of its requests, submits every
// write of the round at once (group commit), waits for the round and calls
// each request's done callback on the shard goroutine.
//
// # Log compaction
//
// One cleaner goroutine (cleaner.go) compacts the partitions of topics
// whose cleanup.policy includes compact: it asks each shard for the
// cleaning status of its logs, picks the dirtiest one that is due, has its
// shard plan the clean (pinning the segments), cleans on its own goroutine,
// and has the shard swap the cleaned segments in. Appends never wait for a
// clean; only the plan and the swap run on the shard. Close stops the
// cleaner before the shards; a clean in progress is then abandoned and the
// old segments stay.
//
// # Concurrency contract
//
// Every exported method of Engine may be called from any goroutine. done
// callbacks of Append run on a shard goroutine and must not block (encode
// the answer and hand it to the network layer). Read, State, ListOffset and
// EndOffsetForEpoch never wait for a shard: they work on the log's
// published, reference-counted views; ListOffset(MaxTimestamp),
// DeleteRecords and topic changes do a round trip through the shard.
//
// # Files in the data directory
//
//	meta.properties        version, cluster.id, node.id (Kafka's names)
//	topics.json            topic names, ids, partition counts, config overrides
//	producer-ids           end of the producer id block in use
//	<topic>-<partition>/   a partition's log (see package segment) and
//	                       producer-state, the idempotence snapshot
//
// # Non-obvious invariants
//
//   - A partition has at most one append in flight; every request queued for
//     it during a round joins that one write. The round waits for all its
//     appends, so a partition's next round starts with nothing in flight.
//   - Producer state is updated before the write (so that two requests of one
//     producer in one round see each other) and rolled back if the write
//     fails.
//   - On a single node the high watermark follows the LEO as soon as a write
//     completes; fetches never see an append before it completed.
//   - Duplicates of an idempotent producer's retry are answered with the
//     original offset and no write; a producer with no state (new, or
//     expired) is accepted at any sequence, as Kafka does.
//   - The cleaner keeps the last batch of every producer the partition
//     knows (emptied if all its records go), so that producer state rebuilt
//     from the log after a lost snapshot still knows each producer's last
//     sequence and epoch.
//   - A producer's record without a key is refused on a compacted topic
//     (the cleaner would drop it); AppendOnShard is not checked: services
//     inside the broker key what they write.
//   - cleanup.policy=compact alone turns retention off: retention.ms and
//     retention.bytes only apply with delete in the policy.
package engine
