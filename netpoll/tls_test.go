package netpoll

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"ringlog/internal/testkit"
)

// testPKI is a certificate authority with a server certificate for
// 127.0.0.1 and a client certificate it signed, and a client certificate
// it did not sign (rogue).
type testPKI struct {
	roots          *x509.CertPool
	server, client tls.Certificate
	rogue          tls.Certificate
}

func newPKI(t testing.TB) *testPKI {
	t.Helper()
	caKey, caCert := selfSigned(t, "test CA")
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	rogueKey, rogueCert := selfSigned(t, "rogue")
	return &testPKI{
		roots:  roots,
		server: leaf(t, caKey, caCert, "server", x509.ExtKeyUsageServerAuth),
		client: leaf(t, caKey, caCert, "client-1", x509.ExtKeyUsageClientAuth),
		rogue:  tls.Certificate{Certificate: [][]byte{rogueCert.Raw}, PrivateKey: rogueKey},
	}
}

var serial int64

func template(cn string) *x509.Certificate {
	serial++
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
}

func selfSigned(t testing.TB, cn string) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := template(cn)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert
}

func leaf(t testing.TB, caKey *ecdsa.PrivateKey, ca *x509.Certificate, cn string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := template(cn)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serverTLS is the server's configuration: mutual TLS, as a Kafka SSL
// listener with ssl.client.auth=required.
func (p *testPKI) serverTLS() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.server},
		ClientCAs:    p.roots,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}
}

// tlsClient speaks the framing over TLS.
type tlsClient struct {
	t  testing.TB
	tc *tls.Conn
	br *bufio.Reader
}

func dialTLS(t testing.TB, s *Server, p *testPKI, cert tls.Certificate) (*tlsClient, error) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", s.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	remember(nc)
	t.Cleanup(func() { _ = nc.Close() })
	tc := tls.Client(nc, &tls.Config{RootCAs: p.roots, ServerName: "127.0.0.1",
		// Present cert whatever the server says it accepts: given in
		// Certificates, a certificate the server's CAs did not sign
		// would not be sent at all.
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }})
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	err = tc.Handshake()
	_ = tc.SetDeadline(time.Time{})
	return &tlsClient{t: t, tc: tc, br: bufio.NewReaderSize(tc, 256<<10)}, err
}

func (c *tlsClient) roundTrip(body []byte) ([]byte, error) {
	_ = c.tc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.tc.Write(frame(body)); err != nil {
		return nil, err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	_, err := io.ReadFull(c.br, b)
	return b, err
}

// A TLS server serves on the portable path whatever Config.Portable says;
// frames, file regions (copied through TLS: sendfile would send them in
// the clear) and the client's identity (Conn.TLS) all arrive.
func TestTLS(t *testing.T) {
	pki := newPKI(t)
	f, data := testFile(t, 4<<20)
	h := newTestHandler(t, f)
	s := serve(t, IOGnet, Config{TLS: pki.serverTLS()}, h)
	if s.IO() != "portable" {
		t.Fatalf("a TLS server serves on %q", s.IO())
	}
	c, err := dialTLS(t, s, pki, pki.client)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.roundTrip([]byte{cmdWho}); err != nil || string(got) != "client-1" {
		t.Fatalf("Conn.TLS's peer: %q, %v", got, err)
	}
	for i := range 20 {
		msg := bytes.Repeat([]byte{byte('a' + i)}, 1+i*1000)
		if got, err := c.roundTrip(echoReq(string(msg))); err != nil || !bytes.Equal(got[1:], msg) {
			t.Fatalf("echo %d: %d bytes, %v", i, len(got), err)
		}
	}
	var regionBytes int64
	for _, n := range []int64{1, 100 << 10, 3 << 20} {
		pos := int64(len(data)) - n - 7
		got, err := c.roundTrip(fileReq(cmdMixed, pos, n))
		if err != nil {
			t.Fatal(err)
		}
		want := append(append(append([]byte("A"), data[pos:pos+n]...), 'B'), data[pos:pos+n]...)
		if !bytes.Equal(got, want) {
			t.Fatalf("region of %d: %d bytes, equal prefix %d", n, len(got), commonPrefix(got, want))
		}
		regionBytes += 2 * n
	}
	testkit.WaitFor(t, 5*time.Second, "the region counters", func() bool { return s.Stats().CopiedBytes == regionBytes })
	if st := s.Stats(); st.SendfileBytes != 0 {
		t.Fatalf("%d region bytes sent by sendfile on a TLS connection", st.SendfileBytes)
	}

	// A plaintext connection to a plaintext server has no TLS state.
	plain := serve(t, IOGnet, Config{}, h)
	pc := dial(t, plain)
	pc.send([]byte{cmdWho})
	if got := string(pc.recv()); got != "-" {
		t.Fatalf("Conn.TLS on a plaintext connection: %q", got)
	}
}

// With ssl.client.auth=required, a client whose certificate the server's
// CA did not sign, or a client without one, is refused before anything is
// served; a good client is served meanwhile.
func TestTLSBadClientCertificate(t *testing.T) {
	pki := newPKI(t)
	h := newTestHandler(t, nil)
	s := serve(t, IOGnet, Config{TLS: pki.serverTLS()}, h)
	for _, cert := range []tls.Certificate{pki.rogue, {}} {
		c, err := dialTLS(t, s, pki, cert)
		if err == nil {
			// TLS 1.3: the client finishes before the server has checked
			// its certificate; the refusal comes with the next read.
			var got []byte
			got, err = c.roundTrip(echoReq("let me in"))
			if err == nil {
				t.Fatalf("a client with a bad certificate was served: %q", got)
			}
		}
		t.Logf("refused: %v", err)
	}
	good, err := dialTLS(t, s, pki, pki.client)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := good.roundTrip(echoReq("hello")); err != nil || string(got) != "ehello" {
		t.Fatalf("good client: %q, %v", got, err)
	}
	testkit.WaitFor(t, 5*time.Second, "both refusals counted", func() bool { return s.Stats().HandshakeFailures == 2 })
	if n := h.served.Load(); n != 1 {
		t.Fatalf("%d requests served, want the good client's 1", n)
	}
}

// A client that connects and never starts its handshake is closed after
// HandshakeTimeout; it holds neither the accept loop nor anyone else.
func TestTLSHandshakeTimeout(t *testing.T) {
	pki := newPKI(t)
	h := newTestHandler(t, nil)
	s := serve(t, IOGnet, Config{TLS: pki.serverTLS(), HandshakeTimeout: 300 * time.Millisecond, IdleTimeout: -1}, h)
	silent := dial(t, s)
	good, err := dialTLS(t, s, pki, pki.client)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := good.roundTrip(echoReq("served")); err != nil || string(got) != "eserved" {
		t.Fatalf("good client: %q, %v", got, err)
	}
	silent.expectClosed(5 * time.Second)
	if st := s.Stats(); st.HandshakeFailures != 1 {
		t.Fatalf("stats %+v", st)
	}
	if got, err := good.roundTrip(echoReq("still")); err != nil || string(got) != "estill" {
		t.Fatalf("good client after the timeout: %q, %v", got, err)
	}
}
