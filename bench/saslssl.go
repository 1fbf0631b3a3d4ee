package bench

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"ringlog/internal/pki"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The peer "ringlog-sasl-ssl" is the benchmarked binary configured as
// docs/security.md sets up SASL_SSL: a PLAINTEXT listener on loopback for
// administration (and, in a cluster, brokers) beside a SASL_SSL listener
// for clients, with SCRAM-SHA-512 and a PEM keystore. Its certificate
// comes from a CA made at run time; its user is made with kadm's
// AlterUserSCRAMs on the PLAINTEXT listener before anything is measured.
// Every client of the suite (kgo and kcat) then connects over SASL_SSL.

// saslSSLUser is the SCRAM user the clients authenticate as.
const saslSSLUser = "bench"

// saslSSLIterations is the user's SCRAM iteration count: docs/security.md's
// (and kafka-configs' usual 8192). It costs at authentication only, once
// per connection.
const saslSSLIterations = 8192

// saslSSL is one SASL_SSL set-up: its files and its user's credentials.
type saslSSL struct {
	dir      string
	caFile   string // the CA certificate, PEM: the clients' truststore
	keystore string // the broker's private key then certificate, PEM
	pool     *x509.CertPool
	password string
	// inter is the PLAINTEXT listener's address, where the user is made.
	inter string
}

// newSASLSSL makes a CA and a broker certificate for 127.0.0.1 and
// localhost under dir, and a random password.
func newSASLSSL(dir string) (*saslSSL, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := pki.NewCA("ringlog bench CA", 7*24*time.Hour)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	broker, err := ca.Issue(pkix.Name{CommonName: "ringlog bench broker"}, 7*24*time.Hour)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	c := &saslSSL{dir: dir, caFile: filepath.Join(dir, "ca.pem"), keystore: filepath.Join(dir, "broker-keystore.pem"),
		pool: x509.NewCertPool(), password: hex.EncodeToString(secret)}
	c.pool.AddCert(ca.Cert)
	// The keystore as ssl.keystore.location reads it: the private key,
	// then the certificate, readable by the broker only.
	if err := os.WriteFile(c.keystore, broker.Keystore(), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.caFile, ca.PEM, 0o644); err != nil {
		return nil, err
	}
	return c, nil
}

// properties is the broker's server.properties: Kafka's listener settings,
// with inter the PLAINTEXT listener's address and client the SASL_SSL
// one's.
func (c *saslSSL) properties(inter, client string) string {
	return fmt.Sprintf(`listeners=PLAINTEXT://%s,SASL_SSL://%s
inter.broker.listener.name=PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512
ssl.keystore.type=PEM
ssl.keystore.location=%s
`, inter, client, c.keystore)
}

// kgoOpts are the options that make a kgo client connect over SASL_SSL.
func (c *saslSSL) kgoOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.DialTLSConfig(&tls.Config{RootCAs: c.pool, MinVersion: tls.VersionTLS12}),
		kgo.SASL(scram.Auth{User: saslSSLUser, Pass: c.password}.AsSha512Mechanism()),
	}
}

// kcatArgs are kcat's (librdkafka's) settings for SASL_SSL, as
// docs/security.md gives them.
func (c *saslSSL) kcatArgs() []string {
	return []string{"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
		"-X", "sasl.username=" + saslSSLUser, "-X", "sasl.password=" + c.password, "-X", "ssl.ca.location=" + c.caFile}
}

// makeUser creates the SCRAM-SHA-512 user with kadm on the PLAINTEXT
// listener, then waits until a client authenticates with it over
// SASL_SSL at client: the credential reaches the broker's metadata image
// after the controller commits it, a moment after AlterUserSCRAMs is
// answered.
func (c *saslSSL) makeUser(ctx context.Context, client string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.inter))
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: saslSSLUser,
		Mechanism: kadm.ScramSha512, Iterations: saslSSLIterations, Password: c.password}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		return fmt.Errorf("creating the SCRAM user on the PLAINTEXT listener: %w", err)
	}
	for {
		err := c.authenticates(ctx, client)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the SCRAM user does not authenticate over SASL_SSL after %v: %w", timeout, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// authenticates makes one SASL_SSL connection and one Metadata request.
func (c *saslSSL) authenticates(ctx context.Context, client string) error {
	cl, err := kgo.NewClient(append(c.kgoOpts(), kgo.SeedBrokers(client))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	_, err = req.RequestWith(actx, cl)
	return err
}

// saslSSLWorkload is true for the workloads the SASL_SSL peer runs: those
// of its targets, 1 KiB produce (kgo, and kcat) and consume on the base
// workload's settings.
func saslSSLWorkload(w workload) bool {
	return (w.kind == kindProduce || w.kind == kindConsume) && w.size == 1024 && w.partitions == 16 && w.acks == 1 &&
		w.compression == "none" && !w.fsync && w.rate == 0
}

// saslSSLReason is why the SASL_SSL peer's other rows are not measured.
const saslSSLReason = "ringlog SASL_SSL runs the workloads of its targets only (1 KiB produce and consume, " +
	"16 partitions, acks=1, flush never); the other settings do not change what TLS and SCRAM cost per byte"

// startSASLSSL starts the benchmarked binary with a PLAINTEXT and a
// SASL_SSL listener, configured by a server.properties in the peer's TLS
// folder.
func (p *peer) startSASLSSL(broker string) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	inter, client, adminPort := ports[0], ports[1], ports[2]
	interAddr, clientAddr := fmt.Sprintf("127.0.0.1:%d", inter), fmt.Sprintf("127.0.0.1:%d", client)
	// The rows differ from the reference's by their client listener alone.
	c, settings, err := p.startConfigured(broker, filepath.Join(p.sec.dir, "server.properties"),
		p.sec.properties(interAddr, clientAddr), clientAddr, adminPort)
	if err != nil {
		return err
	}
	p.sec.inter = interAddr
	p.settings = settings + "; " + saslSSLSettings(c.output(), interAddr, clientAddr)
	return nil
}

// saslSSLSettings describes the two listeners, the client one's network
// engine in the broker's own words (its "netpoll: listening" line).
func saslSSLSettings(output []string, inter, client string) string {
	engine := "(the broker did not log its engine)"
	for _, l := range output {
		if !strings.Contains(l, `msg="netpoll: listening"`) {
			continue
		}
		f := map[string]string{}
		for _, m := range logField.FindAllStringSubmatch(l, -1) {
			f[m[1]] = strings.Trim(m[2], `"`)
		}
		if f["addr"] == client {
			engine = fmt.Sprintf("network %s (%s)", f["io"], f["detail"])
		}
	}
	return fmt.Sprintf("listeners PLAINTEXT://%s (administration: the SCRAM user is made there with kadm) and "+
		"SASL_SSL://%s (every client of the suite): sasl.enabled.mechanisms=SCRAM-SHA-512 (user %q, %d iterations), "+
		"ssl.keystore.type=PEM with an ECDSA P-256 certificate from a CA made at run time, "+
		"ssl.enabled.protocols at its default (TLSv1.2,TLSv1.3; Go's crypto/tls); the SASL_SSL listener runs %s, "+
		"so its rows compare TLS on netpoll's portable engine with ringlog io_uring's plaintext on gnet, each as users run it "+
		"(ringlog portable's rows give plaintext on the portable engine)",
		inter, client, saslSSLUser, saslSSLIterations, engine)
}
