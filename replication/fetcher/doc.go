// Package fetcher is a follower's fetch side of replication: one Stream per
// (follower, leader broker) pair, one TCP connection, carrying Kafka Fetch
// requests (replica id set) for every partition the follower copies from
// that leader, several requests in flight at once, and the
// OffsetForLeaderEpoch round a follower makes before fetching after a
// leader change (KIP-101, KIP-279).
//
// The package moves bytes and keeps order; it decides nothing about logs.
// Appending records, where to truncate, what to do with an out-of-range
// offset and what a pause means belong to the caller (package
// replication), through Handler. It knows nothing of package kafka or of
// engine's internals (engine.TP is the only name it borrows).
//
// # Wire format
//
// Kafka's framing, request header v1 (v2 with tags for flexible versions),
// bodies encoded and decoded by kmsg:
//
//	request:  int32 length | int16 api_key | int16 api_version | int32 correlation_id
//	          | nullable_string client_id | [tagged fields if flexible] | body
//	response: int32 length | int32 correlation_id | [tagged fields if flexible,
//	          never for ApiVersions] | body
//
// A connection starts with ApiVersions (v3, falling back per KIP-511) and
// uses the highest common version of Fetch (v4 up to Config.FetchVersionMax,
// 16 by default; v13+ names topics by id, v12 is used for a request with a
// partition that has none; v15+ sends the replica as ReplicaState{ID, Epoch},
// KIP-903) and of OffsetForLeaderEpoch (v3 or v4, the versions with a
// replica id). From Fetch v7 the fetches go in fetch sessions (KIP-227,
// below).
//
// On a leader whose inter-broker listener is secured, the connection is
// TLS (Config.TLS; the leader's certificate must name Addr's host unless
// the configuration says otherwise), and SASL (Config.SASL) runs between
// ApiVersions and the first Fetch: SaslHandshake v1, then SaslAuthenticate
// (v1 or v2) until the mechanism completes, its messages made by a
// franz-go client mechanism. A session with a lifetime (KIP-368) is not
// renewed in place: the stream replaces the connection at 85 to 95% of it,
// the requests in flight sent again from the same offsets.
//
// Records come as the leader's raw RecordBatch bytes. A leader cuts the last
// batch of a partition where a byte limit falls; the stream trims every
// partition's bytes to whole batches by walking the batch headers
// (batch.WholePrefix, segment/batch being the one reader of the format)
//
//	int64 baseOffset | int32 batchLength | int32 partitionLeaderEpoch | int8 magic (2) | ...
//	<------------------------- 12 + batchLength bytes -------------------------------->
//
// before the handler sees them. A partition that got only a cut batch goes
// first in its next request, where KIP-74 has the leader send the first
// batch whole.
//
// # Pipelining
//
// Partitions are spread over Config.Slots slots (disjoint subsets, each new
// partition to the slot with the fewest). A slot has at most one Fetch in
// flight, so at most Slots fetches (plus one OffsetForLeaderEpoch) are in
// flight on the connection, and a partition is never in two requests at
// once: it is taken by a request, handed to the handler, and fetched again
// only after the handler's done. Per-partition order follows. The gain is
// overlap: while one slot's batches are being appended (and fsynced) by the
// follower, the other slots' fetches are on the wire or being served.
//
// Kafka answers a connection's requests in order (Kafka serves them one at
// a time; ringlog serves them concurrently but replies in order), so a long
// poll (max_wait_ms) holds every response behind it. Hence:
//
//   - A slot whose last response carried records is "hot": it fetches
//     without waiting (max_wait 0) as soon as its partitions are back from
//     the handler. A "cold" one (last response empty) fetches again without
//     waiting after Config.IdleRecheck, so that partitions that wake up
//     while others stream are not starved.
//   - A long poll (max wait Config.WaitMax, min_bytes 1) is sent only when
//     the stream is quiet and idle (nothing in flight, no partition with
//     the handler, no hot slot), and then one request carries every
//     fetchable partition of every slot. Nothing is sent behind it, and
//     its wait ends no later than the earliest partition backoff. Partitions
//     added or resumed during it wait for its end (at most WaitMax), as they
//     wait for the fetch in progress in Kafka's fetcher.
//   - Hot slots never merge into one request even when their partitions
//     come back together (a shard's group commit finishes them at once):
//     that would put the slots in lockstep, one request per round, with no
//     overlap between the follower's appends and the fetches.
//
// Pipelining pays when rounds are small, as a caught-up follower's are.
// BenchmarkCopy (16 partitions from ringlog's broker on a loaded 2-core
// machine; medians of 3): with 16 KiB per partition per fetch and a 2 ms
// commit per shard round, 1 slot copies 0.25M records/s, 4 slots 0.79M,
// 8 slots 1.07M. With 256 KiB per partition (catching up) the copy is
// CPU-bound there and slots change little (1.6M to 2.3M, within noise).
//   - Nothing spins: a long poll returns on data, error or max wait (and
//     one that returns early and empty holds the next for RetryBackoff); a
//     hot slot's empty answer makes it cold; a cold slot fetches at most once
//     per IdleRecheck; partitions with retriable errors back off
//     exponentially; reconnects back off exponentially with jitter.
//
// # Fetch sessions
//
// Each slot's requests, and the merged long polls, go in a fetch session
// of their own with the leader (KIP-227; a "lane", session.go): Slots+1
// sessions per stream, each counting against the leader's
// max.incremental.fetch.session.cache.slots. A lane's first request is a
// full fetch (session epoch 0) naming its partitions; its next ones are
// incremental (epoch 1, 2, ...), naming only the partitions whose fetch
// offset, log start offset or leader epoch changed since the lane last
// told the leader, and forgetting (forgotten_topics_data) those the
// session holds that the request does not fetch. The leader reads every
// partition of the session on each fetch and answers only those with
// news (records, a new high watermark or log start offset, an error): a
// stream of 1,000 idle partitions sends Fetch requests of 58 bytes, not
// about 33,000, and a trickle of records keeps them near 100
// (BenchmarkSessionRequestBytes).
//
//	request (incremental):  session_id S | session_epoch E | topics: [changed partitions]
//	                        | forgotten_topics_data: [partitions left out of this request]
//	response:               session_id S | topics: [partitions with news]
//
// A lane goes back to a full fetch after FETCH_SESSION_ID_NOT_FOUND (the
// leader evicted the session: a new one is opened), INVALID_FETCH_SESSION_EPOCH
// or FETCH_SESSION_TOPIC_ID_ERROR (the old id goes with epoch 0, which
// closes it), any other response-level error, a lost connection, a switch
// between v12 and v13+ (names and ids do not mix in a session), a request
// carrying a partition whose last answer was a cut batch, and an Add of a
// partition the session holds. A leader that opens no session (session id
// 0 in the answer) gets full fetches, each asking for one. Close ends the
// sessions with a Fetch at epoch -1 before it closes the connection.
//
// # Replication throttle
//
// With Config.Throttle set, a partition that has not caught up with the
// leader's high watermark (as of its last fetch) is left out of the
// requests while the throttle holds it (KIP-73: its rate is over
// follower.replication.throttled.rate), and the session forgets it
// meanwhile, as it forgets any partition a request does not fetch; the
// stream looks again when the hold ends. Every fetched partition's record
// bytes are reported to the throttle, which counts the throttled ones.
//
// # Errors
//
// OFFSET_OUT_OF_RANGE goes to Handler.OutOfRange with the leader's log
// start and HW. NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
// UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID and
// INCONSISTENT_TOPIC_ID pause the partition and go to Handler.Paused: they
// need a metadata change the caller learns first (a new leader or epoch).
// Other partition errors (KAFKA_STORAGE_ERROR, ...) back off and retry. A
// lost connection, a frame above Config.FrameBytesMax (ErrFrameTooLarge),
// a response that does not decode (ErrProtocol) or a silent leader
// (ErrRequestTimeout, WaitMax + RequestTimeout) closes the connection; the
// partitions of the requests in flight keep their offsets, and the stream
// reconnects with backoff. A failed TLS handshake or SASL exchange
// (ErrAuthentication) is a connection error like these: the stream keeps
// trying, with backoff, so that followers started before their credential
// exists (a SCRAM user created after the cluster) get in once it does.
// TOPIC_AUTHORIZATION_FAILED (a principal the leader does not take for a
// broker) backs the partition off and retries.
//
// # Concurrency contract
//
// New starts the stream's loop goroutine (connects, decides, writes,
// applies responses, calls the handler); each connection adds a reader
// goroutine (reads and decodes frames). Add, Remove, Pause, Resume, Stats
// and Close may be called from any goroutine, including from inside a
// handler method. Handler methods are called on the loop goroutine, one at
// a time and in order per partition, and must not block; the done
// functions they receive may be called from any goroutine, inline or
// later, at most once. A call already under way when Remove, Pause or a
// replacing Add returns may still complete; its done is then ignored.
// Close lets the loop end the fetch sessions and close the socket (it
// closes the socket itself after 100 ms, so that a write blocked on a
// leader that stopped reading ends) and waits for the goroutines (bounded
// by its context: only a blocking handler can hold them).
//
// # Non-obvious invariants
//
//   - A request is queued for the reader, with its correlation id already
//     set, before its bytes are written: otherwise a fast leader's response
//     can arrive before the reader knows what it answers.
//   - A partition removed or replaced (Add) while in a request stays held by
//     that request until its response comes, and the answer is dropped by
//     generation; it is never in two requests at once.
//   - The handler's done clears the partition's busy state before the next
//     fetch can be decided; a handler call is never made with the stream's
//     lock held, because done takes it (a handler may call done inline).
//   - The frame buffer grows with the bytes that arrive (64 KiB, then
//     eightfold), so a lying length costs little memory; the length is
//     checked against FrameBytesMax before anything is allocated.
//   - The response to a Fetch is matched to partitions by topic id on v13+
//     and by name before; a request mixing partitions with and without ids
//     is sent as v12.
//   - The records handed to Records are capped slices of the response
//     buffer: the partitions of one response share it, and an append by
//     one caller must not write into the next partition's bytes.
//   - Tests must fetch from the leader's batch boundaries: kgo splits a
//     produce into batches as it likes, and a fetch inside a batch returns
//     the whole batch, from before the offset asked (a flaky test once).
//   - A caught-up stream goes quiet between rounds; were hot slots merged
//     into its long poll then, the pipeline would collapse into one request
//     per round (it did, before the hot-slot rule).
//   - A fetch session has at most one request in flight: a slot's session
//     is used only by that slot's requests, and the merged long poll has a
//     session of its own (it holds every slot's partitions; sharing a
//     slot's would put two requests of one session in flight, and the
//     second would meet INVALID_FETCH_SESSION_EPOCH).
//   - After each request a session holds exactly that request's
//     partitions, at the offsets the follower has now. A partition with
//     the handler is forgotten, never left in the session: the leader
//     would read it again from the old offset (the same records twice)
//     and take that offset for the follower's LEO.
//   - An incremental request never names and forgets the same partition:
//     the leader adds the named ones and then drops the forgotten ones.
//   - A partition missing from an incremental answer had nothing new; it
//     is neither an error nor caught up (a full fetch's answer must name
//     every partition: one missing there is ErrProtocol, as before).
//   - The leader sends a partition's high watermark only when it differs
//     from what it last sent that session. Add starts a partition with no
//     high watermark known, so a session still holding it (no request
//     forgot it since) fetches in full next, or the follower would not
//     learn the HW until it moved.
//   - KIP-74's whole first batch goes to the first partition with data in
//     the leader's read order, which for an incremental fetch is the
//     session's, not the request's: a partition whose last answer was a
//     cut batch goes first in a full fetch.
//   - The leader counts every partition of a follower's session as fetched
//     at its cached offset on every fetch (kafka/fetch_session.go), so the
//     ISR and the HW see the progress of partitions no request names
//     (TestSessionFollowerISR). A session answers only the replica id that
//     opened it.
package fetcher
