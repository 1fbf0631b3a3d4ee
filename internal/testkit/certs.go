package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test: it issues server and
// client certificates for 127.0.0.1 and writes them as PEM files, the
// formats ringlog's ssl.* settings read.
type CA struct {
	t    testing.TB
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertFile is the CA certificate in PEM (a truststore).
	CertFile string
	PEM      []byte
}

// NewCA makes a CA named cn, its certificate written under t.TempDir().
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{t: t, Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	ca.CertFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca.CertFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}

// Issued is a certificate and its key.
type Issued struct {
	// File holds the private key then the certificate, in PEM: a
	// keystore (ssl.keystore.location).
	File    string
	KeyPEM  []byte
	CertPEM []byte
	TLS     tls.Certificate
}

// Issue makes a certificate for subject (valid for 127.0.0.1 and
// localhost, as a server or a client) signed by the CA.
func (ca *CA) Issue(subject pkix.Name) *Issued {
	t := ca.t
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	is := &Issued{
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}
	if is.TLS, err = tls.X509KeyPair(is.CertPEM, is.KeyPEM); err != nil {
		t.Fatal(err)
	}
	is.File = filepath.Join(t.TempDir(), "keystore.pem")
	if err := os.WriteFile(is.File, append(append([]byte{}, is.KeyPEM...), is.CertPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	return is
}

// ClientTLS is a client configuration that trusts the CA, presenting
// cert when it is not nil.
func (ca *CA) ClientTLS(cert *Issued) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	c := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if cert != nil {
		c.Certificates = []tls.Certificate{cert.TLS}
	}
	return c
}
