// Package javaclient drives a ringlog broker, run as its binary the way an
// operator runs it, with Apache Kafka's own Java client and command-line
// tools (Kafka 4.4, fetched once with Maven by internal/kafkaref): the
// idempotent producer, consumer groups of both protocols, the AdminClient,
// and kafka-topics, kafka-consumer-groups, kafka-configs,
// kafka-get-offsets, kafka-delete-records and the console producer and
// consumer.
//
// It holds tests only. The Java programs under java/ are compiled with
// javac once per test binary and run with java, each printing what it saw
// as lines the tests check:
//
//	key=value                       one result of a step (Out.put)
//	step.error=Exception: message   the step failed; the test says which
//	word field field ...            one event (a record consumed, an ack)
//
// Kafka's tools run as bin/kafka-*.sh run them (their main classes, the
// jars on the classpath), each against the broker's address.
//
// Every JVM start costs about a second, so each program does many checks
// and the tests run in parallel, each against a broker of its own; the
// first tool the test binary runs dumps a class-data sharing archive of
// the classes it loaded, which every later tool maps (a third of the CPU
// a tool's start takes otherwise). Java and Maven are required: without
// them the tests fail with the reason, never skip.
//
// Not covered, because ringlog lacks the APIs: kafka-reassign-partitions
// (AlterPartitionReassignments), kafka-acls (the ACL APIs),
// kafka-leader-election (ElectLeaders), kafka-transactions and
// transactional producers, kafka-metadata-quorum (DescribeQuorum), dynamic
// broker configs, and the ELR columns of kafka-topics --describe
// (DescribeTopicPartitions).
package javaclient
