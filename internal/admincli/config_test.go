package admincli

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/broker"
	"ringlog/internal/testkit"
	"ringlog/internal/testkit/testbroker"
	"ringlog/kafka"
)

func writeProps(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadProperties(t *testing.T) {
	path := writeProps(t, `# a comment
! another
security.protocol = SASL_SSL
sasl.mechanism:SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="alice" \
    password="a \"quoted\" secret";
client.id ringlog-admin-test
`)
	props, err := readProperties(path)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"security.protocol": "SASL_SSL",
		"sasl.mechanism":    "SCRAM-SHA-512",
		"sasl.jaas.config":  `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="a \"quoted\" secret";`,
		"client.id":         "ringlog-admin-test",
	} {
		if props[k] != want {
			t.Errorf("%s = %q, want %q", k, props[k], want)
		}
	}
	if len(props) != 4 {
		t.Errorf("props %v", props)
	}
}

// TestSecurityOptionsRefuses: keys and values the command cannot honour
// are errors naming them, not ignored.
func TestSecurityOptionsRefuses(t *testing.T) {
	scramJAAS := `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";`
	for _, tc := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"ssl.truststore.password": "x", "bootstrap.servers": "h:1"}, "bootstrap.servers, ssl.truststore.password"},
		{map[string]string{"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "ssl.truststore.type=JKS"},
		{map[string]string{"security.protocol": "TLS"}, "security.protocol=TLS"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": scramJAAS}, "sasl.mechanism=GSSAPI"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": scramJAAS}, "PlainLoginModule"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config is needed"},
		{map[string]string{"security.protocol": "PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.mechanism is set but security.protocol=PLAINTEXT"},
		{map[string]string{"sasl.jaas.config": scramJAAS}, "sasl.jaas.config is set but security.protocol=PLAINTEXT"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "ssl.truststore.location": "/x"}, "ssl.truststore.location is set"},
		{map[string]string{"security.protocol": "SSL", "ssl.truststore.location": "/does/not/exist"}, "/does/not/exist"},
		{map[string]string{"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "dns"}, "ssl.endpoint.identification.algorithm=dns"},
	} {
		_, err := securityOptions(tc.props)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want ErrConfig naming %q", tc.props, err, tc.want)
		}
	}
	// A bad file fails the command before it connects.
	path := writeProps(t, "sasl.kerberos.service.name=kafka\n")
	if _, _, err := admin(t, "127.0.0.1:1", "topic", "list", "--command-config", path); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "sasl.kerberos.service.name") {
		t.Fatalf("admin with a bad --command-config: %v", err)
	}
}

// TestCommandConfigSecurity: --command-config connects as Kafka's tools
// do, to a ringlog broker's SASL_SSL listener (SCRAM-SHA-512 and PLAIN,
// PEM truststore) and its SSL listener requiring a client certificate (PEM
// keystore); a wrong password fails with the broker's
// SASL_AUTHENTICATION_FAILED, no client certificate fails the handshake;
// an empty ssl.endpoint.identification.algorithm drops the host name
// check but still verifies the chain.
func TestCommandConfigSecurity(t *testing.T) {
	ca, other := testkit.NewCA(t, "admincli test CA"), testkit.NewCA(t, "another CA")
	tlsListener := func(name string, p kafka.SecurityProtocol, clientAuth string) broker.Listener {
		server := ca.Issue(pkix.Name{CommonName: "broker"})
		cfg, err := broker.TLSConfig(broker.TLSSettings{"ssl.keystore.location": server.File, "ssl.truststore.location": ca.CertFile,
			"ssl.client.auth": clientAuth}, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		return broker.Listener{Name: name, Protocol: p, Addr: "127.0.0.1:0", TLS: cfg}
	}
	cfg := testbroker.Config(t.TempDir())
	sasl := tlsListener("SASL_SSL", kafka.SASLSSL, "none")
	sasl.Mechanisms = []string{"PLAIN", "SCRAM-SHA-512"}
	sasl.PlainUsers = map[string]string{"carol": "carol-secret"}
	// A listener on 127.0.0.2, a name the broker's certificate (made for
	// 127.0.0.1 and localhost) does not carry: Kafka's https endpoint
	// identification refuses it, an empty algorithm does not.
	elsewhere := tlsListener("ELSEWHERE", kafka.SSL, "none")
	elsewhere.Addr = "127.0.0.2:0"
	cfg.Listeners = append(cfg.Listeners, sasl, tlsListener("SSL", kafka.SSL, "required"), elsewhere)
	b := testbroker.StartBroker(t, cfg)

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	adminOK(t, b.Addr, "topic", "create", "secured", "-p", "1")

	saslAddr, sslAddr, elsewhereAddr := b.B.ListenerAddr("SASL_SSL"), b.B.ListenerAddr("SSL"), b.B.ListenerAddr("ELSEWHERE")
	client := ca.Issue(pkix.Name{CommonName: "admin"})
	for _, tc := range []struct {
		name, addr, props, fail string
	}{
		{"SASL_SSL SCRAM-SHA-512", saslAddr, `security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";
ssl.truststore.type=PEM
ssl.truststore.location=` + ca.CertFile + "\n", ""},
		{"SASL_SSL PLAIN", saslAddr, `security.protocol=SASL_SSL
sasl.mechanism=PLAIN
sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="carol" password="carol-secret";
ssl.truststore.location=` + ca.CertFile + "\n", ""},
		{"SSL to a host the certificate does not name, no host name check", elsewhereAddr, `security.protocol=SSL
ssl.endpoint.identification.algorithm=
ssl.truststore.location=` + ca.CertFile + "\n", ""},
		{"SSL to a host the certificate does not name", elsewhereAddr, `security.protocol=SSL
ssl.endpoint.identification.algorithm=https
ssl.truststore.location=` + ca.CertFile + "\n", "127.0.0.2"},
		{"SSL from another CA, no host name check", elsewhereAddr, `security.protocol=SSL
ssl.endpoint.identification.algorithm=
ssl.truststore.location=` + other.CertFile + "\n", "unknown authority"},
		{"SSL with a client certificate", sslAddr, `security.protocol=SSL
ssl.keystore.type=PEM
ssl.keystore.location=` + client.File + `
ssl.truststore.location=` + ca.CertFile + "\n", ""},
		{"a wrong password", saslAddr, `security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="wrong";
ssl.truststore.location=` + ca.CertFile + "\n", "SASL_AUTHENTICATION_FAILED"},
		{"SSL without a client certificate", sslAddr, `security.protocol=SSL
ssl.truststore.location=` + ca.CertFile + "\n", "certificate"},
	} {
		out, _, err := admin(t, tc.addr, "topic", "list", "--command-config", writeProps(t, tc.props), "--timeout", "5s")
		if tc.fail == "" {
			if err != nil || !strings.Contains(out, "secured") {
				t.Errorf("%s: %v\n%s", tc.name, err, out)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.fail) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.fail)
		}
	}
}
