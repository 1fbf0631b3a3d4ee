package broker

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ringlog/internal/testkit"
)

// handshake runs one TLS handshake between cfg on a loopback listener and
// a client with ccfg, and returns the certificate the server presented.
func handshake(t *testing.T, cfg, ccfg *tls.Config) (string, error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.(*tls.Conn).Handshake()
			c.Write([]byte("x"))
			c.Close()
		}
	}()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), ccfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		return "", err
	}
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

// TestTLSConfig: a PEM keystore and truststore by Kafka's names, client
// authentication required (a certificate of another CA, or none, is
// refused), and a keystore file replaced on disk serving the next
// handshakes without a restart.
func TestTLSConfig(t *testing.T) {
	ca, other := testkit.NewCA(t, "ringlog test CA"), testkit.NewCA(t, "another CA")
	server := ca.Issue(pkix.Name{CommonName: "broker-1"})
	client, stranger := ca.Issue(pkix.Name{CommonName: "alice"}), other.Issue(pkix.Name{CommonName: "mallory"})
	cfg, err := TLSConfig(TLSSettings{"ssl.keystore.type": "PEM", "ssl.keystore.location": server.File,
		"ssl.truststore.type": "PEM", "ssl.truststore.location": ca.CertFile, "ssl.client.auth": "required"}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if cn, err := handshake(t, cfg, ca.ClientTLS(client)); err != nil || cn != "broker-1" {
		t.Fatalf("a client of the CA: %q %v", cn, err)
	}
	for name, c := range map[string]*testkit.Issued{"another CA's certificate": stranger, "no certificate": nil} {
		if _, err := handshake(t, cfg, ca.ClientTLS(c)); err == nil {
			t.Fatalf("%s was accepted", name)
		}
	}

	renewed := ca.Issue(pkix.Name{CommonName: "broker-1-renewed"})
	b, _ := os.ReadFile(renewed.File)
	time.Sleep(reloadCheckInterval + 10*time.Millisecond) // a new mtime, and past the check interval
	if err := os.WriteFile(server.File, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if cn, err := handshake(t, cfg, ca.ClientTLS(client)); err != nil || cn != "broker-1-renewed" {
		t.Fatalf("after the keystore changed: %q %v", cn, err)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	ca := testkit.NewCA(t, "ca")
	server := ca.Issue(pkix.Name{CommonName: "broker"})
	for _, c := range []struct {
		s    TLSSettings
		want string
	}{
		{TLSSettings{}, "no keystore"},
		{TLSSettings{"ssl.keystore.type": "JKS", "ssl.keystore.location": server.File}, "only PEM"},
		{TLSSettings{"ssl.keystore.location": server.File, "ssl.key.password": "x"}, "encrypted"},
		{TLSSettings{"ssl.keystore.location": server.File, "ssl.client.auth": "required"}, "needs a truststore"},
		{TLSSettings{"ssl.keystore.location": server.File, "ssl.client.auth": "sometimes"}, "ssl.client.auth"},
		{TLSSettings{"ssl.keystore.location": server.File, "ssl.enabled.protocols": "TLSv1.1"}, "TLSv1.1"},
		{TLSSettings{"ssl.keystore.location": server.File, "ssl.cipher.suites": "TLS_RSA_WITH_RC4_128_SHA"}, "cipher"},
		{TLSSettings{"ssl.keystore.location": "/nonexistent"}, "ssl.keystore.location"},
		{TLSSettings{"ssl.keystore.location": server.File, "ssl.bogus": "1"}, "ssl.bogus"},
		{TLSSettings{"ssl.keystore.key": string(server.KeyPEM), "ssl.keystore.certificate.chain": string(ca.PEM)}, "ssl.keystore"},
	} {
		if _, err := TLSConfig(c.s, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %q", c.s, err, c.want)
		}
	}
	// The inline forms.
	if _, err := TLSConfig(TLSSettings{"ssl.keystore.key": string(server.KeyPEM), "ssl.keystore.certificate.chain": string(server.CertPEM),
		"ssl.truststore.certificates": string(ca.PEM), "ssl.client.auth": "requested", "ssl.enabled.protocols": "TLSv1.3"}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestClientTLSReloadsTruststore: a broker's own connections (to a leader,
// to the controller port) trust the truststore file as it is now: a
// leader whose certificate another CA signed is refused, then trusted
// once that CA is written into the file, without a restart; the name
// dialled is checked unless ssl.endpoint.identification.algorithm is
// empty, and the chain is checked even then.
func TestClientTLSReloadsTruststore(t *testing.T) {
	ca, other := testkit.NewCA(t, "first CA"), testkit.NewCA(t, "second CA")
	mine := ca.Issue(pkix.Name{CommonName: "node-1"})
	leaderCert := other.Issue(pkix.Name{CommonName: "node-2"})
	trust := filepath.Join(t.TempDir(), "truststore.pem")
	if err := os.WriteFile(trust, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	leader, err := TLSConfig(TLSSettings{"ssl.keystore.location": leaderCert.File}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	s := TLSSettings{"ssl.keystore.location": mine.File, "ssl.truststore.location": trust}
	client, err := InterBrokerTLS(s, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := ControllerTLS(s, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	// What the broker dials with: the fetcher's TLSFor, the controller's
	// ClientFor.
	dialers := map[string]func(string) *tls.Config{"inter-broker": clientTLSFor(client), "controller": ctl.ClientFor}
	dial := func(forHost func(string) *tls.Config, name string) error {
		_, err := handshake(t, leader, forHost(name))
		return err
	}
	for name, f := range dialers {
		if f == nil {
			t.Fatalf("%s: no per-host config", name)
		}
		if err := dial(f, "127.0.0.1"); err == nil {
			t.Fatalf("%s: a leader of another CA was trusted", name)
		}
	}
	time.Sleep(reloadCheckInterval + 10*time.Millisecond)
	if err := os.WriteFile(trust, append(append([]byte{}, ca.PEM...), other.PEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, f := range dialers {
		if err := dial(f, "127.0.0.1"); err != nil {
			t.Fatalf("%s: after the truststore took the second CA: %v", name, err)
		}
		if err := dial(f, "broker.example"); err == nil {
			t.Fatalf("%s: a certificate that does not name the host dialled was trusted", name)
		}
	}
	s["ssl.endpoint.identification.algorithm"] = ""
	noName, err := InterBrokerTLS(s, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(clientTLSFor(noName), "broker.example"); err != nil {
		t.Fatalf("hostname verification off: %v", err)
	}
	s["ssl.truststore.location"] = ca.CertFile
	strict, err := InterBrokerTLS(s, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(clientTLSFor(strict), "broker.example"); err == nil {
		t.Fatal("hostname verification off still checks the chain: another CA's leader was trusted")
	}
}
