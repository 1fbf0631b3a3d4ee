package main

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit"
)

// franzKgoPackage is franz-go's client package, whose own test suite
// (built from the module cache, at the version go.mod requires) is run
// against the binary here.
const franzKgoPackage = "github.com/twmb/franz-go/pkg/kgo"

// franzGoFull makes TestFranzGoSecurity run franz-go's whole pkg/kgo
// suite (every test but franzGoExcluded) over the SSL listener instead of
// its subset: scripts/franzgo.sh (minutes; KGO_TEST_RECORDS from the
// environment bounds the ETL tests, 500,000 records by default).
var franzGoFull = flag.Bool("franzgo.full", false, "run franz-go's whole pkg/kgo suite in TestFranzGoSecurity")

// franzGoExcluded are the tests of franz-go's suite that cannot pass
// here, whatever the broker: TestIssue769 sets a Dialer, which franz-go
// refuses beside KGO_TEST_TLS's DialTLSConfig (the client is nil and the
// test panics, on Kafka too).
var franzGoExcluded = []string{"TestIssue769"}

// buildFranzKgoTests compiles franz-go's pkg/kgo tests into a binary
// (go test -c), at the version this module requires, and returns it with
// the package's source folder, where go test would run it (a test reads
// config.go there). A build that fails fails the test.
func buildFranzKgoTests(t *testing.T) (bin, dir string) {
	t.Helper()
	bin = filepath.Join(t.TempDir(), "kgo.test")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	began := time.Now()
	out, err := exec.CommandContext(ctx, goBin, "test", "-c", "-o", bin, franzKgoPackage).CombinedOutput()
	if err != nil {
		t.Fatalf("go test -c %s: %v\n%s", franzKgoPackage, err, out)
	}
	t.Logf("built franz-go's %s tests in %v", franzKgoPackage, time.Since(began).Round(time.Millisecond))
	out, err = exec.CommandContext(ctx, goBin, "list", "-f", "{{.Dir}}", franzKgoPackage).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", franzKgoPackage, err)
	}
	return bin, strings.TrimSpace(string(out))
}

// runFranzKgoTests runs the compiled kgo tests in dir with env added: the
// tests named in want (exactly those), failing unless each of them ran
// and passed, for a skip (the suite skips what its environment does not
// configure) is a failure here; or, with want empty, the whole suite but
// franzGoExcluded, failing unless it passes (skips are logged).
func runFranzKgoTests(t *testing.T, bin, dir string, env []string, want ...string) {
	t.Helper()
	timeout := 3 * time.Minute
	args := []string{"-test.v", "-test.count=1"}
	if len(want) > 0 {
		args = append(args, "-test.run", "^("+strings.Join(want, "|")+")$")
	} else {
		timeout = 60 * time.Minute
		args = append(args, "-test.skip", "^("+strings.Join(franzGoExcluded, "|")+")$")
	}
	args = append(args, "-test.timeout", (timeout - 30*time.Second).String())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
	out := &boundedOutput{}
	cmd.Stdout, cmd.Stderr = out, out
	began := time.Now()
	err := cmd.Run()
	t.Logf("%s %s (%s): %v in %v\n%s", filepath.Base(bin), strings.Join(args, " "), strings.Join(env, " "), err,
		time.Since(began).Round(time.Millisecond), out)
	results := out.results.Bytes()
	if err != nil {
		t.Fatalf("franz-go's tests failed: %v; their results:\n%s", err, results)
	}
	if len(want) == 0 {
		for _, l := range regexp.MustCompile(`(?m)^\s*--- SKIP: .*$`).FindAll(results, -1) {
			t.Logf("skipped: %s", bytes.TrimSpace(l))
		}
		return
	}
	for _, name := range want {
		if !regexp.MustCompile(`(?m)^\s*--- PASS: ` + regexp.QuoteMeta(name) + ` `).Match(results) {
			t.Fatalf("franz-go's %s did not pass (skipped or not run)", name)
		}
	}
	if bytes.Contains(results, []byte("--- SKIP")) {
		t.Fatal("franz-go's tests skipped some")
	}
}

// boundedOutput is the output of franz-go's tests as runFranzKgoTests
// keeps it: the first and the last MiB, and every result line of go
// test -v (--- PASS, FAIL, SKIP) whole. A franz-go test failing in a loop
// once wrote 1.3 GB, which was held in memory and logged.
type boundedOutput struct {
	head, tail []byte
	dropped    int64
	line       []byte // the line being written, up to its first KiB
	results    bytes.Buffer
}

const boundedOutputMax = 1 << 20 // of the head, and of the tail

var resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): `)

func (o *boundedOutput) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			o.line = append(o.line, rest[:min(len(rest), max(0, 1024-len(o.line)))]...)
			break
		}
		o.line = append(o.line, rest[:min(i, max(0, 1024-len(o.line)))]...)
		if resultLine.Match(o.line) {
			o.results.Write(o.line)
			o.results.WriteByte('\n')
		}
		o.line, rest = o.line[:0], rest[i+1:]
	}
	n := len(p)
	if room := boundedOutputMax - len(o.head); room > 0 {
		k := min(room, len(p))
		o.head, p = append(o.head, p[:k]...), p[k:]
	}
	o.tail = append(o.tail, p...)
	if len(o.tail) > 2*boundedOutputMax {
		cut := len(o.tail) - boundedOutputMax
		o.dropped += int64(cut)
		o.tail = append(o.tail[:0], o.tail[cut:]...)
	}
	return n, nil
}

func (o *boundedOutput) String() string {
	if o.dropped == 0 {
		return string(o.head) + string(o.tail)
	}
	return fmt.Sprintf("%s\n[... %d bytes left out ...]\n%s", o.head, o.dropped, o.tail)
}

// TestFranzGoSecurity runs franz-go's own SASL tests from its pkg/kgo
// suite against the binary, configured with Kafka's server.properties as
// franz-go's CI configures Kafka for them:
//
//   - TestSCRAMAuth, TestSCRAMAuthBadCredentials (KGO_TEST_SCRAM_SEEDS,
//     KGO_TEST_SCRAM=user:pass[:512]): a SASL_PLAINTEXT listener with
//     SCRAM-SHA-256 and -512 and a user made with kadm, once with each
//     mechanism;
//   - TestOAuthAuth (KGO_TEST_OAUTH_SEEDS): OAUTHBEARER on the same
//     listener with Kafka's default unsecured validator (an alg none
//     token with sub and exp only is taken, an expired one refused
//     with invalid_token).
//
// KGO_TEST_TLS is read only by the clients of the rest of the suite
// (KGO_SEEDS), not by those SASL tests: ten tests of that suite (seconds
// together) run over an SSL listener that requires a client
// certificate, with KGO_TEST_TLS naming the CA and the client's
// certificate and key; with -franzgo.full (scripts/franzgo.sh), the whole
// suite but franzGoExcluded does.
func TestFranzGoSecurity(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	bin, kgoDir := buildFranzKgoTests(t)

	ca := testkit.NewCA(t, "ringlog test CA")
	server := ca.Issue(pkix.Name{CommonName: "broker"})
	client := ca.Issue(pkix.Name{CommonName: "franz-go"})
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	if err := os.WriteFile(certFile, client.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, client.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	inter, ssl, sasl := testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t)
	props := filepath.Join(dir, "server.properties")
	conf := fmt.Sprintf(`listeners=PLAINTEXT://%s,SSL://%s,SASL_PLAINTEXT://%s
inter.broker.listener.name=PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER
listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";
ssl.keystore.type=PEM
ssl.keystore.location=%s
ssl.truststore.type=PEM
ssl.truststore.location=%s
ssl.client.auth=required
`, inter, ssl, sasl, server.File, ca.CertFile)
	if err := os.WriteFile(props, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "-config", props, "-data-dir", t.TempDir())
	p.waitFor(t, "ringlog started")
	defer func() {
		if t.Failed() {
			t.Logf("broker:\n%s", p.out.String())
		}
	}()

	// The SCRAM user, with both mechanisms, as franz-go's CI makes it
	// with kafka-configs.sh on the PLAINTEXT listener.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(inter))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	// One request each: KRaft takes one alteration of a user a request.
	for _, m := range []kadm.ScramMechanism{kadm.ScramSha256, kadm.ScramSha512} {
		res, err := kadm.NewClient(adm).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "testuser", Mechanism: m, Iterations: 4096, Password: "testpass"}})
		if err != nil || res.Error() != nil {
			t.Fatalf("AlterUserSCRAMs %v: %v %v", m, err, res.Error())
		}
	}

	env := []string{
		"KGO_SEEDS=" + ssl,
		"KGO_TEST_TLS=ca:" + ca.CertFile + ",cert:" + certFile + ",key:" + keyFile,
		"KGO_TEST_RF=1",
		"KGO_TEST_SCRAM_SEEDS=" + sasl,
		"KGO_TEST_OAUTH_SEEDS=" + sasl,
	}
	if *franzGoFull {
		runFranzKgoTests(t, bin, kgoDir, append(env, "KGO_TEST_SCRAM=testuser:testpass"))
	} else {
		runFranzKgoTests(t, bin, kgoDir, append(env, "KGO_TEST_SCRAM=testuser:testpass"),
			// KGO_TEST_SCRAM_SEEDS, KGO_TEST_SCRAM, KGO_TEST_OAUTH_SEEDS:
			"TestSCRAMAuth", "TestSCRAMAuthBadCredentials", "TestOAuthAuth",
			// KGO_SEEDS over TLS with KGO_TEST_TLS's client certificate:
			// metadata, coordinators, produce (small and too large
			// records), consume, both group protocols. The rest of the
			// suite runs with -franzgo.full (scripts/franzgo.sh).
			// TestGroupSimple/848 skips unless the suite's admin client
			// has seen ConsumerGroupHeartbeat in ApiVersions first, which
			// TestClient_Produce (not parallel: it runs before the
			// parallel tests resume) makes sure of.
			"TestPing", "TestIssue1034", "TestClient_Produce", "TestClient_ProduceLargeMessages", "TestIssue831",
			"TestIssue325", "TestConsumeTopicRetrieval", "TestPooling", "TestLookbackMilli", "TestGroupSimple")
	}
	runFranzKgoTests(t, bin, kgoDir, append(env, "KGO_TEST_SCRAM=testuser:testpass:512"), "TestSCRAMAuth")
	if !*franzGoFull {
		// Transactions: franz-go's consume-transform-produce chain of
		// GroupTransactSessions (classic and KIP-848 groups, static
		// members), read_committed, exactly once through three levels,
		// with 20,000 records rather than its 500,000 (-franzgo.full runs
		// those).
		runFranzKgoTests(t, bin, kgoDir, append(env, "KGO_TEST_SCRAM=testuser:testpass", "KGO_TEST_RECORDS=20000"), "TestTxnEtl")
	}
	p.stop(t)
}

// TestFranzGoTxnEtlCluster runs franz-go's TestTxnEtl against three
// broker processes (issue 12 asks for it on one broker, which
// TestFranzGoSecurity runs, and on a cluster): its topic has 3 replicas
// (KGO_TEST_RF), and so have __consumer_offsets and __transaction_state,
// created at the suite's first FindCoordinator once the three brokers are
// registered. The transaction coordinators, the group coordinators and
// the partitions' leaders are spread over the brokers, so most markers
// reach their partition with WriteTxnMarkers from another broker, and
// every transactional produce is verified with a coordinator that is
// often on another broker. 20,000 records, as TestFranzGoSecurity's run
// on one broker.
func TestFranzGoTxnEtlCluster(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	bin, kgoDir := buildFranzKgoTests(t)
	began := time.Now()
	c := startCluster(t, 3, `group.initial.rebalance.delay.ms=0
offsets.topic.num.partitions=8
transaction.state.log.num.partitions=8
`)
	t.Logf("3 brokers started in %v", time.Since(began).Round(time.Millisecond))
	began = time.Now()
	runFranzKgoTests(t, bin, kgoDir, []string{"KGO_SEEDS=" + strings.Join(c.addrs, ","), "KGO_TEST_RF=3", "KGO_TEST_RECORDS=20000"}, "TestTxnEtl")
	t.Logf("TestTxnEtl against 3 brokers: %v", time.Since(began).Round(time.Millisecond))

	// The internal topics have their 3 replicas, and markers crossed
	// brokers.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	internal := []string{"__consumer_offsets", "__transaction_state"}
	topics, err := kadm.NewClient(cl).ListTopicsWithInternal(ctx, internal...)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range internal {
		td := topics[name]
		if td.Err != nil || len(td.Partitions) != 8 {
			t.Fatalf("%s: %v, %d partitions, want 8", name, td.Err, len(td.Partitions))
		}
		for _, p := range td.Partitions {
			if len(p.Replicas) != 3 || len(p.ISR) != 3 {
				t.Fatalf("%s-%d: replicas %v, ISR %v, want 3 of each", name, p.Partition, p.Replicas, p.ISR)
			}
		}
	}
	if n := c.requests("WriteTxnMarkers"); n == 0 {
		t.Fatal("no WriteTxnMarkers request between the brokers")
	} else {
		t.Logf("%d WriteTxnMarkers requests between the brokers", n)
	}
	began = time.Now()
	c.stop()
	t.Logf("3 brokers stopped in %v", time.Since(began).Round(time.Millisecond))
}

// franzGoCluster makes TestFranzGoRolesCluster run franz-go's whole
// pkg/kgo suite against the six processes instead of its subset
// (scripts/franzgo.sh -cluster; minutes).
var franzGoCluster = flag.Bool("franzgo.cluster", false, "run franz-go's whole pkg/kgo suite in TestFranzGoRolesCluster")

// TestFranzGoRolesCluster runs franz-go's pkg/kgo tests against three
// controller-only and three broker-only processes (process.roles, issue
// 14), every topic with 3 replicas (KGO_TEST_RF): by default a produce
// and a group test, with -franzgo.cluster the whole suite.
func TestFranzGoRolesCluster(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	bin, kgoDir := buildFranzKgoTests(t)
	began := time.Now()
	c := newRolesCluster(t, 3, "group.initial.rebalance.delay.ms=0\noffsets.topic.num.partitions=8\ntransaction.state.log.num.partitions=8\n")
	for _, id := range []int{4, 5, 6} {
		c.startBroker(id, "-controller-voters", c.voters)
	}
	waitBrokerIDs(t, c.addrs[4], 4, 5, 6)
	t.Logf("3 controllers and 3 brokers started in %v", time.Since(began).Round(time.Millisecond))
	env := []string{"KGO_SEEDS=" + strings.Join(c.seeds(), ","), "KGO_TEST_RF=3"}
	if *franzGoCluster {
		records := os.Getenv("KGO_TEST_RECORDS")
		if records == "" {
			records = "20000"
		}
		runFranzKgoTests(t, bin, kgoDir, append(env, "KGO_TEST_RECORDS="+records))
		return
	}
	runFranzKgoTests(t, bin, kgoDir, env, "TestClient_Produce", "TestGroupSimple")
}
