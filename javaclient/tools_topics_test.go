package javaclient

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestToolTopics: kafka-topics as an operator runs it. --create with a
// config and with the broker's defaults, refused for an existing topic
// unless --if-not-exists; --alter --partitions up, refused down;
// --describe by name and by id; --delete, refused for a missing topic;
// --list with and without --exclude-internal. franz-go sees what the
// tool did.
func TestToolTopics(t *testing.T) {
	t.Parallel()
	b := startBroker(t)

	out := b.toolOK(t, kafkaTopics, "--create", "--topic", "ops-orders", "--partitions", "3", "--replication-factor", "1",
		"--config", "retention.ms=86400000")
	wantContains(t, "kafka-topics --create", out, "Created topic ops-orders.")
	out = b.toolOK(t, kafkaTopics, "--create", "--topic", "ops-scratch")
	wantContains(t, "kafka-topics --create (broker defaults)", out, "Created topic ops-scratch.")
	out = b.toolFails(t, kafkaTopics, "--create", "--topic", "ops-orders", "--partitions", "3")
	wantContains(t, "kafka-topics --create of an existing topic", out, "TopicExistsException: Topic 'ops-orders' already exists.")
	b.toolOK(t, kafkaTopics, "--create", "--topic", "ops-orders", "--partitions", "3", "--if-not-exists")

	b.toolOK(t, kafkaTopics, "--alter", "--topic", "ops-orders", "--partitions", "5")
	out = b.toolFails(t, kafkaTopics, "--alter", "--topic", "ops-orders", "--partitions", "2")
	wantContains(t, "kafka-topics --alter --partitions down", out,
		"InvalidPartitionsException: The topic ops-orders currently has 5 partition(s); 2 would not be an increase.")

	// What franz-go sees of the topic, for --describe to match.
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := kadm.NewClient(b.client(t))
	topics, err := adm.ListTopics(ctx, "ops-orders")
	if err != nil {
		t.Fatal(err)
	}
	td := topics["ops-orders"]
	if len(td.Partitions) != 5 {
		t.Fatalf("franz-go sees %d partitions of ops-orders after --alter --partitions 5", len(td.Partitions))
	}
	node := td.Partitions[0].Leader
	out = b.toolOK(t, kafkaTopics, "--describe", "--topic", "ops-orders")
	// Described by name, through DescribeTopicPartitions (KIP-966's API,
	// which Kafka 4's admin client prefers): the ELR columns are empty
	// lists, where Metadata's describe has none to show (N/A).
	wantContains(t, "kafka-topics --describe", out, "Topic: ops-orders\tTopicId: "+base64.RawURLEncoding.EncodeToString(td.ID[:])+
		"\tPartitionCount: 5\tReplicationFactor: 1\tConfigs: retention.ms=86400000\n")
	for p := range 5 {
		wantContains(t, "kafka-topics --describe", out, "\tTopic: ops-orders\tPartition: "+strconv.Itoa(p)+"\tLeader: "+strconv.Itoa(int(node))+
			"\tReplicas: "+strconv.Itoa(int(node))+"\tIsr: "+strconv.Itoa(int(node))+"\tElr: \tLastKnownElr: \n")
	}

	// By id: the Java admin client asks Metadata for the id with the
	// name "" beside it (ringlog answered INVALID_TOPIC_EXCEPTION until
	// it followed Kafka in looking at the id first); Metadata has no ELR
	// (N/A), the rest is the same.
	byID := b.toolOK(t, kafkaTopics, "--describe", "--topic-id", base64.RawURLEncoding.EncodeToString(td.ID[:]))
	if strings.ReplaceAll(byID, "Elr: N/A", "Elr: ") != out {
		t.Errorf("kafka-topics --describe --topic-id printed\n%s\nand --topic\n%s", byID, out)
	}

	b.toolOK(t, kafkaTopics, "--delete", "--topic", "ops-scratch")
	out = b.toolFails(t, kafkaTopics, "--delete", "--topic", "ops-none")
	wantContains(t, "kafka-topics --delete of a missing topic", out, "Topic 'ops-none' does not exist as expected")

	// A FindCoordinator creates __consumer_offsets, as a group's first
	// member would.
	if _, err := adm.FetchOffsets(ctx, "ops-group"); err != nil {
		t.Fatal(err)
	}
	out = b.toolOK(t, kafkaTopics, "--list")
	wantLines(t, "kafka-topics --list", out, "__consumer_offsets", "ops-orders")
	out = b.toolOK(t, kafkaTopics, "--list", "--exclude-internal")
	wantLines(t, "kafka-topics --list --exclude-internal", out, "ops-orders")

	configs, err := adm.DescribeTopicConfigs(ctx, "ops-orders")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := configs.On("ops-orders", nil); err != nil || !hasConfig(c.Configs, "retention.ms", "86400000") {
		t.Errorf("franz-go sees ops-orders's configs %+v (%v); want retention.ms=86400000", c.Configs, err)
	}
}

func hasConfig(cs []kadm.Config, name, value string) bool {
	for _, c := range cs {
		if c.Key == name && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}

// wantContains checks that a tool's output holds want.
func wantContains(t *testing.T, what, out, want string) {
	t.Helper()
	if !strings.Contains(out, want) {
		t.Errorf("%s: no %q in its output:\n%s", what, want, out)
	}
}

// wantLines checks that a tool printed exactly these lines, in order,
// besides lines of log4j and the deprecation notices tools print.
func wantLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	got := outputLines(out)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s printed %q, want %q:\n%s", what, got, want, out)
	}
}

// outputLines is a tool's output without blank lines, log lines and the
// notices Kafka 4's tools print about deprecated options and KIP-848.
func outputLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.TrimSpace(l) == "",
			strings.HasPrefix(l, "["),
			strings.Contains(l, "is deprecated"),
			strings.HasPrefix(l, "The consumer rebalance protocol (KIP-848)"):
			continue
		}
		lines = append(lines, l)
	}
	return lines
}
