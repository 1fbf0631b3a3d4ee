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
