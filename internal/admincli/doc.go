// Package admincli is `ringlog admin`: topic, group, cluster and partition
// administration for people (aligned tables) and scripts (--json), in the
// manner of Kafka's kafka-topics, kafka-consumer-groups,
// kafka-metadata-quorum, kafka-leader-election and kafka-reassign-partitions
// tools, or rpk.
//
// It speaks only the Kafka protocol, through franz-go's kadm and kmsg, and
// imports no ringlog layer: the same commands work against Apache Kafka,
// which the tests prove by running them against internal/kafkaref.
//
// Every command makes one client from the connection flags (-b/--brokers,
// --command-config with Kafka's client properties for TLS and SASL), runs
// on the caller's goroutine and closes the client before Main returns.
//
// Non-obvious invariants:
//
//   - An API the broker does not advertise in ApiVersions is refused
//     before it is sent (ErrUnsupported, naming the API): ringlog closes
//     the connection on a key it does not know, which a client sees as a
//     network error, not an answer.
//   - A command acting on many things (topics, partitions) prints every
//     result, then fails if any failed, so the exit status says whether
//     everything asked for was done.
//   - reset-offsets refuses a group with members in dry runs too (as
//     Kafka's tool does): a plan that could not be executed is no plan.
//   - The JSON field names are part of the interface (docs/admin.md):
//     change them only with the docs.
package admincli
