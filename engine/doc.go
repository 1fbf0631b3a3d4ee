// Package engine is ringlog's log store without any protocol: topics of
// partitions, each an append-only log of records with offsets, on disk in
// Kafka's layout, served by shards pinned to their threads. The Kafka
// layer drives it (Core); so can any Go program that wants a durable
// partitioned log behind a protocol of its own (Engine).
//
// # Getting started
//
//	e, err := engine.Open("./data", nil) // or &engine.Options{Flush: engine.FlushAlways}
//	if err != nil { ... }
//	defer e.Close()
//	err = e.CreateTopic("events", engine.TopicOptions{Partitions: 4})
//	tp := engine.TP{Topic: "events", Partition: 0}
//	first, err := e.Produce(ctx, tp, engine.Record{Key: k, Value: v})
//	res, err := e.Fetch(ctx, tp, first, 100)   // res.Records, res.Next
//	sub, err := e.Subscribe(tp, res.Next)      // waits for what comes next
//	r, err := sub.Next(ctx)
//
// Produce returns once the records are written (and synced, under
// FlushAlways) and readable; each record gets the next offset of its
// partition. Fetch never waits; a Subscription does. Errors are the
// package's own, for errors.Is: ErrUnknownTopicOrPartition, ErrTopicExists,
// ErrOffsetOutOfRange, ErrDirLocked, ErrClosed (every method after Close),
// ErrStorage (a partition offline: below).
// The example of this package serves a line protocol of its own with it;
// examples/redis-streams serves Redis streams over RESP.
//
// Core is the engine as a broker drives it: raw record batches (Append,
// Read's file regions for sendfile), replication roles and high
// watermarks, offsets by time, configs, transaction markers. An embedder
// rarely needs it (Engine.Core).
//
// # Transactions
//
// The log side of KIP-98 (txn.go): a producer's transactional batches open
// a transaction on the partition; AppendMarker, the transaction
// coordinator's one write, ends it with a COMMIT or ABORT control batch,
// refused from an older producer epoch (ErrInvalidProducerEpoch) or an
// older coordinator epoch (ErrTransactionCoordinatorFenced). A producer's
// batch outside its open transaction is ErrInvalidTxnState. The last
// stable offset (PartitionState.LSO) is the high watermark held below the
// first offset of every transaction not settled (open, or ended by a
// marker not yet below the high watermark), on leaders and followers
// alike. Read and ListOffset take an Isolation: ReadCommitted stops at the
// LSO and gets the aborted transactions it read (ReadResult.Aborted), from
// the segments' aborted-transactions indexes, which ABORT markers fill and
// which the partition's open rebuilds from the log where they cannot be
// trusted. The cleaner stops at the LSO, drops aborted transactions'
// records and, two passes later, their markers.
//
// # Shards
//
// N shards (default GOMAXPROCS without the Ps added for threads that wait
// in io_uring_enter, internal/procs), each a goroutine locked to an OS
// thread with its own io_uring ring and inbox. With Config.RingOwners (and
// the disk path on io_uring; the broker sets it) each shard is also an
// ioring.Owner: it waits in its owner ring's io_uring_enter instead of on
// the inbox, its timers are the wait's timeout, senders ring its doorbell
// after queueing, its disk I/O is on that ring, its rounds overlap (each
// partition's appends are answered as its own write completes), and other
// layers may put I/O and work on its thread (RingOwners). A partition is assigned to a shard
// when it is opened (hash of the topic plus the partition number, so a
// topic's partitions spread over the shards) and stays there. Appends are
// cut into batches on the caller's goroutine, then queued in the shard's
// inbox. Each round the shard takes what the inbox holds, stages each
// request's batches for its partition's write, checking them there (size,
// CRC, records, timestamps: segment.Staging, checkProduced), checks each
// request against the partition's producer state,
// prepares one write per partition for all of its requests, submits every
// write of the round at once (group commit) and calls each request's done
// callback on the shard goroutine once its partition's write completed
// (a shard that does not own its ring waits for the whole round first).
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
// # Replication
//
// An engine is driven by a replication layer (Config.OnAppended;
// replication.go, replica.go): every partition of every topic is hosted,
// and each has a role. With none (after a start or a creation) it takes no
// appends. A leader (BecomeLeader) takes producer appends and stamps them
// with its epoch, which the leader-epoch checkpoint records as starting at
// the LEO it had on taking over. A follower (BecomeFollower) refuses them
// with ErrNotLeader and takes its leader's batches as they are
// (AppendReplica: offsets and epochs kept, group-committed like producer
// appends, the producer state learning from them). Appends do not move the
// high watermark: SetHW does, and Config.OnAppended tells the layer each
// partition's LEO after every write so that a leader recomputes it without
// polling. acks=all is refused while SetISR's count is below
// min.insync.replicas and otherwise answered once the high watermark covers
// the batch: the rule is engine/acks, a pure package below the engine that
// the simulation of the replication layer runs too.
// Truncate and TruncateFullyAndStartAt cut a follower's log where it and
// its leader's agree (KIP-101). ReadReplica serves a follower's fetch up to
// the LEO. Without a replication layer (OnAppended nil) the engine is its
// own, of one replica: every partition leads from the moment it opens,
// alone in its ISR, and its high watermark follows its LEO; the semantics
// (roles, acks=all answered once the high watermark covers the append)
// are the same code.
//
// # Offline partitions
//
// A partition whose log does not open at start (corruption, an unreadable
// file) is kept offline rather than failing OpenCore, and one whose disk
// fails at run time (a failed fsync, EIO or EROFS on a write, its shard's
// ring failing) is taken offline (offline.go): its log is stopped, every
// call on it answers ErrStorage, its files are left for an operator, and
// Config.OnOffline tells the replication layer, which has the controller
// move its leadership. Offline and OfflinePartitions say which. It comes
// back only with a restart whose log opens cleanly.
//
// # Concurrency contract
//
// Every exported method of Core may be called from any goroutine. done
// callbacks of Append and AppendReplica, and Config.OnAppended, run on a
// shard goroutine and must not block (encode the answer and hand it to the
// network layer). Read, ReadReplica, State, ListOffset and
// EndOffsetForEpoch never wait for a shard: they work on the log's
// published, reference-counted views; SetHW and SetISR do not wait either.
// AppendMarker's done, like Append's, runs on the shard goroutine.
// ListOffset(MaxTimestamp), DeleteRecords, topic changes, BecomeLeader,
// BecomeFollower, Truncate, TruncateFullyAndStartAt and AlterReplicaLogDir
// (which returns once the move started; a goroutine of its own copies, and
// Close waits for it to stop) do a round trip
// through the shard, so they must not be called from a shard goroutine (a
// done callback, OnAppended, an OnShard function): that would deadlock.
// OnShard does not wait for its function but waits for room in the
// shard's bounded inbox, so it must not be called from a shard goroutine
// either, except on the thread of a shard that owns its ring
// (RingOwners), where connections' handlers run: there Append, OnShard and
// the other hand-offs never wait, what a full inbox cannot take going to
// the target's overflow, behind what the inbox holds (shard.handOff).
// Code already on the shard appends with AppendOnShard, which bypasses
// the inbox. Inside the package, work reaches a shard through
// typed calls (shard.go): post queues a function, do runs one and waits
// for its error, start and wait do the same for several shards at once;
// all of them answer ErrClosed once the shard has stopped.
//
// # Log directories (JBOD)
//
// Config.Dir is the first of Kafka's log.dirs and Config.LogDirs the
// others (logdirs.go). Every directory holds partition folders and a
// meta.properties with its directory.id (KIP-858); the first also holds
// the files below. A new partition goes to the online directory with the
// fewest partitions. A directory missing at start takes the partitions
// found in no other offline. AlterReplicaLogDir moves a partition's log to
// another directory while it serves (move.go: closed segments copied off
// the shard, the tail and two renames on it); LogDirs and Sizes describe
// them, a move's future log included.
//
// # Files in the data directory
//
//	meta.properties        version, cluster.id, node.id, directory.id
//	                       (Kafka's names; one in every log directory)
//	topics.json            topic names, ids, partition counts, config overrides
//	producer-ids           end of the producer id block in use
//	scram-bootstrap.done   the broker's, not the engine's: -add-scram ran
//	replication-offset-checkpoint
//	                       "0\n<count>\n<topic> <partition> <hw>\n..." (Kafka's
//	                       format): the high watermarks of a replicated engine
//	<topic>-<partition>.<unique>-future/
//	                       a move's copy of the partition's log, in the
//	                       directory it moves to (move.go's crash rule)
//	<topic>-<partition>/   a partition's log (see package segment, .txnindex
//	                       files included) and producer-state, the snapshot
//	                       of idempotence and transaction state (version 2:
//	                       each producer's open transaction and coordinator
//	                       epoch), taken at a roll as of the new segment's base
//
// # Non-obvious invariants
//
//   - A partition has at most one append in flight; the requests queued for
//     it meanwhile wait for that write to complete and then go together in
//     its next one (which rewrites the block the previous one ends in, so
//     it must follow it). On a shard whose disk I/O is on its owner's ring
//     rounds overlap: other partitions' appends are written while that
//     write is in flight (shard.round). Elsewhere a round waits for all
//     its appends.
//   - Control work (calls: role changes, truncations, moves, deletions,
//     the cleaner's swaps, DescribeProducers; retention; the stop) runs
//     with nothing of the shard's appends in flight and nothing queued
//     (shard.settle), as it did when every round waited for its writes.
//   - Producer state is updated before the write (so that two requests of one
//     producer in one round see each other) and rolled back if the write
//     fails.
//   - On a single node the high watermark follows the LEO as soon as a write
//     completes; fetches never see an append before it completed.
//   - On a replicated engine the high watermark moves up only by SetHW,
//     capped at the LEO, and down only by a truncation. Both hold the
//     partition's hwMu: SetHW reads the LEO under it, so a truncation cannot
//     slip between that read and the store and leave the HW above the LEO.
//   - A role is settled on the shard, in the round that writes: the check
//     in Append on the caller's goroutine is only a fast path, so an append
//     queued before BecomeFollower that reaches a round after it is refused.
//   - A pending acks=all append is parked before its shard loads the HW,
//     and SetHW stores the HW before it loads the smallest parked end:
//     whichever comes second sees the other, so no ack is left waiting for
//     a HW that has already passed it.
//   - An epoch below the latest one in the log is stale even when above the
//     role's epoch (a follower copies batches of leaders newer than the
//     role it was told): a leader must never stamp batches with an epoch
//     below ones already in its log.
//   - A follower's batches must start at its LEO: a gap or overlap means
//     the fetch that brought them is stale, and writing them would corrupt
//     the log. Only compacted topics may have gaps between batches (the
//     cleaner removes whole batches).
//   - A truncation rewrites the producer snapshot as of the new LEO: the old
//     one, taken above the cut, would otherwise be loaded after a restart
//     once the log had grown past its offset again, describing batches that
//     are gone.
//   - After a start a replicated partition's HW is its checkpointed value,
//     never the LEO: records above the committed offset may yet be
//     truncated, and consumers must not see them meanwhile.
//   - The LSO never passes an open transaction: a round publishes the
//     transactions it opens (txnSpan) before its write is submitted, so no
//     high watermark a follower's fetch moves can cover a transactional
//     batch the LSO does not know of; an ended transaction stays unsettled
//     until its marker is below the high watermark (a leader change may
//     yet truncate the marker) and, for an ABORT, until its .txnindex
//     entry is written.
//   - A producer snapshot is taken at a roll as of the round's first offset
//     (the new segment's base), from the state before the round: after a
//     crash, recovery scans the active segment and its transaction index
//     must be rebuilt from the state at its base; a snapshot taken after
//     the round (as before transactions) would send the rebuild back to
//     the log start.
//   - A producer with an open transaction is never expired (the
//     coordinator ends a transaction that times out, with a marker).
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
//   - A shard's thread never waits for room in an inbox, its own or
//     another's: two ring-owning shards whose connections produced to each
//     other's partitions deadlocked once both inboxes were full. The
//     overflow that takes such messages is read after the inbox messages
//     counted when it is swapped out, so one sender's messages keep their
//     order (a produce's appends to a partition, and their offsets).
//   - A shard whose ring owner fails closes the owner, so that what was
//     registered on it (netpoll's connections) gives up, and goes on
//     waiting on its inbox. Its disk I/O was on that ring (Owner.DiskIO):
//     the shard is broken and its partitions go offline.
//   - A settle whose disk I/O is on the owner's ring waits for the writes
//     in flight in the owner's turns with the shard's busy hook off
//     (roundWait): with it on, the messages waiting in the inbox for after
//     the control work would keep the turn from blocking, and the shard
//     would spin until its writes completed.
//   - cleanup.policy=compact alone turns retention off: retention.ms and
//     retention.bytes only apply with delete in the policy.
//   - A partition's folder may already be 255 bytes long (a 249-character
//     topic): a name derived from it (the deletion folder) is cut to fit
//     NAME_MAX, never suffixed (deletedDir).
//   - Config floors (segment.bytes' 1 MiB) bind values as they come in
//     (ParseTopicConfig); values stored before a floor existed load
//     (loadTopicConfig), or an upgrade would lose the topic.
//   - MaxPartitions bounds CreateTopic, the embedding API's creation; a
//     broker's topics come from its controller, which applies the cap of
//     the broker asking: CreateTopicWithID and CreatePartitions do not
//     check it (refusing a decision already in the metadata would leave
//     the broker without a partition the cluster has).
//   - A partition's log is set on its shard before the partition is
//     published and changed only by a move between log directories, on
//     the shard between rounds (nothing of the partition in flight): it is
//     nil only for a partition offline since the start. Code on the shard
//     sees one log for a whole round; readers load it once per call and
//     may find it closed during a swap (ErrClosed, a retriable
//     NOT_LEADER_OR_FOLLOWER on the wire). Every caller reaches a log through Core.partition,
//     which refuses an offline partition, or on the shard after checking
//     offlineErr; loops over a shard's partitions skip offline ones (one
//     offline since the start is not in shard.parts at all). A failed
//     open used to be ErrStorage for the whole engine: one corrupt segment
//     stopped the broker.
//   - A partition goes offline on its shard only, before the requests
//     that failed with it are answered (a client's retry finds it
//     offline), and an append that completed on a partition taken offline
//     while it was in flight is answered with ErrStorage, never as
//     written: its acks=all waiters were already failed, and would
//     otherwise wait forever.
//   - An offline partition's log is stopped (segment.Log.Stop), so that it
//     closes without a clean-shutdown marker: a write undone after EIO may
//     not be undone on the disk, and the next start must scan it.
//   - An offline partition keeps the high watermark it had (at start, the
//     checkpointed one): the checkpoint is rewritten every few seconds,
//     and a zero there would be the partition's high watermark once it
//     opens again.
//   - A marker of transactions v2 (Marker.TransactionVersion 2, KIP-1228)
//     at the epoch of the producer's open transaction is refused: v2
//     markers come at the epoch EndTxn bumped to, so it is a stale one,
//     and checked as v1's are (only an older epoch refused) it would end
//     the producer's next transaction. At that epoch with nothing open it
//     is a coordinator's resend, and taken.
//   - DescribeProducers reads producer state on the shard, as the state
//     was before the round in flight (producerState.beforeRound): a round
//     whose write fails is rolled back, and must not have been shown.
//   - A producer entry with no batches (its epoch set by a marker, which
//     KIP-890 writes at the bumped epoch) takes sequence 0 only, as
//     Kafka's does (last sequence -1); only a producer with no entry at all
//     may start anywhere. It took any sequence, and a pipelined producer's
//     second request landed when its first was refused
//     (TestTxnEpochBumpedByMarkerStartsAtSequenceZero).
//   - A partition lives in exactly one log directory: a folder of it in two
//     fails the start, and a new partition moves aside a leftover folder of
//     its name in every other directory (clearLeftovers), or the next
//     start would find two.
//   - A directory missing at start is not created again once the broker
//     has started before: an unmounted disk's mount point would become an
//     empty directory on the root file system, and its partitions would
//     open empty and be served so. A partition found in no directory while
//     one is offline is hosted offline, never created empty elsewhere.
//   - A move's future folder is renamed into place only once its copy is
//     complete and synced and the current folder is renamed away with its
//     directory synced: so at any crash, a <topic>-<p> folder anywhere is
//     the whole log, and a future folder alone (every directory online) is
//     too. A future folder is never promoted while a directory is offline
//     (the current log may be there).
//   - The cleaner does not install a clean on a partition that is moving:
//     the move copied the segments it would replace as immutable.
//   - A truncation during a move marks it (move.truncated): the bytes of a
//     .log copied in the background may have been cut and written again,
//     so the swap copies every file whole rather than the new bytes only.
package engine
