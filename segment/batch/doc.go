// Package batch parses, validates and rewrites Kafka record batches (magic 2,
// the format of Kafka 0.11 onwards, KIP-98), the unit in which ringlog
// receives, stores and serves records.
//
// A batch is stored as the producer sent it, so this package is where its
// bytes are judged. The Kafka protocol layer validates each batch of a
// produce request (Split, then Validate with Strict, then CheckRecords for a
// compressed batch); the log assigns offsets and stamps the leader epoch in
// place (SetBaseOffset, SetPartitionLeaderEpoch, SetMaxTimestamp) and
// appends; after a crash, recovery walks the tail segment and cuts it at the
// first batch that Validate rejects under Stored. The fetch path walks
// headers only (ParseHeader) to find byte ranges, and a follower keeps the
// whole batches of what it fetched (WholePrefix: a byte limit may cut the
// last one). Log compaction will read
// records (Records) and write new batches (Build, Compress).
//
// # Format
//
// Every integer of the header is big-endian. The CRC is a CRC-32C
// (Castagnoli) over everything from the attributes to the end of the batch.
//
//	 0                   8            12                   16     17
//	 +-------------------+------------+--------------------+------+--------+
//	 | baseOffset int64  | length i32 | partitionLeader-   |magic | crc    |
//	 |                   |            | Epoch int32        |int8=2| uint32 |
//	 +-------------------+------------+--------------------+------+--------+
//	 |<------ LengthPrefix = 12 ----->|<- counted by length, to the end --->
//	 |<----------- outside the CRC ------------------------------->|
//	21           23                 27                 35
//	 +-----------+------------------+------------------+------------------+
//	 |attributes | lastOffsetDelta  | baseTimestamp    | maxTimestamp     |
//	 |int16      | int32            | int64            | int64            |
//	 +-----------+------------------+------------------+------------------+
//	43                 51          53              57           61
//	 +-----------------+-----------+---------------+------------+-------...
//	 | producerId      | producer- | baseSequence  | records-   | records
//	 | int64           | Epoch i16 | int32         | Count i32  | (maybe
//	 +-----------------+-----------+---------------+------------+  compressed)
//	 |<--------------------- covered by the CRC, from 21 to the end ------->
//
//	attributes: bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)
//	            bit 3 timestampType (1 = LogAppendTime)
//	            bit 4 transactional, bit 5 control
//	            bit 6 hasDeleteHorizonMs (KIP-534), bits 7-15 unused
//
// The records section holds recordsCount records, compressed as one stream
// when the codec is not none. A record is a sequence of zigzag varints
// (int32, at most 5 bytes) and varlongs (int64, at most 10 bytes):
//
//	length          varint   bytes that follow, to the record's end
//	attributes      int8     unused
//	timestampDelta  varlong  from baseTimestamp
//	offsetDelta     varint   from baseOffset
//	keyLength       varint   -1 = null
//	key             bytes
//	valueLength     varint   -1 = null (a tombstone)
//	value           bytes
//	headersCount    varint
//	headers         headersCount times:
//	    headerKeyLength    varint (never negative)
//	    headerKey          bytes (UTF-8)
//	    headerValueLength  varint  -1 = null
//	    headerValue        bytes
//
// A control batch (transactional and control bits set; only the broker
// writes one) holds one record, a transaction marker (marker.go,
// MarkerBatch and ParseMarker):
//
//	key    version int16 (0) | type int16 (0 ABORT, 1 COMMIT)
//	value  version int16 (0) | coordinatorEpoch int32
//
// # Errors
//
// Bytes reach this package from the network and from files that a crash may
// have torn, so no input makes it panic, and nothing is allocated from a
// count read off the wire: a declared count is first checked against the
// bytes that must hold it, and decompression stops at a limit the caller
// gives. Every error wraps one sentinel (see errors.go); the framing errors
// (ErrShort, ErrLength, ErrMagic, ErrCRC) are Kafka's CORRUPT_MESSAGE, the
// content errors are INVALID_RECORD.
//
// # Concurrency
//
// Every function is pure apart from the bytes it is given: none keeps state
// between calls, and all are safe to call from any goroutine at once, as
// long as no two goroutines touch the same batch while one rewrites it. The
// codecs are shared behind the scenes: gzip and LZ4 coders come from
// sync.Pools, and one zstd decoder and one zstd encoder serve the whole
// process. Those run at most GOMAXPROCS operations at once; a further call
// waits for one to finish, which bounds zstd's memory (a decode keeps
// about a block of scratch space besides its output) by the CPU count
// rather than by the number of connections.
//
// # Non-obvious invariants
//
//   - baseOffset and partitionLeaderEpoch lie outside the CRC, so the broker
//     assigns offsets and stamps the epoch without touching it. Anything
//     from the attributes on is inside it.
//   - lastOffsetDelta, not recordsCount, says which offsets a batch covers.
//     Compaction removes records and keeps lastOffsetDelta, and may leave a
//     batch with no records at all, so that the offsets of the batches after
//     it do not move. A stored batch thus only satisfies
//     recordsCount-1 <= lastOffsetDelta, and its offset deltas only
//     increase; a producer batch satisfies equality, with deltas 0..n-1.
//   - lastOffsetDelta >= 0 for every valid batch, even an emptied one (it
//     keeps the delta of the batch it was), so NextOffset always moves
//     forward and a walk by offsets cannot loop.
//   - Rewriting maxTimestamp for LogAppendTime topics also sets the
//     timestampType bit, and both are inside the CRC, so the CRC changes.
//     SetMaxTimestamp updates it from the changed bytes instead of
//     recomputing it, which keeps a corrupt batch detectably corrupt.
//   - In a LogAppendTime batch the records' timestamp deltas mean nothing:
//     every record's timestamp is the batch's maxTimestamp.
//   - A null key or value (length -1) is not an empty one (length 0): a
//     null value is a tombstone to compaction. Record keeps the distinction
//     as nil versus a non-nil empty slice, and AppendRecord writes it back.
//   - When hasDeleteHorizonMs is set, baseTimestamp is the compaction
//     delete horizon, yet record timestamps are still computed from it;
//     Kafka does the same.
//   - Snappy arrives in two framings (xerial from Java, raw blocks from
//     franz-go and librdkafka), told apart by the xerial magic; this
//     package writes raw blocks, which every client reads.
//   - A CRC match proves the bytes are what the producer wrote, not that they
//     make sense: CRC first, then the count and record checks, so that an
//     error after a good CRC is the producer's doing (INVALID_RECORD), not
//     damage in transit or on disk.
package batch
