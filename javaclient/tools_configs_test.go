package javaclient

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestToolConfigs: kafka-configs on a topic (--add-config, a list value
// in brackets, --delete-config, --describe, an unknown name refused) and
// on the broker (--describe, --all). franz-go sees the changes.
func TestToolConfigs(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	b.createTopic(t, "ops-cfg", 1)
	topic := []string{"--entity-type", "topics", "--entity-name", "ops-cfg"}

	out := b.toolOK(t, kafkaConfigs, append([]string{"--alter", "--add-config",
		"retention.ms=3600000,max.message.bytes=2000000,cleanup.policy=[delete,compact]"}, topic...)...)
	wantContains(t, "kafka-configs --alter --add-config", out, "Completed updating config for topic ops-cfg.")
	out = b.toolOK(t, kafkaConfigs, append([]string{"--describe"}, topic...)...)
	wantContains(t, "kafka-configs --describe", out, "Dynamic configs for topic ops-cfg are:\n")
	wantContains(t, "kafka-configs --describe", out,
		"  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000")
	wantContains(t, "kafka-configs --describe", out,
		"  max.message.bytes=2000000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:max.message.bytes=2000000")
	// Kafka shows the list as given, "delete,compact"; ringlog shows the
	// policy it parsed, "compact,delete" (the same policy).
	if !strings.Contains(out, "  cleanup.policy=delete,compact sensitive=false") && !strings.Contains(out, "  cleanup.policy=compact,delete sensitive=false") {
		t.Errorf("kafka-configs --describe: cleanup.policy is not delete and compact:\n%s", out)
	}

	out = b.toolOK(t, kafkaConfigs, append([]string{"--alter", "--delete-config", "max.message.bytes,cleanup.policy"}, topic...)...)
	wantContains(t, "kafka-configs --alter --delete-config", out, "Completed updating config for topic ops-cfg.")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	configs, err := kadm.NewClient(b.client(t)).DescribeTopicConfigs(ctx, "ops-cfg")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := configs.On("ops-cfg", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		switch c.Key {
		case "retention.ms", "max.message.bytes", "cleanup.policy":
			want := map[string]string{"retention.ms": "3600000", "max.message.bytes": "1048588", "cleanup.policy": "delete"}[c.Key]
			if c.Value == nil || *c.Value != want {
				t.Errorf("franz-go sees %s=%v (%s) after kafka-configs, want %s", c.Key, c.MaybeValue(), c.Source, want)
			}
		}
	}

	out = b.toolFails(t, kafkaConfigs, append([]string{"--alter", "--add-config", "no.such.config=1"}, topic...)...)
	wantContains(t, "kafka-configs --add-config of an unknown name", out, "InvalidConfigurationException")

	// The broker: no dynamic config, and every config with --all.
	node := b.nodeID
	out = b.toolOK(t, kafkaConfigs, "--describe", "--entity-type", "brokers", "--entity-name", node)
	wantLines(t, "kafka-configs --describe --entity-type brokers", out, "Dynamic configs for broker "+node+" are:")
	out = b.toolOK(t, kafkaConfigs, "--describe", "--entity-type", "brokers", "--entity-name", node, "--all")
	wantContains(t, "kafka-configs --describe --entity-type brokers --all", out, "All configs for broker "+node+" are:\n")
	wantContains(t, "kafka-configs --describe --entity-type brokers --all", out,
		"  num.partitions=1 sensitive=false synonyms={DEFAULT_CONFIG:num.partitions=1}")
	wantContains(t, "kafka-configs --describe --entity-type brokers --all", out,
		"  auto.create.topics.enable=true sensitive=false synonyms={DEFAULT_CONFIG:auto.create.topics.enable=true}")
}
