// Package bench is `ringlog bench`: one command that measures ringlog
// against its peers and against this machine's own limits, in the same
// run, with the same workloads, and writes a markdown report, the raw
// results and SVG plots.
//
// # What runs where
//
//	ringlog bench (this process)       clients: kgo producers/consumers, nats.go
//	  ├─ ringlog -io uring   ...       broker processes, one per peer and
//	  ├─ ringlog -io uring -net uring  durability setting, each measured from
//	  ├─ ringlog -io portable ...      /proc/<pid> (CPU, peak RSS) and, for
//	  ├─ ringlog bench peer kfake      ringlog, its admin /metrics and pprof
//	  ├─ ringlog bench peer nats       (and perf stat, issue 13's rows)
//	  ├─ ringlog -config ... SASL_SSL  (its listeners: saslssl.go)
//	  ├─ ringlog -node-id 1 -controller-voters ... ┐ the 3-broker cluster:
//	  ├─ ringlog -node-id 2 ...                    │ CPU and peak RSS summed
//	  ├─ ringlog -node-id 3 ...                    ┘ over the three
//	  ├─ java ... kafka.Kafka          Apache Kafka: one node (the matrix),
//	  ├─ java ... kafka.Kafka ×3       three (the Replication section)
//	  └─ kcat, fio, perf               short-lived commands
//
// Brokers run as processes of their own so that their CPU and memory are
// theirs alone. ringlog runs from the benchmarked binary (-broker, by
// default this executable); kfake and the embedded NATS server run in
// this executable re-invoked as `ringlog bench peer ...`.
//
// # Apache Kafka
//
// The peers "kafka" and "kafka-cluster" are Apache Kafka itself, started
// through internal/kafkaref (which fetches its jars with Maven once and
// needs java and mvn; without them the rows say so): JVMs with the heap
// and collector of Kafka's start script (-Xms1g -Xmx1g, G1) and Kafka's
// defaults, each node a broker and a KRaft controller (kafka.go). Kafka
// never forces an fsync by default, which is ringlog -flush never; the
// flush always workloads run an instance with
// log.flush.interval.messages=1, which fsyncs the log after every append
// before acknowledging it. "kafka" is one node and a peer of every table;
// every table also gives each peer's ratios against it, and the report
// has a summary against it as it has against ringlog io_uring. In -quick
// it runs only what its targets need: the base produce workload, consume
// from the page cache with kgo and produce latency at the fixed rate.
// "kafka-cluster" is three nodes on loopback with RF 3 and
// min.insync.replicas=2 topics, and runs in the Replication section only
// (the same rows as ringlog's: RF 3 with acks=1 and acks=all, -quick
// acks=all only; its lag and failovers are not measured). The targets
// against Kafka (issue 19) are each computed from one run: base produce
// records/s, broker CPU per GB and peak RSS, produce p99 at the fixed 50k
// records/s, RF 3 acks=all records/s of the two clusters, and records/s
// consumed from the page cache.
//
// # SASL_SSL
//
// The peer "ringlog-sasl-ssl" (saslssl.go) is the benchmarked binary with
// -io uring and a server.properties as docs/security.md writes it: a
// PLAINTEXT listener and a SASL_SSL one on loopback,
// sasl.enabled.mechanisms=SCRAM-SHA-512, ssl.keystore.type=PEM. Its CA
// and certificate (ECDSA P-256, for 127.0.0.1 and localhost) are made
// with crypto/x509 when it starts, in a folder beside its data
// directory, the keystore written as the private key then the
// certificate. Before anything is measured the SCRAM user is made with
// kadm's AlterUserSCRAMs on the PLAINTEXT listener; then every client,
// kgo and kcat, connects to the SASL_SSL listener only. The peer runs the
// workloads of its targets (1 KiB produce with kgo and kcat, consume;
// base settings, flush never) in every matrix, -quick included; its other
// rows say why not. Its client listener runs netpoll's portable engine
// (gnet cannot terminate TLS): its rows against ringlog io_uring compare
// TLS on the portable engine with plaintext on gnet, as users run each,
// and ringlog portable's rows beside them separate the engine's share.
// The targets "SASL_SSL records/s ≥ 0.7x PLAINTEXT at 1 KiB" (produce,
// and consume from the page cache, judged apart) take ringlog SASL_SSL's
// kgo figures over ringlog io_uring's in the same tables, and state both
// brokers' CPU per GB.
//
// # Issue 13: the network paths
//
// ringlog has three network paths (the binary's -net): gnet's epoll
// loops, io_uring (the connections on the shards' rings; -net uring-loops
// puts them on io_uring loops of their own) and the net package. The peer "ringlog-uring" is
// -io uring with the network it defaults to, gnet, and the writes it
// defaults to, direct (O_DIRECT appends; the opt-in peer
// "ringlog-buffered" writes through the page cache): the io_uring disk
// path, and the reference every ratio is taken against. The peer
// "ringlog-net-uring" (ringlog io_uring net) is -io uring -net uring, the
// broker with its disk and its network both on io_uring, on the shards'
// rings (the opt-in "ringlog-net-loops" has its network on io_uring loops
// of netpoll's own): what issue 13
// means by io_uring, and the figure of every target of that issue, each
// computed from one run against "ringlog-portable" (-io portable: pwrite
// and the net package) and kfake (netpaths.go). It runs the workloads of
// those targets only, in every matrix: the base produce run, consume from
// the page cache with kgo, produce latency at the fixed 50k records/s,
// and two workloads of the issue's own that run on the peers its targets
// compare only (100 B from one producer: ringlog io_uring net, portable,
// kfake; end to end at 50k records/s: ringlog io_uring net and portable;
// -quick leaves the end-to-end one out, to grow by about 10 s, and its
// target says so). The 10,000-connection target has no workload yet and
// says so.
//
// In those workloads each of the three ringlog paths is also measured for
// system calls per request and for how its CPU splits between user space
// and the kernel: `perf stat -e raw_syscalls:sys_enter -p <broker>`
// attached for the measured stretch (perf's own start is not in it), the
// requests from the broker's ringlog_requests_total where it exports one
// and otherwise those the suite's kgo clients wrote (HookBrokerWrite), and
// utime and stime from /proc/<pid>/stat. The kernel's part is split by
// cause (copies, TCP/IP, page cache and file system, block layer,
// io_uring, scheduler, memory, other) from `perf record -e cpu-clock:k -g
// --kernel-callchains -p <broker>` in the same stretch, read back with perf
// script (kernelsplit.go). Without perf the system call and split figures
// are "—" and the rest stands.
//
// # The cluster and the Replication section
//
// The peer "ringlog-cluster" is three processes of the benchmarked binary
// on loopback, each a voter of the metadata quorum and a broker, with
// every port chosen free and the data under the run's work directory
// (cluster.go). Its topics have replication factor 3 and
// min.insync.replicas=2; broker.session.timeout.ms is 2000 (Kafka's 9000
// would make each failover last nine seconds). It runs every workload of
// the matrix like the other peers (in -quick only the base produce one).
//
// After the matrix of every round comes the Replication section
// (replication.go): the base produce workload with RF=1 acks=1 on
// ringlog io_uring against RF=3 acks=1 and acks=all on the cluster (the
// issue's target: acks=all at 0.4x or more), the same acks=all with the
// followers' fetch streams limited to one request in flight
// (ringlog.replica.fetch.slots=1) with flush never and always, the RF=1
// and RF=3 rows again on Apache Kafka (one node, and the 3-node Kafka
// cluster), and the followers' lag behind their leaders, sampled from
// every ringlog broker's /metrics every 100 ms during the cluster's runs.
// Last, once, failovers: the leader of a one-partition topic is killed
// with SIGKILL and the time to the first acks=all acknowledgement after
// it is measured, three times (the broker restarted in between), once in
// -quick. The clusters with one fetch in flight and Kafka's cluster are
// stopped after each round's section, so that their idle brokers (raft
// heartbeats: about 0.1 CPU s/s for three ringlog brokers) do not weigh
// on the other runs. `ringlog bench -only replication` runs the section
// alone (no matrix, no machine limits); `-only matrix` leaves it out.
//
// # Mirroring
//
// After the Replication section of every round comes the Mirroring
// section (mirroring.go, issue 16): `ringlog mirror`, a process of the
// benchmarked binary, copies a fresh topic of 16 partitions holding -fill
// worth of 1 KiB records (written just before with kgo) from ringlog
// io_uring to a second ringlog io_uring process (the peer "ringlog
// io_uring (mirror target)", started for the section and stopped after
// the last round), once exactly once and once at least once
// (-at-least-once). A run is timed from the mirror's "flow running" line
// to the moment its ringlog_mirror_records_total, read from its admin
// /metrics every 20 ms, counts every record; the target's end offsets then
// must hold them. The yardstick is one plain kgo producer (idempotent,
// acks=all: the mirror's producer is one client with those settings)
// sending 1 KiB records to 16 partitions of the same target for
// -duration, in the same round. The target "exactly-once mirroring ≥
// 0.8x a plain kgo producer's" is judged from the medians. `ringlog bench
// -only mirror` runs the section alone; -only matrix and -only
// replication leave it out.
//
// # Streams
//
// Last in every round, the Streams section (streams.go, issue 17): a word
// count over lines of two words (10 million lines, 100,000 with -quick,
// written once for the section into a topic of 16 partitions on ringlog
// io_uring) three ways, in this process: the streams library at least
// once (commit each second) and exactly once (a transaction each 100 ms),
// with examples/wordcount's topology and Kafka's 10 MiB record cache (a
// word's updates merged between commits), and the same job hand-written with
// kgo (one consumer-group client: count in a map, produce every update,
// flush and commit each second). A run reads the input from the start
// into a fresh output topic, timed from the first line processed (a
// fresh group's first rebalance waits group.initial.rebalance.delay.ms) to
// the commit after the last line's last update (the application's Close);
// the output's end offsets then must hold one update per word (the
// application's, at most that). The
// targets "at least once ≥ 0.8x hand-written" and "exactly once ≥ 0.7x at
// least once" are judged from the medians. Linking the library makes the
// ringlog binary carry pebble. `ringlog bench -only streams` runs the
// section alone.
//
// # A run
//
// Rounds (-runs) repeat everything: the machine's limits (fio or a
// built-in direct-I/O writer, fdatasync, loopback TCP), then every
// workload of the matrix on every peer, the peers' order rotating from
// round to round so that a noisy moment of a shared machine does not fall
// on one peer only. Each run creates a fresh topic (a stream per partition
// on NATS), measures, checks that the peer holds what it acknowledged,
// and deletes the topic. Figures are medians over the rounds, with min
// and max.
//
// Closed-loop runs send as fast as the clients accept records; open-loop
// runs plan every record's send time before the run (rate fixed at half
// of ringlog io_uring's measured peak unless -rate says otherwise) and
// measure latency from the planned time, so a stall counts against every
// record it delays (no coordinated omission). One more open-loop produce
// workload runs at a fixed 50k records/s whatever the peaks: a load
// Apache Kafka keeps up with on a small machine, so that a latency ratio
// against it compares latencies and not backlogs.
//
// # Bounds and cleanup
//
// Every run is bounded in time and records; the suite is bounded by
// -timeout (runs that would not fit are reported as skipped). Child
// processes are stopped on every exit path (SIGTERM, then SIGKILL after a
// grace period), get SIGKILL from the kernel if the suite dies (Linux
// parent-death signal), and peer children also stop when their standard
// input closes.
//
// # Non-obvious invariants
//
//   - A broker's output is drained for its whole life: a broker blocked on a
//     full log pipe would be measured as slow.
//   - Latency is computed from a stamp in the record's value (16 hex digits
//     of nanoseconds since the suite started), never from Kafka's
//     millisecond timestamps, and the same clock stamps and reads it.
//   - kcat cannot stop on a clock; its runs are sized in records from the
//     kgo rate measured on the same peer just before.
//   - The peak RSS of a run is VmHWM after writing 5 to clear_refs before
//     the run; without that it would be the process's lifetime peak.
//   - Every table has a row for every peer of the matrix: a figure, or the
//     reason there is none (unavailable, skipped, failed). The CI test
//     checks this.
//   - A run on the cluster starts once every broker's metadata gives every
//     partition of its topic a leader and a full ISR: brokers apply the
//     controller's changes independently, and a producer that learned of
//     the topic from a broker not there yet waited out kgo's MetadataMinAge
//     (5 s) before sending: 5-second stalls in the first cluster runs.
//   - kgo answers admin metadata (kadm.ListTopics, BrokerMetadata) from a
//     cache, also for a topic it does not know yet: the driver's client
//     refreshes it after 100 ms, and counts brokers with a Metadata request
//     of its own.
//   - A cluster acknowledges acks=1 before its followers copy the records,
//     and ListOffsets reports the HW: a count of stored records below what
//     was acknowledged is asked again for up to 10 s before it fails a run.
//   - The lag sampler reads the three brokers at once, not at one instant:
//     a follower read after its leader may look ahead of it, and counts as
//     0 behind rather than negative.
//   - A Kafka peer is warmed up for 5 s per node (-quick 2 s), not 1 s:
//     its JVMs interpret the produce path until the JIT compiler has
//     compiled it, and the compiler's own threads take CPU meanwhile. -quick's figures
//     for Kafka are those of a JVM barely warm (and of 1 s runs): read
//     Kafka's ratios from a standard run.
//   - Kafka's 3-node cluster is stopped after every round's Replication
//     section: three idle JVMs cost the other runs more CPU than three
//     idle ringlog brokers. It takes from 20 s to a minute to start on two
//     cores, which -quick's time limit allows for when it is selected.
//   - A SCRAM credential reaches the broker's metadata image a moment after
//     AlterUserSCRAMs is answered (the controller commits it, then the
//     broker applies it): the SASL_SSL peer's driver connects once a
//     SASL_SSL client has authenticated, retried for up to 30 s.
//   - librdkafka checks the broker's name against its certificate
//     (ssl.endpoint.identification.algorithm is https by default): the
//     certificate names 127.0.0.1, the address every listener advertises.
//   - ringlog's fetch counters (ringlog_fetch_sendfile_bytes_total and
//     ringlog_fetch_copied_bytes_total) are its inter-broker listener's:
//     the SASL_SSL peer's consumers fetch elsewhere, so its "sent by
//     sendfile" is "—" (TLS encrypts in user space: nothing goes by
//     sendfile there anyway).
//   - perf stat and perf record print nothing when they have attached:
//     each is started with its events disabled and a control pipe (-D -1
//     --control), and the meter enables them and waits for perf's ack
//     (up to 30 s) before the load starts. Before, they had a fixed 100
//     ms, which a machine loaded by the test suite can exceed: one suite
//     run's -quick report had no kernel samples for one path, a second or
//     two of produce. SIGINT stops them: perf stat prints its count, perf
//     record writes its file, read back after the run's counters are taken.
//   - A closed-loop kgo producer sends few, large requests (up to 1 MB
//     per partition, 16 partitions): system calls per request of a
//     saturated produce run are in the hundreds on every path, and read
//     beside the fixed-rate rows, whose requests are small.
//   - internal/kafkaref reaps its nodes itself: a node is alive while
//     /proc/<pid> is there and not a zombie.
//   - A restarted broker gets new Kafka and admin ports (a killed broker's
//     listening port stays in TIME_WAIT: gnet does not set SO_REUSEADDR);
//     its quorum port, node id and data stay. Failovers run last and the
//     cluster is stopped after them: it is not the cluster it was.
package bench
