// Package streams is a stream-processing library for Go with Kafka
// Streams' semantics: typed topologies of streams and tables, state
// stores local to each task and backed by changelog topics, tasks that
// follow consumer-group assignment across instances, at-least-once and
// exactly-once processing, and interactive queries. It is a Kafka client
// (franz-go's kgo and kadm) that imports no broker package: it runs
// against ringlog, Apache Kafka, Redpanda or kfake alike.
//
// # A topology
//
//	b := streams.NewBuilder()
//	lines := streams.Source(b, []string{"lines"}, streams.String, streams.String)
//	words := streams.FlatMapValues(lines, strings.Fields)
//	byWord := streams.GroupBy(words, func(_, w string) string { return w },
//		streams.KeySerde(streams.String), streams.ValueSerde(streams.String))
//	streams.Count(byWord, streams.Named("counts")).ToStream().To("word-counts")
//	topo, err := b.Build()          // topology mistakes, all of them
//	app, err := streams.New(topo, streams.Config{ApplicationID: "wc", Brokers: ..., StateDir: ...})
//	err = app.Start(ctx)            // mistakes only the cluster shows; then runs
//	q, err := streams.Query[string, int64](app, "counts")
//	n, ok, err := q.Get("kafka")    // read locally, committed state
//
// Go methods take no type parameters, so operations that change the key
// or value type are functions (Map, MapValues, FlatMap, FlatMapValues,
// SelectKey, GroupBy, GroupByKey, Count, Reduce, Aggregate) and those
// that keep them are methods (Filter, Peek, Branch, Merge, To). Records
// flow between processors as typed Record[K, V] values through direct
// function calls built once per task: no interface boxing per record.
//
// # Names Kafka Streams users know
//
//	processor names      KSTREAM-MAP-0000000003 (generated) or Named("...")
//	task ids             <subtopology>_<partition>, e.g. 1_3
//	repartition topics   <application id>-<name>-repartition
//	foreign-key joins    <application id>-<name>-subscription-registration-topic,
//	                     <application id>-<name>-subscription-response-topic
//	changelog topics     <application id>-<store>-changelog (compacted)
//	consumer group       <application id>
//	transactional id     <application id>-<instance id> (exactly once)
//	state directory      <StateDir>/<application id>/<task id>/ (pebble)
//
// A key changed by Map, FlatMap or SelectKey marks the stream: a
// stateful operation after it writes the records to a repartition topic
// and reads them back keyed by the new key, so each key's records meet
// in one task. The repartition topic has the partitions of the
// subtopology that writes it; changelogs have one partition per task.
//
// # State
//
// Each task keeps its stores in one pebble database (store.go draws the
// key layout). Writes between two commits stay in an indexed batch that
// the task reads through; they reach the database only after the commit
// made their changelog records durable (at least once: acknowledged;
// exactly once: the transaction committed), together with the
// changelog offset reached (the checkpoint). So the local state is
// never ahead of the changelog, and a crashed instance's state needs no
// wipe under exactly once (Kafka Streams wipes it; KIP-892 is the same
// idea for RocksDB). A task assigned to an instance restores each store
// from its checkpoint (or the start) to the changelog's high watermark
// before it processes a record, reporting progress through
// Config.OnRestore, Stats and Collector. The restore runs a fetch at a
// time between the loop's polls (restoring.go), so the instance's other
// tasks go on and rebalances are not held back; a query of a restoring
// store answers ErrStoreRestoring.
//
// Count, Reduce and Aggregate stores, WindowedCount and
// WindowedAggregate over TimeWindows, and tables read from topics
// (TableFrom) have Kafka's record cache (KIP-63;
// cache.go) when Config.CacheMaxBytes > 0 (DefaultCacheMaxBytes is
// Kafka's 10 MiB; the zero Config has none): a key's updates are merged
// in memory and written to the store and the changelog, and forwarded
// downstream, once per commit or when the key is evicted (least
// recently used first, the instance's cache over its bound). Exactly
// once, the cache is flushed into the transaction before it commits and
// dropped with an abort. Without the cache every update is forwarded.
//
// # Tasks and instances
//
// Instances of one application join one consumer group with a balancer
// of this package (assignor.go): it assigns whole tasks, all the
// partitions of a task to one member, sticky and cooperative (KIP-429).
// A partition-level balancer could split a task between members.
//
// With Config.NumStandbyReplicas = N > 0 (Kafka's num.standby.replicas)
// the balancer also gives each task with stores up to N standbys, on
// members other than the one running it, in the assignment's UserData
// (a task list, drawn in assignor.go); members list the standbys they
// hold in their subscription's UserData, and a task that must move goes
// to a member holding it as a standby when it has room. A standby reads
// the task's changelogs into the task's own state directory with the
// restore's code and checkpoints (standby.go), so a task becoming active
// where its standby was restores only the rest. Standbys are not
// queryable and report through Stats.Standbys.
//
// A SourcePattern source reads every topic whose whole name matches,
// including topics created after Start: the topics are listed again
// every Config.MetadataMaxAge (Kafka's metadata.max.age.ms, 5 minutes by
// default), a new match's partition p joins task <sub>_p, and a deleted
// one leaves (patterns.go). A subtopology with stores keeps its partition
// count: a new topic with another count stops the application with
// ErrCopartition; a stateless one takes any count, with as many tasks as
// its largest source has partitions.
//
// # Guarantees
//
// At least once: each commit flushes the producer (outputs, repartition
// records and changelogs), writes the stores, then commits the input
// offsets. A crash replays what was processed since the last commit.
//
// Exactly once: kgo's GroupTransactSession; outputs, changelog records
// and input offsets are one transaction per commit interval (KIP-447:
// the group generation fences a zombie at TxnOffsetCommit; the
// transactional id, kept across restarts by Config.InstanceID, fences the
// previous life of this instance at InitProducerId, which Start calls
// before restoring anything). An aborted transaction (a rebalance during
// it) drops the tasks' pending writes and kgo rewinds to the committed
// offsets.
//
// # Compared with goka
//
// goka (github.com/lovoo/goka) is the Go library most used for this
// today; it could not be fetched here, so this comparison is on paper.
//
//	                          goka                      streams
//	typed DSL                 codecs per group, any     generics: Stream[K,V], Table[K,V]
//	stateless operators       in the callback           Map, Filter, FlatMap, Branch, Merge, ...
//	repartition               explicit Loopback         automatic after a key change
//	tables, global tables     group table, Lookup/View  Table, TableFrom, NewGlobalTable
//	state store               LevelDB + group table     pebble + <app>-<store>-changelog
//	exactly once              no                        yes (transactions, KIP-447)
//	windows                   no                        tumbling, hopping, sliding, session (grace, late counted), suppression
//	stream-stream joins       no                        windowed inner, left, outer (grace, KIP-633)
//	stream-table joins        Join, Lookup              JoinWithTable, LeftJoinWithTable, JoinWithGlobalTable
//	table-table joins         no                        JoinTables, LeftJoinTables, OuterJoinTables
//	foreign-key table joins   no                        JoinTablesByForeignKey, LeftJoinTablesByForeignKey (KIP-213)
//	co-partitioning           checked at start          checked at Start, per join; repartition topics sized to match
//	interactive queries       View (a whole table)      Store(name).Get(key), per instance
//	topology checked at start partly                    Build and Start, all mistakes at once
//	standby replicas          no                        NumStandbyReplicas (changelogs read ahead)
//	pattern sources           no                        SourcePattern, new matching topics picked up
//	low-level processors      the group callback        Process, with stores and punctuation
//
// # Concurrency
//
// One goroutine per instance processes records, commits and restores
// (Kafka's one stream thread). Rebalance callbacks hand partitions to it;
// at least once, the revoke callback commits under App.mu, between polls
// (BlockRebalanceOnPoll). App.Store, Query, Stats and Collector are safe
// from any goroutine: they read committed state under App.tasksMu.
// Standby tasks have a goroutine of their own (their kgo client's
// polls), which applies each fetch under standbys.mu; the processing
// goroutine opens and closes them between polls, under the same lock.
//
// # Windows
//
// WindowedBy(GroupByKey(s), w) and WindowedCount / WindowedAggregate give
// a Table[Windowed[K], A], in event time (the record timestamp), for
//
//   - TimeWindows{Size, Advance, Grace}: Kafka's tumbling and hopping
//     windows, aligned to the epoch, [start, end). A record is dropped
//     from each window that closed (end <= stream time - grace).
//   - SlidingWindows{TimeDifference, Grace}: windows defined by the
//     records, [start, end] inclusive: each record's left window
//     [t-d, t] and, when it holds records, its right window [t+1, t+1+d].
//     A new window's aggregate is a copy of an existing window holding
//     the same records (sliding.go, slidingPlan), never a subtraction.
//
// SessionWindowedBy(g, SessionWindows{Gap, Grace}) with SessionCount,
// SessionReduce or SessionAggregate (with a merger) gives sessions: a
// record within Gap of sessions of its key merges them into one.
// Late records (past grace; for sessions grace + gap) are dropped and
// counted (TaskStats.Dropped).
//
// Stream time is the task's: the largest record timestamp of its input
// partitions (repartition topics included). Each partition's time is
// committed with its offset, in the offset commit's metadata (Kafka's
// TopicPartitionMetadata encoding; the TxnOffsetCommit under exactly
// once), and a task starting on any instance reads it back
// (streamtime.go): windows close, grace expires and suppression emits
// after a restart or a task move as if the application had never
// stopped. An aborted transaction rewinds the times with the offsets.
// Kafka restores the task's time too, but its window and suppression
// processors keep their own in memory, from zero after a restart; here
// they read the task's.
//
// Store keys, shared by the changelog and the output's serdes:
//
//	time and sliding windows  key bytes | start u64 BE           (WindowedSerde, Kafka's TimeWindowedSerde)
//	sessions                  key bytes | end u64 BE | start u64 BE (SessionWindowedSerde, SessionKeySchema)
//	suppression buffer        final time u64 BE | windowed key    -> record ts u64 BE | value
//
// A sliding window's value is its largest record timestamp (u64 BE) then
// the aggregate. Windows older than the store's retention (Retention;
// Kafka's defaults: size + grace, 2d + grace, gap + grace) are deleted
// and tombstoned in the changelog, checked every max(retention/2, 1 s) of
// stream time (Kafka drops time segments; pebble has none here).
//
// Suppress(table, UntilWindowCloses()) emits each window's final result
// once stream time passes the time it can no longer change (end + grace;
// sliding and sessions, whose ends are inclusive, one millisecond later,
// sessions also + gap). Its buffer is a store with a changelog, written in
// the commit (the transaction, exactly once) that emits: after a crash a
// window is emitted once. UntilWindowCloses(BufferConfig{MaxRecords: n})
// (or MaxBytes) bounds it strictly: past the bound the application stops
// with ErrBufferFull (Kafka's shutDownWhenFull).
//
// SuppressTable(table, UntilTimeLimit(d, BufferConfig{...})) (or
// Suppress on a windowed table) emits each key's latest update once d
// of stream time has passed since its first buffered update (Kafka's
// untilTimeLimit, non-resetting), and earlier when the buffer is over
// BufferConfig's MaxRecords or MaxBytes with EmitEarlyWhenFull, oldest
// first; with ShutDownWhenFull (the zero value) a full buffer stops the
// application with ErrBufferFull. Its buffer is a store with a
// changelog too (suppress_limit.go draws it); the keys' buffer times and
// sizes are also kept in memory, read again from the store after a
// restore or an aborted transaction.
//
// # Joins
//
// Join, LeftJoin and OuterJoin join two streams within JoinWindows
// {Before, After, Grace}, as Kafka's KStreamKStreamJoin (3.1+): each side
// is buffered in a window store (retention Before+After+Grace, duplicates
// kept, Kafka's key layout; join.go draws it), and a left or outer join
// holds each record nothing joined in an outer store until stream time
// (the largest timestamp either side has seen) passes its window's end
// plus Grace, then emits it with the other side missing; a record whose
// window had already ended is emitted at once, Kafka's rule. Kafka scans
// the outer store at most once a second of wall time; here every in-order
// record that may find one due does, so results do not depend on the
// clock. JoinWithTable and LeftJoinWithTable look the table up for each
// stream record (table updates emit nothing); JoinWithGlobalTable looks
// up the instance's global store by a key computed from the record.
// JoinTables, LeftJoinTables and OuterJoinTables forward each update as
// the change of the joined row, old value included (Change.Old); the
// result is not materialized (no store to query) and is timestamped with
// the update, where Kafka takes the later of the two sides' timestamps
// (stores here keep no timestamps). Start checks that the input topics
// of a join's two sides have one partition count (ErrCopartition, naming
// the join and both sides' topics) and sizes a repartition topic feeding
// a join to the other side's count, as Kafka's
// CopartitionedTopicsEnforcer.
//
// JoinTablesByForeignKey and LeftJoinTablesByForeignKey are Kafka's
// foreign-key table joins (KIP-213): a left row joins the right row whose
// key its extractor returns, with no co-partitioning. The left task sends
// a subscription (left key, its partition, a hash of the left value) keyed
// by the foreign key to <app>-<name>-subscription-registration-topic
// (the right table's partition count); the right task keeps it in a
// subscription store (foreign key | left key, with a changelog) and
// answers, at once and on every update or delete of the right row,
// through <app>-<name>-subscription-response-topic to the left row's own
// partition (the left table's count). The left task drops an answer whose
// hash is not its row's current value's (TaskStats.Dropped): a row that
// changed its foreign key never shows the older key's result. A changed
// foreign key or a deleted row unsubscribes the old key. A deleted row,
// or one whose extractor gives no key, is decided on the left side: no
// result (inner) or a result with no right value (left). The result is a
// table with a store of its own (Named names it), so it can be queried
// and joined further. fkjoin.go draws the wire formats.
//
// # The Processor API
//
// Process runs a user Processor (Kafka's Processor API, KIP-478), one
// instance per task, with key-value stores declared on the builder and
// given to it by name, and punctuations scheduled from its Init:
//
//	type summer struct {
//		ctx  *streams.ProcessorContext[string, int64]
//		sums *streams.KeyValueStore[string, int64]
//	}
//
//	func (p *summer) Init(ctx *streams.ProcessorContext[string, int64]) (err error) {
//		p.ctx = ctx
//		if p.sums, err = streams.GetKeyValueStore[string, int64](ctx, "sums"); err != nil {
//			return err
//		}
//		ctx.Schedule(10*time.Second, streams.StreamTimePunctuation, func(ts time.Time) {
//			var n int64
//			_ = p.sums.Range(func(string, int64) bool { n++; return true })
//			ctx.Forward(streams.Record[string, int64]{Key: "#keys", Value: n, Timestamp: ts})
//		})
//		return nil
//	}
//
//	func (p *summer) Process(r streams.Record[string, int64]) {
//		old, _, _ := p.sums.Get(r.Key)
//		_ = p.sums.Put(r.Key, old+r.Value)
//		p.ctx.Forward(streams.Record[string, int64]{Key: r.Key, Value: old + r.Value, Timestamp: r.Timestamp})
//	}
//
//	func (p *summer) Close() {}
//
//	b := streams.NewBuilder()
//	streams.AddKeyValueStore(b, "sums", streams.String, streams.Int64)
//	in := streams.Source(b, []string{"amounts"}, streams.String, streams.Int64)
//	streams.Process(in, func() streams.Processor[string, int64, string, int64] { return &summer{} },
//		streams.Stores("sums"), streams.KeySerde(streams.String), streams.ValueSerde(streams.Int64)).To("sums")
//
// Init runs after the task's stores are restored, Close when the task
// closes; Process, Init, Close and the punctuators all run on the
// processing goroutine. A stream-time punctuation fires with the first
// record after Schedule, then when a record carries stream time to the
// next multiple of the interval (once, however many intervals it
// skipped); a wall-clock one fires from the loop between polls, whose
// wait it bounds. What a punctuator forwards and stores is committed
// with the records' outputs (exactly once: in the open transaction, one
// begun for it if none is). An aborted transaction rewinds the
// stream-time punctuations with stream time.
//
// # Extension points
//
//   - task.streamTime is the largest timestamp seen (restored at task
//     start), the clock that closes windows (end + grace) and drops late
//     records.
//   - Change[V] carries old and new values: table-table joins and
//     re-aggregation need the old one.
//
// # Non-obvious invariants
//
//   - kgo's GroupTransactSession calls the revoke and lost callbacks with
//     its own lock held, and End needs that lock: a callback that waits
//     for the processing goroutine (in End) deadlocks. Exactly once, the
//     callbacks only queue the partitions; the loop closes the tasks.
//   - OnPartitionsAssigned must not wait for the processing goroutine
//     either: End waits for a heartbeat that the group goroutine sends
//     only after the callback returns.
//   - kgo's PollRecords returns only with records: the loop polls with a
//     deadline of the commit interval, or an idle instance would never
//     commit what it holds.
//   - A restore under exactly once reads to the high watermark, not the
//     last stable offset: a previous owner's commits after a zombie's open
//     transaction lie past the LSO, and a checkpoint past the LSO is not
//     a recreated changelog.
//   - Close of a client with BlockRebalanceOnPoll waits for
//     AllowRebalance: the at-least-once client closes with
//     CloseAllowingRebalance.
//   - A sink's records and their key and value bytes are carved from
//     chunks (slab.go): kgo holds them until their promise runs, so bytes
//     handed out are never written again (the next value goes past them)
//     and the slab is only touched with App.mu held.
//   - An aggregation serializes each record's key into a buffer it reuses
//     for the next record: what keeps the key (the cache, pebble's batch)
//     copies it, and a store write without the cache clones it before the
//     changelog record takes it (TestRestoreFromChangelog fails without).
//   - A store scan (suppression's eviction, the retention purge) collects
//     what it found before forwarding or deleting: a processor downstream
//     may write to the indexed batch the iterator reads.
//   - A sliding window is created as a copy of a window up to 2d older
//     than the record: the retention must keep those (>= 2d + grace).
//   - A foreign-key join's answers go to the partition of the left row's
//     task, named in its subscription, not to its key's hash: the left
//     topic may be partitioned otherwise. Its internal topics take the
//     partition count of the subtopology that reads them (the right
//     table's, then the left's), not of the one writing them.
//   - A foreign-key answer whose left row is gone is dropped: the delete
//     already decided the result, and answers never carry a deleted
//     row's hash (deletes and rows without a foreign key do not round-trip).
//   - Stream time is the task's, restored from the committed offsets'
//     metadata: what a crash replays is processed again from the time of
//     the last commit, as it was the first time. The partition times
//     kept for a commit are snapshotted before it (kgo calls the
//     metadata hook from its own goroutine).
//   - A task's pebble database is opened by its active task or by its
//     standby, never both: a standby is closed before the task is created
//     active on the same instance, and one is opened only for a task not
//     active there (a standby assigned for a task whose revoke is still
//     queued waits for the next pass of the loop).
//   - kgo's ParseConsumerSyncAssignment drops the assignment's UserData:
//     the balancer parses assignments itself, or standbys would be lost.
//   - A pattern source's topic is learned (topicSub, sourceTopics, the
//     running tasks' sources) before kgo is asked to consume it, and an
//     assignment naming a topic not listed here yet is learned before
//     its records are processed: a record of a topic no task knows would
//     be skipped and its offset committed past it. The balancer maps
//     topics through subOf, which matches the patterns itself: the
//     leader may not have listed a topic another member subscribed to.
//   - A revocation closes a task only if no partition of it stays owned
//     from a topic not revoked with it: a pattern topic deleted takes its
//     partitions away from tasks whose other topics stay (the balancer
//     otherwise moves whole tasks). Closing them dropped the remaining
//     topics' records (TestPatternSourceNewTopics on kfake).
//   - A standby skips records before its position: after a standby is
//     dropped and opened again, a fetch kgo buffered for its earlier life
//     may still arrive (applyChangelog's from).
package streams
