package javaclient

import (
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ringlog/internal/testkit"
)

// TestJavaSASLSSL: the SASL_SSL set-up of docs/security.md as an operator
// runs it: the broker with Kafka's listener settings and a PEM keystore,
// a SCRAM-SHA-512 user made with kafka-configs on the PLAINTEXT listener,
// and Kafka's Java producer and consumer with the client settings the
// document gives (a PEM truststore) producing and reading back over
// SASL_SSL; the same client with a wrong password fails to authenticate.
func TestJavaSASLSSL(t *testing.T) {
	t.Parallel()
	ca := testkit.NewCA(t, "ringlog-ca")
	server := ca.Issue(pkix.Name{CommonName: "localhost"})
	secure := testkit.FreeAddr(t)
	b := startBrokerWith(t, fmt.Sprintf(`listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://%s
sasl.enabled.mechanisms=SCRAM-SHA-512
ssl.keystore.type=PEM
ssl.keystore.location=%s
`, secure, server.File))
	out := b.toolOK(t, kafkaConfigs, "--alter", "--entity-type", "users", "--entity-name", "alice",
		"--add-config", "SCRAM-SHA-512=[iterations=8192,password=alice-secret]")
	wantContains(t, "kafka-configs --add-config SCRAM-SHA-512", out, "Completed updating config for user alice.")

	client := func(password string) string {
		f := filepath.Join(t.TempDir(), "client.properties")
		props := fmt.Sprintf(`security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="%s";
ssl.truststore.type=PEM
ssl.truststore.location=%s
`, password, ca.CertFile)
		if err := os.WriteFile(f, []byte(props), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	b.createTopic(t, "secure", 1)
	r := runJava(t, 90*time.Second, "Secure", secure, client("alice-secret"), "secure", "5")
	r.noErrors(t)
	r.want(t, "produce.last", "4")
	r.want(t, "consume.values", "v0,v1,v2,v3,v4")

	r = runJava(t, 90*time.Second, "Secure", secure, client("wrong"), "secure", "1")
	if v, _ := r.get(t, "produce.error"); !strings.Contains(v, "SaslAuthenticationException") {
		t.Fatalf("a wrong password: produce.error=%q", v)
	}
}
