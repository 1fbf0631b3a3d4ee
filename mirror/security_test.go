package mirror

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/broker"
	"ringlog/internal/testkit/testbroker"
	"ringlog/kafka"
)

// TestMirrorSASLSource: the source is reached only through a
// SASL_PLAINTEXT listener; the flow authenticates with the source
// cluster's Kafka client properties (A.security.protocol,
// A.sasl.mechanism, A.sasl.jaas.config).
func TestMirrorSASLSource(t *testing.T) {
	cfg := testbroker.Config(t.TempDir())
	cfg.Listeners = append(cfg.Listeners, broker.Listener{Name: "SASL", Protocol: kafka.SASLPlaintext, Addr: "127.0.0.1:0",
		Mechanisms: []string{"PLAIN"}, PlainUsers: map[string]string{"mm": "mm-secret"}})
	src := testbroker.StartBroker(t, cfg)
	saslAddr := src.B.ListenerAddr("SASL")
	b := startBroker(t)
	createTopic(t, kadm.NewClient(client(t, src.Addr)), "s", 1, nil)
	prod := client(t, src.Addr)
	for i := range 10 {
		prod.Produce(context.Background(), &kgo.Record{Topic: "s", Value: fmt.Appendf(nil, "%d", i)}, nil)
	}
	if err := prod.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	runMirror(t, map[string]string{
		"clusters": "A, B", "A.bootstrap.servers": saslAddr, "B.bootstrap.servers": b,
		"A.security.protocol": "SASL_PLAINTEXT", "A.sasl.mechanism": "PLAIN",
		"A.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="mm" password="mm-secret";`,
		"A->B.enabled":       "true", "A->B.topics": "s",
	})
	got := readAll(t, b, "A.s", 10, 15*time.Second)
	if len(got[0]) != 10 {
		t.Fatalf("A.s: %d records, want 10", len(got[0]))
	}
}
