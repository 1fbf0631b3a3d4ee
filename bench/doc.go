// Package bench is `ringlog bench`: one command that measures ringlog
// against its peers and against this machine's own limits, in the same
// run, with the same workloads, and writes a markdown report, the raw
// results and SVG plots.
//
// # What runs where
//
//	ringlog bench (this process)       clients: kgo producers/consumers, nats.go
//	  ├─ ringlog -io uring   ...       broker processes, one per peer and
//	  ├─ ringlog -io portable ...      durability setting, each measured from
//	  ├─ ringlog bench peer kfake      /proc/<pid> (CPU, peak RSS) and, for
//	  ├─ ringlog bench peer nats       ringlog, its admin /metrics and pprof
//	  └─ kcat, fio                     short-lived commands
//
// Brokers run as processes of their own so that their CPU and memory are
// theirs alone. ringlog runs from the benchmarked binary (-broker, by
// default this executable); kfake and the embedded NATS server run in
// this executable re-invoked as `ringlog bench peer ...`.
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
// record it delays (no coordinated omission).
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
//   - Every table has a row for every peer: a figure, or the reason there
//     is none (unavailable, skipped, failed). The CI test checks this.
package bench
