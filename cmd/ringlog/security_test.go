package main

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"ringlog/internal/testkit"
)

// TestKcatSASLSSL: the binary, configured with Kafka's listener settings
// (a PLAINTEXT inter-broker listener on loopback and a SASL_SSL one with
// SCRAM-SHA-512 and a PEM keystore), serves kcat (librdkafka) over
// SASL_SSL with a SCRAM user made with kadm; a wrong password is refused.
// The authorizer is on (issue 15): the user's ACLs, made with kadm, let
// kcat and a kgo client produce to and consume one topic, and both are
// refused another with TOPIC_AUTHORIZATION_FAILED.
func TestKcatSASLSSL(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
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
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS
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
	acls := kadm.NewACLs().Allow("User:kcat").AllowHosts("*").Topics("secure").
		Operations(kadm.OpWrite, kadm.OpRead, kadm.OpCreate, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	if rs, err := kadm.NewClient(adm).CreateACLs(ctx, acls); err != nil || len(rs) == 0 || rs[0].Err != nil {
		t.Fatalf("CreateACLs: %v %v", err, rs)
	}
	// The secret topic exists, made by the super user; kcat may not see it.
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, 1, 1, nil, "secret"); err != nil {
		t.Fatal(err)
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
	out, err = run("kcat-secret", "x\n", "-P", "-t", "secret")
	if !strings.Contains(strings.ToLower(out), "topic authorization failed") {
		t.Fatalf("kcat -P to a topic without ACLs: %v\n%s", err, out)
	}
	// kgo through the same SASL_SSL listener, as the same user.
	cl, err := kgo.NewClient(kgo.SeedBrokers(client), kgo.DialTLSConfig(ca.ClientTLS(nil)),
		kgo.SASL(scram.Auth{User: "kcat", Pass: "kcat-secret"}.AsSha512Mechanism()), kgo.RequestRetries(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "secure", Value: []byte("four")}).FirstErr(); err != nil {
		t.Fatalf("kgo produce over SASL_SSL with WRITE: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "secret", Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("kgo produce to a topic without ACLs: %v, want TOPIC_AUTHORIZATION_FAILED", err)
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
	t.Parallel() // broker processes: the test waits on them far more than it computes
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

// rssBytes is a process's resident set size, from /proc.
func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// idleConnsRSSMax is the bound on what 10,000 idle unauthenticated
// connections may add to the broker's resident memory (measured: 67 MiB,
// under 7 KiB a connection, on gnet, where a silent connection holds no
// read buffer).
const idleConnsRSSMax = 128 << 20

// TestIdleUnauthenticatedConnections: 10,000 connections opened to a
// SASL listener and left silent cost the broker less than
// idleConnsRSSMax of memory, and an authenticated client produces and
// reads back meanwhile.
func TestIdleUnauthenticatedConnections(t *testing.T) {
	inter, sasl := testkit.FreeAddr(t), testkit.FreeAddr(t)
	props := filepath.Join(t.TempDir(), "server.properties")
	conf := fmt.Sprintf(`listeners=PLAINTEXT://%s,SASL_PLAINTEXT://%s
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";
ringlog.sasl.authentication.timeout.ms=300000
max.connections=12000
`, inter, sasl)
	if err := os.WriteFile(props, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "-config", props, "-data-dir", t.TempDir())
	p.waitFor(t, "ringlog started")
	before := rssBytes(t, p.cmd.Process.Pid)
	const n = 10000
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for len(conns) < n {
		c, err := net.DialTimeout("tcp", sasl, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	time.Sleep(time.Second) // every connection accepted and registered
	after := rssBytes(t, p.cmd.Process.Pid)
	t.Logf("broker RSS %d MiB before, %d MiB with %d idle unauthenticated connections (+%d KiB each)",
		before>>20, after>>20, n, (after-before)/n>>10)
	if after-before > idleConnsRSSMax {
		t.Errorf("%d idle connections added %d MiB, more than %d MiB", n, (after-before)>>20, idleConnsRSSMax>>20)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(sasl), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("busy"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 50 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "busy", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d beside the idle connections: %v", i, err)
		}
	}
	if fs := cl.PollFetches(ctx); fs.Err0() != nil || len(fs.Records()) == 0 {
		t.Fatalf("consume beside the idle connections: %v", fs.Err0())
	}
}

// TestDescriptorExhaustion: a broker with ulimit -n 256 that 1,000
// connection attempts run out of descriptors keeps serving the clients it
// has, and accepts again once the attempts are gone.
func TestDescriptorExhaustion(t *testing.T) {
	addr := testkit.FreeAddr(t)
	p := &proc{cmd: exec.Command("sh", "-c", `ulimit -n 256 && exec "$0" "$@"`, testkit.Binary(t), "-listen", addr, "-data-dir", t.TempDir()),
		out: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.done })
	p.waitFor(t, "ringlog started")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("fds"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, kgo.StringRecord("before")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	for range 1000 {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			held = append(held, c)
		}
	}
	p.waitFor(t, "accept failed")
	// The client connected before goes on while descriptors are out.
	if err := cl.ProduceSync(ctx, kgo.StringRecord("during")).FirstErr(); err != nil {
		t.Fatalf("produce while descriptors are exhausted: %v", err)
	}
	for _, c := range held {
		c.Close()
	}
	fresh, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("fds"))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if err := fresh.ProduceSync(ctx, kgo.StringRecord("after")).FirstErr(); err != nil {
		t.Fatalf("a new client after the descriptors freed up: %v\n%s", err, p.out.String())
	}
}

// TestAddScram: a broker whose only listener is SASL_PLAINTEXT with
// SCRAM-SHA-512 (its inter-broker listener too, the broker's own
// credential admin's) can be reached at all only through the credentials
// -add-scram writes at its first start (Kafka's kafka-storage format
// --add-scram): admin authenticates, produces and reads back. A user
// deleted with AlterUserScramCredentials stays deleted across a restart
// with the same flags, and a bad -add-scram stops the start with an error
// naming it.
func TestAddScram(t *testing.T) {
	addr, dir := testkit.FreeAddr(t), t.TempDir()
	props := filepath.Join(t.TempDir(), "server.properties")
	conf := fmt.Sprintf(`listeners=SASL_PLAINTEXT://%s
inter.broker.listener.name=SASL_PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";
super.users=User:admin
`, addr)
	if err := os.WriteFile(props, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-config", props, "-data-dir", dir,
		"-add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
		"-add-scram", `SCRAM-SHA-512=[name=bob,iterations=8192,password="b,o=b"]`}
	p := start(t, args...)
	p.waitFor(t, "ringlog started")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := func(user, password string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("boot"), kgo.AllowAutoTopicCreation(),
			kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	admin := client("admin", "admin-secret")
	if err := admin.ProduceSync(ctx, &kgo.Record{Value: []byte("in")}).FirstErr(); err != nil {
		t.Fatalf("produce as the bootstrap admin: %v\n%s", err, p.out.String())
	}
	if err := client("bob", "b,o=b").ProduceSync(ctx, &kgo.Record{Value: []byte("bob")}).FirstErr(); err != nil {
		t.Fatalf("produce as bob (a quoted password with a comma): %v", err)
	}
	adm := kadm.NewClient(admin)
	if res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha512}}, nil); err != nil || res.Error() != nil {
		t.Fatalf("deleting bob: %v %v", err, res.Error())
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}

	p = start(t, args...)
	p.waitFor(t, "ringlog started")
	if !strings.Contains(p.out.String(), "written at an earlier start") {
		t.Errorf("the restart did not say it left the credentials alone:\n%s", p.out.String())
	}
	admin = client("admin", "admin-secret")
	described, err := kadm.NewClient(admin).DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := described["bob"]; ok {
		t.Fatalf("bob, deleted, came back with the restart: %v", described)
	}
	if _, ok := described["admin"]; !ok {
		t.Fatalf("admin is gone after the restart: %v", described)
	}
	p.stop(t)

	for _, bad := range []string{"SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-512=[name=a]", "SCRAM-SHA-512=[name=a,password=b,iterations=99]",
		"SCRAM-SHA-512=[name=a,salt=MWx,password=b]", "SCRAM-SHA-512=name=a,password=b"} {
		out, err := exec.Command(testkit.Binary(t), "-data-dir", t.TempDir(), "-listen", testkit.FreeAddr(t), "-add-scram", bad).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "add-scram") && !strings.Contains(string(out), "SCRAM bootstrap") {
			t.Errorf("-add-scram %s: %v\n%s", bad, err, out)
		}
	}
}
