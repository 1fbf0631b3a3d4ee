// Package broker is the one wiring of a ringlog broker: the engine, the
// broker's part in its metadata quorum and replication (a single broker is
// the only voter of a local quorum, the same code as a cluster), the group
// and transaction coordinators, the Kafka protocol and the network. cmd/ringlog starts one
// from its flags and server.properties; every test that needs a broker in
// its own process starts one the same way, so that tests run the code the
// binary runs.
//
//	Start:  engine.OpenCore (recover the logs)
//	        -> quorum (open raft, adopt a data directory written without
//	           it, start replication) -> caught up with the quorum
//	        -> group coordinator -> transaction coordinator (and its
//	           marker sender) -> Kafka server -> bind the listener
//	Close:  hand leaderships over (a cluster member) -> answer parked
//	        fetches, joins and syncs; stop the transaction coordinator
//	        -> drain the network -> stop
//	        replication and the quorum -> close the engine (logs flushed,
//	        marked cleanly shut down)
//
// What Start opened is kept on a stack; Close, or a Start that fails half
// way, closes it in reverse, so that the order is written once.
//
// Concurrency: Start, Close and the accessors may be called from any
// goroutine; Close is idempotent and must not run concurrently with Start.
//
// Non-obvious invariants:
//   - The listener binds last: a client that connects while the broker
//     starts is refused and retries. A listener bound early that closed
//     connections until ready made franz-go end a KIP-848 member's session
//     at every restart (it takes a connection closed during ApiVersions for
//     a TLS mismatch, not for a broker starting).
//   - A Listen port of 0 is resolved before the start, because the broker
//     registers its address with the quorum before it binds; another
//     process can take the port meanwhile (Start then fails with
//     EADDRINUSE, and a caller that chose port 0 may retry).
//   - On an inter-broker listener that authenticates, this broker's own
//     principal there (its SASL username, or its certificate's mapped
//     subject) must be in SuperUsers, or Start refuses: every leader would
//     refuse its replica fetches, and the cluster would start and never
//     replicate.
package broker
