// Package kafka is ringlog's Kafka protocol: it decodes requests with
// franz-go's kmsg, calls the engine, and encodes the responses (the fetch
// response by hand, because it interleaves bytes and file regions). It
// knows nothing of sockets: netpoll hands it frames and takes its
// responses.
//
// One file per API, named after its key as franz-go's kfake names them
// (00_produce.go, 03_metadata.go, ...); each registers itself in init with
// the versions it serves, and ApiVersions advertises exactly that registry.
//
// # A request's path
//
//	netpoll frame (size prefix removed)
//	  -> parseHeader     api key, version, correlation id, client id
//	  -> registry check  unknown key or version: close the connection
//	                     (ApiVersions: answer UNSUPPORTED_VERSION, KIP-511)
//	  -> size limit      MaxRequestBytes for all but Produce
//	  -> api.check       Produce: checkProduceShape bounds what decoding
//	                     will allocate before kmsg allocates it
//	  -> kmsg decode     panics recovered; failure closes the connection
//	  -> handler         sync: own goroutine, returns the response;
//	                     async: network goroutine, answers later
//	  -> reqCtx.reply / replyRaw / noReply, exactly once
//
// parseRequest is that path up to the handler, with no connection, which
// is what FuzzRequest drives.
//
// # Metadata and leadership
//
// Every Server that serves has a Node (Config.Node): this broker's part in
// its metadata quorum, a real one or, for a broker alone, a local quorum
// whose only voter it is. There is one path, whatever the cluster's size:
//
//   - Metadata, DescribeCluster and FindCoordinator answer from the
//     controller's image as the node last applied it (so the engine
//     matches what clients are told);
//   - Fetch, ListOffsets, DeleteRecords and OffsetForLeaderEpoch ask the
//     node whether this broker leads the partition (leaderCode), Produce
//     the engine, whose roles the node sets; a follower's Fetch is judged
//     by the node;
//   - topic administration (CreateTopics, DeleteTopics, CreatePartitions,
//     AlterConfigs, IncrementalAlterConfigs, and the topics Metadata and
//     FindCoordinator create) is a write to the controller, answered once
//     this broker applied it (waitApplied).
//
// # Concurrency contract
//
// Server.Serve and Server.Closed run on a connection's network goroutine
// (a gnet event loop or the portable reader), in request order for the
// connection, and must not block. Sync handlers run on a goroutine of their
// own each and may block (disk, shard round trips). Async handlers run on
// the network goroutine and must not block; the engine's done callbacks
// they register run on shard goroutines and must not block either: they
// encode and reply. reqCtx.reply may be called from any goroutine.
//
// # Non-obvious invariants
//
//   - Produce calls engine.Append in request order: on the network
//     goroutine, or, while a transactional request waits for the
//     coordinator's verification (KIP-890, txn_verify.go), from the
//     connection's produceOrder, which holds every later request back until
//     it ran: an idempotent producer with several requests in flight on one
//     connection relies on its batches reaching each partition in the
//     order sent (a batch overtaking the one before it is
//     OUT_OF_ORDER_SEQUENCE_NUMBER; verifications finishing out of order
//     did that once, TestTxnPipelinedProducesStayInOrder).
//   - The transaction APIs (engine/txn) are async handlers like the group
//     APIs; the coordinator's markers go out through MarkerSender, which
//     answers the coordinator from goroutines of its own, never a shard's.
//     A marker on a partition of __consumer_offsets is reported to the
//     group coordinator from the append's done callback, on that
//     partition's shard (group.Coordinator.TxnCompleted).
//   - A multi-partition produce holds one count of its own until it has
//     issued every append, so that a done callback firing at once (an
//     error found before queueing, or a fast shard) cannot send the
//     response while the handler still fills it in.
//   - kmsg bounds an array count by the bytes left, not by what the
//     elements cost: a 100 MiB Produce frame of two-byte topic entries
//     would decode into gigabytes of structures. Every request but Produce
//     is held to MaxRequestBytes; Produce's structures are counted by
//     checkProduceShape before decoding (TestBadInput shows the half-GiB
//     spike it prevents).
//   - An API key read off the wire may be negative or above the registry:
//     it is range-checked before indexing (it once was not, and a
//     negative key would have panicked the network goroutine).
//   - The group APIs (engine/group) are async handlers whose answer may
//     wait for a whole rebalance. A graceful stop closes the group
//     coordinator first (parked JoinGroup and SyncGroup requests are then
//     answered NOT_COORDINATOR), or the network's drain would wait for
//     them as it would for parked fetches without StopLongPolls.
//   - Handlers assume Config.Node is set; a Server without one may only
//     parse (FuzzRequest). A test broker once wired the protocol without
//     a Node, and each of its Fetch requests panicked in leaderCode: test
//     brokers are started with broker.Start, the binary's wiring.
//   - A Server must be complete before it serves: its configuration is
//     read by handlers on other goroutines without locks (the test helper
//     once set the advertised port after Listen, a data race).
//   - OFFSET_OUT_OF_RANGE carries offsets -1 to a consumer, as Kafka's does,
//     but the partition's offsets to a follower: replication/fetcher resets
//     from them. The two share readDone, which is told which it answers.
//   - An add to a transaction (KIP-890 part 2: a v2 producer's Produce,
//     TxnOffsetCommit v5) has one outcome for all its partitions, but
//     another broker's coordinator answers it per partition: txnPartitions
//     folds that into one code. TxnOffsetCommit read only the request's
//     code and wrote offsets the remote coordinator had refused to add,
//     pending outside any transaction for ever (found by franz-go's
//     TestTxnEtl on three brokers).
//   - Where Kafka's answers are compared with these (internal/difftest),
//     a difference kept on purpose is written down in that package's
//     README.md; change one of these answers and the comparison says so.
//   - ListTransactions' id pattern (v2, KIP-1152) is compiled alone before
//     it is anchored for a whole-id match: wrapped first, an unbalanced
//     pattern such as `a)|(b` compiles, where Kafka's RE2/J refuses it
//     (INVALID_REGULAR_EXPRESSION). It is matched off the coordinator's
//     shards: matching is linear, but in the pattern's size times the id's.
//   - With an authorizer (authz.go), a request that is partly allowed
//     (OffsetCommit's topics, OffsetFetch's and DescribeGroups' groups) is
//     split here: the refused parts are answered by the handler, the
//     coordinator gets a copy holding the rest, and the two answers are
//     merged in Kafka's order. The coordinators know nothing of ACLs.
//     Some decisions are made in a coordinator's reply (ListGroups, an
//     OffsetFetch of every topic, DescribeGroups' operations), on a shard
//     goroutine while the connection may ask others: the connection's
//     decision cache is locked for that reason.
package kafka
