// Package pki makes a small certificate authority and the certificates it
// signs, in the PEM forms ringlog's ssl.* settings read: the benchmark
// suite's SASL_SSL peer and the tests make their TLS material with it, at
// run time, so that none is committed. ECDSA P-256 keys; a certificate is
// good for 127.0.0.1 and localhost, as a server and as a client.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	// PEM is the CA certificate in PEM: a truststore.
	PEM []byte
	key *ecdsa.PrivateKey
}

// NewCA makes a CA named cn, valid from an hour ago for validity.
func NewCA(cn string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issued is a certificate and its private key.
type Issued struct {
	KeyPEM  []byte // PKCS#8, unencrypted
	CertPEM []byte
	TLS     tls.Certificate
}

// Keystore is the key then the certificate, one PEM file: what
// ssl.keystore.location reads.
func (is *Issued) Keystore() []byte {
	return append(append([]byte{}, is.KeyPEM...), is.CertPEM...)
}

// Issue signs a certificate for subject, valid for 127.0.0.1 and localhost
// as a server and a client, from an hour ago for validity.
func (ca *CA) Issue(subject pkix.Name, validity time.Duration) (*Issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: subject,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		// Clients that check the broker's name (librdkafka does by
		// default) dial 127.0.0.1 or localhost.
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("pki: certificate of %s: %w", subject, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	is := &Issued{
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}
	if is.TLS, err = tls.X509KeyPair(is.CertPEM, is.KeyPEM); err != nil {
		return nil, err
	}
	return is, nil
}
