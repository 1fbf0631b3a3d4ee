package main

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit"
)

// TestKcatSASLSSL: the binary, configured with Kafka's listener settings
// (a PLAINTEXT inter-broker listener on loopback and a SASL_SSL one with
// SCRAM-SHA-512 and a PEM keystore), serves kcat (librdkafka) over
// SASL_SSL with a SCRAM user made with kadm; a wrong password is refused.
func TestKcatSASLSSL(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatal("kcat not installed (scripts/test.sh installs it: apt-get install kcat)")
	}
	ca := testkit.NewCA(t, "ringlog test CA")
	server := ca.Issue(pkix.Name{CommonName: "broker"})
	inter, client := testkit.FreeAddr(t), testkit.FreeAddr(t)
	props := filepath.Join(t.TempDir(), "server.properties")
	conf := fmt.Sprintf(`listeners=PLAINTEXT://%s,SASL_SSL://%s
sasl.enabled.mechanisms=SCRAM-SHA-512
ssl.keystore.type=PEM
ssl.keystore.location=%s
`, inter, client, server.File)
	if err := os.WriteFile(props, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "-config", props, "-data-dir", t.TempDir())
	p.waitFor(t, "ringlog started")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(inter))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	res, err := kadm.NewClient(adm).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "kcat", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "kcat-secret"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	run := func(password string, stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", client, "-X", "security.protocol=SASL_SSL",
			"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=kcat", "-X", "sasl.password=" + password,
			"-X", "ssl.ca.location=" + ca.CertFile}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String() + errb.String(), err
	}
	if out, err := run("kcat-secret", "one\ntwo\nthree\n", "-P", "-t", "secure"); err != nil {
		t.Fatalf("kcat -P over SASL_SSL: %v\n%s\nbroker:\n%s", err, out, p.out.String())
	}
	out, err := run("kcat-secret", "", "-C", "-t", "secure", "-o", "beginning", "-e", "-q")
	if err != nil || strings.Fields(out)[0] != "one" || len(strings.Fields(out)) != 3 {
		t.Fatalf("kcat -C over SASL_SSL: %v\n%s", err, out)
	}
	out, err = run("wrong", "", "-L", "-m", "2")
	if err == nil || !strings.Contains(out, "Authentication failed") {
		t.Fatalf("kcat with a wrong password: %v\n%s", err, out)
	}
	p.stop(t)
}

// pythonClient is kafka-python's producer and consumer over SSL with a
// client certificate: it prints the values read back, or the error.
const pythonClient = `
import sys
from kafka import KafkaProducer, KafkaConsumer, TopicPartition
bootstrap, ca, cert, key, topic = sys.argv[1:6]
ssl = dict(security_protocol="SSL", ssl_cafile=ca, ssl_certfile=cert, ssl_keyfile=key, ssl_check_hostname=False,
           api_version=(2, 8, 0))
try:
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=10000, max_block_ms=5000, **ssl)
    for i in range(3):
        p.send(topic, value=b"py%d" % i, partition=0).get(timeout=10)
    p.close()
    c = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=10000, **ssl)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    values = []
    for m in c:
        values.append(m.value.decode())
        if len(values) == 3:
            break
    print("values=" + ",".join(values))
    c.close()
except Exception as e:
    print("error=%s: %s" % (type(e).__name__, e))
`

// TestPythonSSLClientCertificate: kafka-python (scripts/test.sh installs
// it from PyPI) over an SSL listener that requires client certificates
// (ssl.client.auth=required, a PEM truststore): a certificate of the CA
// produces and reads back; one of another CA gets nothing served.
func TestPythonSSLClientCertificate(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 not installed")
	}
	if err := exec.Command(python, "-c", "from kafka import KafkaProducer").Run(); err != nil {
		t.Fatal("kafka-python not installed (scripts/test.sh installs it: pip install kafka-python)")
	}
	ca, other := testkit.NewCA(t, "ringlog test CA"), testkit.NewCA(t, "another CA")
	server := ca.Issue(pkix.Name{CommonName: "broker"})
	inter, secure := testkit.FreeAddr(t), testkit.FreeAddr(t)
	dir := t.TempDir()
	props := filepath.Join(dir, "server.properties")
	conf := fmt.Sprintf(`listeners=PLAINTEXT://%s,SSL://%s
ssl.keystore.type=PEM
ssl.keystore.location=%s
ssl.truststore.type=PEM
ssl.truststore.location=%s
ssl.client.auth=required
ssl.principal.mapping.rules=RULE:^CN=(.*?),.*$/$1/L,DEFAULT
`, inter, secure, server.File, ca.CertFile)
	if err := os.WriteFile(props, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "client.py")
	if err := os.WriteFile(script, []byte(pythonClient), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "-config", props, "-data-dir", t.TempDir())
	p.waitFor(t, "ringlog started")
	run := func(c *testkit.Issued, topic string) string {
		certFile, keyFile := filepath.Join(t.TempDir(), "cert.pem"), filepath.Join(t.TempDir(), "key.pem")
		os.WriteFile(certFile, c.CertPEM, 0o600)
		os.WriteFile(keyFile, c.KeyPEM, 0o600)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		began := time.Now()
		out, err := exec.CommandContext(ctx, python, script, secure, ca.CertFile, certFile, keyFile, topic).CombinedOutput()
		t.Logf("kafka-python (%s): %v", topic, time.Since(began).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("kafka-python: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if out := run(ca.Issue(pkix.Name{CommonName: "Alice", Organization: []string{"Example"}}), "py-ssl"); !strings.HasSuffix(out, "values=py0,py1,py2") {
		t.Fatalf("kafka-python with the CA's certificate:\n%s", out)
	}
	if out := run(other.Issue(pkix.Name{CommonName: "mallory"}), "py-stranger"); !strings.Contains(out, "error=") {
		t.Fatalf("kafka-python with another CA's certificate was served:\n%s", out)
	}
	p.stop(t)
}
