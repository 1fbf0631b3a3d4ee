package testkit

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"testing"
	"time"

	"ringlog/internal/pki"
)

// CA is a certificate authority made for one test (internal/pki), its
// certificate written under t.TempDir().
type CA struct {
	t testing.TB
	*pki.CA
	// CertFile is the CA certificate in PEM (a truststore).
	CertFile string
}

// NewCA makes a CA named cn for the test.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	ca, err := pki.NewCA(cn, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := &CA{t: t, CA: ca, CertFile: filepath.Join(t.TempDir(), "ca.pem")}
	if err := os.WriteFile(c.CertFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// Issued is a certificate, its key, and its keystore file.
type Issued struct {
	*pki.Issued
	// File holds the private key then the certificate, in PEM: a
	// keystore (ssl.keystore.location).
	File string
}

// Issue makes a certificate for subject (127.0.0.1 and localhost, server
// and client) signed by the CA.
func (ca *CA) Issue(subject pkix.Name) *Issued {
	t := ca.t
	t.Helper()
	is, err := ca.CA.Issue(subject, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	out := &Issued{Issued: is, File: filepath.Join(t.TempDir(), "keystore.pem")}
	if err := os.WriteFile(out.File, is.Keystore(), 0o600); err != nil {
		t.Fatal(err)
	}
	return out
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
