//go:build unix

package mirror

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/broker"
	"ringlog/internal/testkit/testbroker"
	"ringlog/kafka"
)

// TestMirrorFlagsSASLSource: the simple case's flags reach a source that
// only takes SASL: -source-config names the source's Kafka client
// properties (security.protocol, sasl.mechanism, sasl.jaas.config), as
// Kafka's tools take --command-config.
func TestMirrorFlagsSASLSource(t *testing.T) {
	t.Parallel()
	cfg := testbroker.Config(t.TempDir())
	cfg.Listeners = append(cfg.Listeners, broker.Listener{Name: "SASL", Protocol: kafka.SASLPlaintext, Addr: "127.0.0.1:0",
		Mechanisms: []string{"SCRAM-SHA-256", "PLAIN"}, PlainUsers: map[string]string{"mm": "mm-secret"}})
	src := testbroker.StartBroker(t, cfg)
	b := startBroker(t)
	createTopic(t, kadm.NewClient(client(t, src.Addr)), "f", 1, nil)
	prod := client(t, src.Addr)
	for i := range 10 {
		prod.Produce(context.Background(), &kgo.Record{Topic: "f", Value: fmt.Appendf(nil, "%d", i)}, nil)
	}
	if err := prod.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	props := filepath.Join(t.TempDir(), "source.properties")
	if err := os.WriteFile(props, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n  username=\"mm\" password=\"mm-secret\";\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := startFlowProc(t, "mirror", "-source", src.B.ListenerAddr("SASL"), "-source-config", props, "-target", b,
		"-alias", "A", "-target-alias", "B", "-topics", "f", "-progress", "0")
	defer func() {
		if t.Failed() {
			t.Logf("mirror:\n%s", m.out.String())
		}
	}()
	got := readAll(t, b, "A.f", 10, 15*time.Second)
	if len(got[0]) != 10 {
		t.Fatalf("A.f: %d records, want 10", len(got[0]))
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
}
