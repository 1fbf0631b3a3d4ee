// Package testbroker starts a broker in a test's process the way the
// binary starts one (broker.Start): engine, local one-voter quorum,
// replication, groups, Kafka protocol, network. Only test files import it.
package testbroker
