// Package segment is one partition's log on disk: an ordered list of
// segments, each a .log file of Kafka RecordBatch v2 batches with a sparse
// offset index and a time index, in Kafka's own layout.
//
// # Files of a partition directory
//
//	00000000000000000000.log        batches, as producers sent them, offsets assigned
//	00000000000000000000.index      offset index: (last offset - base u32, position u32) BE
//	00000000000000000000.timeindex  time index:   (max timestamp so far i64, last offset - base u32) BE
//	00000000000000000000.txnindex   aborted transactions (Kafka's TransactionIndex), 34-byte entries:
//	                                version i16 (0) | producer id i64 | first offset i64 |
//	                                last offset i64 (the ABORT marker) | last stable offset i64, BE
//	00000000000000001234.log        the next segment, based at offset 1234 (20 digits)
//	...
//	leader-epoch-checkpoint         "0\n<count>\n<epoch> <start offset>\n..." (Kafka's format)
//	log-checkpoint                  "0\n<log start offset> <recovery point>\n"
//	clean-shutdown                  present only between a clean Close and the next Open
//	cleaner-checkpoint              "0\n<first dirty offset> <delete horizon or -1>\n" (compacted logs)
//	00000000000000000000.log.cleaned  a cleaned segment being written (and its .index.cleaned,
//	                                  .timeindex.cleaned); deleted by Open
//	00000000000000000000.log.swap     a committed cleaned segment; Open finishes its swap
//
// A .log file is a sequence of batches (see package batch for their
// layout). Index entries are added once more than index.interval.bytes of
// batches were written since the previous one, mapping the last offset of a
// batch to the position where it starts; index files are mmap'd for up to
// segment.index.bytes, grow (fallocate) in steps from one page as entries
// arrive, and are trimmed to their entries when the segment rolls or the
// log closes.
//
// # Write path
//
// Stage, Staging.Add and PrepareStaged (or Prepare, which stages the
// batches itself) check the batches as they are staged (copied into a
// direct write's staging buffer, where the check reads them from the
// cache), assign offsets (rewriting baseOffset and partitionLeaderEpoch in
// the staged bytes, outside the CRC), roll the segment if needed and return
// a Task whose ioring ops write all the batches with one writev, linked to
// an fdatasync under the flush policy always. The owner
// submits the ops of many logs at once and passes each completed op to
// Complete, which commits the append (indexes, LEO) or undoes it. A rolled
// segment is synced in the background; once it is durable the recovery
// point moves past it, so that recovery after a crash scans only the active
// segment.
//
// With Options.DirectWrites (direct.go) the active segment's appends are
// direct writes (O_DIRECT) from pooled staging buffers that start at the
// last partial block, into blocks reserved ahead with fallocate; the
// file's layout is unchanged, only its size runs ahead of the data until
// the roll's cut, a clean shutdown or recovery after a crash (which cuts
// the zeros as a torn tail, RecoveryInfo.ZeroBytes). The latest appends'
// buffers stay as the tail cache (tail.go): Read serves the part of a range
// they cover from memory (Region.Mem), pinned until Release.
//
// # Compaction
//
// A log whose cleanup.policy includes compact is cleaned as Kafka's
// LogCleaner does (clean.go): the keys of the dirty section (from the first
// dirty offset to the active segment, the last stable offset and
// min.compaction.lag.ms) are mapped to their latest offsets, and every
// segment below the map's end is rewritten, in groups of at most
// segment.bytes, without the records a later record of their key
// supersedes. Batches keep their baseOffset, lastOffsetDelta, maxTimestamp,
// producer fields and codec; a batch left without records is dropped,
// unless it is the last of its group or an active producer's last, which
// stay as bare headers. Tombstones get KIP-534's delete horizon and go once
// it has passed. A clean stops at the segment holding its upper bound (the
// last stable offset), drops the batches of aborted transactions and keeps
// a marker while data of its transaction is found, then gives it a delete
// horizon and removes it after (clean_txn.go, Kafka's
// CleanedTransactionMetadata). The cleaned segments are written under .cleaned names off
// the owner's goroutine, and swapped in on it: .cleaned -> .swap (the
// commit), install, old files removed, .swap -> final names.
//
// # Concurrency contract
//
// One goroutine owns a Log and calls the methods that change it (Prepare,
// Append, Complete of its ops, Truncate*, DeleteRecordsBefore,
// EnforceRetention, AssignEpoch, Flush, PrepareFlush, SetConfig, Close,
// CleanStatus, PlanClean, InstallClean, CleanNow). Clean runs on any
// goroutine (a cleaner's) and reads only through the plan's pinned
// segments; CleanResult.Discard may be called from any goroutine.
// Read, ReadBatches, OffsetForTimestamp, LEO, LogStartOffset, Size,
// Segments, EndOffsetForEpoch and Epochs may be called from any goroutine:
// readers pin an immutable, reference-counted list of segments and see
// each segment's committed size and end offset through one atomic word, so
// they never observe a batch whose write has not completed. A ReadResult
// keeps its files open until Release, even if retention deletes them.
//
// # Recovery
//
// After a clean Close the files are trusted (indexes sanity-checked, the
// tail after the last index entry walked). Otherwise every segment from the
// recovery point on is scanned: each batch is validated (length, magic,
// CRC-32C, counts, offsets going forward), indexes and leader epochs are
// rebuilt. Transaction indexes of scanned segments, and any that is
// missing or does not decode for its segment, are stale: the owner, who
// alone knows where each transaction began, rebuilds them from the log
// (TxnIndexStale, RebuildTxnIndexes). At the first invalid batch the log distinguishes a torn tail
// (nothing valid follows: cut silently) from corruption (a valid batch
// follows, in the same segment or a later one: ErrCorrupt, and the log does
// not open unless Options.RepairCorrupt says to cut there).
//
// # Non-obvious invariants
//
//   - baseOffset and partitionLeaderEpoch are outside the batch CRC (Kafka's
//     format): a bit flip there cannot be detected by the CRC. Offsets going
//     backwards are caught; a flip that moves an offset forward is not.
//   - Index entries map a batch's *last* offset to its *start* position, as
//     Kafka's do; lookup returns the entry at or below the target, and a scan
//     from there finds the batch holding it.
//   - Index mappings have a fixed length for the segment's life and are never
//     moved; a trimmed file only shrinks below entries nobody reads. The
//     mapping is longer than the file: no page past the file's end is ever
//     touched (a SIGBUS). Prepare grows the index files (fallocate, not a
//     sparse truncate: a store into a hole on a full disk is a SIGBUS too)
//     for every entry the append may add before anything is written, so a
//     full disk is an ENOSPC error of the append; Complete only stores into
//     room already allocated. Only Open (no readers yet) shrinks an index
//     below entries a reader may hold; a segment recreated over the files
//     of one still mapped zeroes its entries instead.
//   - full() is segment.index.bytes / entry size, not the mapping's length
//     (rounded up to a page): an index never holds more entries than its
//     file can keep.
//   - A failed fdatasync stops the log (Failed): the kernel may have dropped
//     the dirty pages, so only a reopen and recovery can say what is on disk.
//     A failed write is undone by truncating the file back; the log goes on.
//   - Read may end inside a batch when maxBytes cuts it, as Kafka's fetch
//     does; clients drop a partial trailing batch. minOne returns the first
//     batch whole (KIP-74).
//   - Truncation reuses the segment object: a reader that computed a region
//     before a truncation may find fewer bytes than it was told (a short
//     sendfile); the sender must treat that as the end of the response.
//   - segment.ms counts from the first batch's timestamp to the incoming
//     batches' timestamp (Kafka's rule), not from the wall clock, unless the
//     first batch carried no timestamp.
//   - The clean-shutdown marker is removed (and the directory synced) before
//     Open returns: a crash after any later append must lead to a scan.
//   - A cleaned segment covers exactly the offsets of the segments it
//     replaces: the last batch of a group is always written, emptied if
//     need be. That is what lets a .log.swap name the segments it replaces
//     (bases in [its base, its next offset)) with no manifest, so that Open
//     settles an interrupted swap the same way every time. Were the last
//     batch dropped, an old segment based above the cleaned segment's end
//     would survive the recovery beside it.
//   - Offsets have gaps after compaction, inside segments and between them:
//     a segment's next offset may be below the next segment's base, and a
//     read at a removed offset starts at the next batch that remains.
//   - The first old segment of a group has the cleaned segment's name: its
//     files are replaced by rename, never removed by path (dropSegment would
//     delete the new files), and its handles close at the last release.
//   - A cleaned segment's indexes are renamed to their final names before
//     its .log: once no .log.swap exists, the indexes match. Open rebuilds
//     the indexes of every segment it completes from a .swap anyway.
//   - The .swap commit is decided on the owner's goroutine, after checking
//     that the planned segments are still there unchanged and that no
//     truncation happened since the plan: a committed .swap written for a
//     log that moved on would resurrect data at the next Open.
//   - A delete horizon replaces a batch's baseTimestamp (KIP-534); the
//     records' timestamp deltas are recomputed from it, so that base+delta
//     still gives every record its own timestamp.
//   - Every segment has a .txnindex, empty when nothing was aborted in it,
//     so that a missing one is known to be lost; its entries are also held
//     in memory (readers load them atomically) and the file is opened only
//     to write or sync it: no fourth descriptor per segment.
//   - A cleaned segment's .txnindex names only aborted transactions whose
//     ABORT marker it keeps with data of theirs: a consumer told of one
//     whose marker is gone would skip the producer's later records while
//     waiting for it.
//   - Compaction keeps maxTimestamp of every batch it rewrites, so the time
//     index and time-based retention of compact,delete logs see the same
//     segment times as before.
package segment
