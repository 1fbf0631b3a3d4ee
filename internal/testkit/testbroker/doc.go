// Package testbroker starts a broker in a test's process the way the
// binary starts one (broker.Start): engine, local one-voter quorum,
// replication, groups, Kafka protocol, network. Only test files import it.
//
// RINGLOG_TEST_NET (EnvNet) picks the network path of every broker it
// starts (Config) and of every binary the kafka and cmd/ringlog start
// helpers spawn (NetArgs): gnet, uring or portable; unset, the broker's
// default. Any other value fails the test, and so does a broker that
// serves on another path than the one asked for (uring falling back to
// gnet on a kernel without what it needs), so that a run on uring proves
// something about uring.
package testbroker
