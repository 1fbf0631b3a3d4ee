// Package difftest holds differential tests: the same scripted Kafka
// requests go to Apache Kafka (internal/kafkaref) and to ringlog, and the
// answers are compared field by field. It is test code only; this file
// exists to document it.
//
// # How a scenario runs
//
//	TestX
//	  -> pair        one Kafka and one ringlog for the whole test binary,
//	                 started on the first test (sync.Once), stopped by TestMain
//	  -> run         the script against Kafka, then the same script against
//	                 ringlog; each side records a transcript of steps
//	                 (label, request's API and version, response or
//	                 "closed the connection")
//	  -> compare     step by step: every field of the two kmsg responses, by
//	                 reflection; the records of a Fetch are decoded first
//	  -> report      every difference with its path, e.g.
//	                 Topics[t].Partitions[1].ErrorCode: kafka 3
//	                 (UNKNOWN_TOPIC_OR_PARTITION), ringlog 6 (...)
//
// Requests are sent on raw connections pinned to one broker, at the version
// set on them (kgo would negotiate versions, retry retriable errors and
// split requests by leader, hiding the broker's own answer). The versions
// are the newest both brokers serve, plus the last that names topics where
// the newest names them by id (TestVersions checks them against both
// brokers' ApiVersions). A script may use what a side answered (a member
// id, a producer id, a topic id) in its next requests; everything else it
// sends to both is the same, and topic and group names come from the
// test's name, so that tests sharing the brokers do not meet.
//
// # What may differ
//
// The comparison allows a short list of fields to differ (allowances in
// diff_test.go), each for a reason that holds for any two brokers:
//
//   - cluster ids, topic ids (KIP-516), producer ids, and member ids the
//     coordinator generates (KIP-394, KIP-848): compared only for being set
//     on both sides or unset on both;
//   - ports: each broker listens on a free one;
//   - LogAppendTime of Produce: the broker's clock, compared only for being
//     set (-1 on both for CreateTime topics);
//   - ErrorMessage: free text. The error code carries the meaning; Kafka
//     often sends null where ringlog explains, and its wording is its own.
//
// Arrays whose elements have identity fields (topic, partition, config
// name, group, resource, API key, node id, client id) are matched by them,
// not by position: Kafka builds many of them from hash maps. kmsg decodes
// an empty and a null array alike, so that difference is not seen.
//
// Node ids compare: both brokers are node 1. Everything else that differs
// fails the test unless README.md's table writes it down (known in
// known_test.go, matched by test, step and path); a written-down
// difference that no longer shows fails the test too, so the table stays
// true.
//
// # Fast and full
//
// Plain `go test` runs the fast scenarios, Kafka's start included, in well
// under a minute and a half. scripts/difftest.sh passes -full (or set
// RINGLOG_DIFFTEST_FULL=1), which adds the slow parts of some scenarios
// (side.slow): waits for session and rebalance timeouts, long polls, the
// transaction coordinator; a scenario logs the slow parts it did not run.
// -dump logs both answers to every step. The tests never skip: without
// Java 17 and Maven they fail, saying why.
package difftest
