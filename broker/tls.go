package broker

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"os"
	"ringlog/replication/controller"
	"slices"
	"strings"
	"sync"
	"time"
)

// TLSSettings are a listener's ssl.* settings by Kafka's names (the
// listener.name.<name>. prefix removed). Only the PEM formats are read:
// ssl.keystore.type and ssl.truststore.type must be PEM (Kafka's JKS and
// PKCS12 stores can be turned into PEM with keytool and openssl).
type TLSSettings map[string]string

// reloadCheckInterval is how often certificate files are looked at for a
// change: a rotated certificate serves new handshakes within it.
const reloadCheckInterval = time.Second

// TLSConfig builds a listener's server TLS configuration from its ssl.*
// settings:
//   - ssl.keystore.location, a PEM file holding the private key and the
//     certificate chain, or ssl.keystore.key and
//     ssl.keystore.certificate.chain inline;
//   - ssl.truststore.location (a PEM file of CA certificates) or
//     ssl.truststore.certificates inline: the CAs client certificates
//     are checked against;
//   - ssl.client.auth: required, requested or none (Kafka's default);
//   - ssl.enabled.protocols: TLSv1.2 and TLSv1.3 (both by default);
//   - ssl.cipher.suites: IANA names, for TLS 1.2 (TLS 1.3's are fixed).
//
// Files named by location are read again when they change, checked at
// most once a second, so that a rotated certificate or CA takes effect
// without a restart; a file that fails to load keeps the last good one
// (the error goes to logf). An encrypted private key (ssl.key.password)
// is refused: Go's standard library does not decrypt PKCS#8.
func TLSConfig(s TLSSettings, logf func(msg string, args ...any)) (*tls.Config, error) {
	for k := range s {
		if !knownSSL[k] {
			return nil, fmt.Errorf("%s: not a TLS setting ringlog reads (%s)", k, strings.Join(sortedKeys(knownSSL), ", "))
		}
	}
	for _, k := range []string{"ssl.keystore.type", "ssl.truststore.type"} {
		if v, ok := s[k]; ok && !strings.EqualFold(v, "PEM") {
			return nil, fmt.Errorf("%s=%s: only PEM is read (convert the store with keytool -importkeystore and openssl)", k, v)
		}
	}
	if s["ssl.key.password"] != "" || s["ssl.keystore.password"] != "" {
		return nil, errors.New("ssl.key.password: encrypted private keys are not read; store the key unencrypted, readable by the broker only (0600)")
	}
	ks := newKeystore(s)
	if err := ks.load(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13}
	if v, ok := s["ssl.enabled.protocols"]; ok {
		cfg.MinVersion, cfg.MaxVersion = 0, 0
		for _, p := range strings.Split(v, ",") {
			var ver uint16
			switch strings.TrimSpace(p) {
			case "TLSv1.2":
				ver = tls.VersionTLS12
			case "TLSv1.3":
				ver = tls.VersionTLS13
			default:
				return nil, fmt.Errorf("ssl.enabled.protocols: %q (TLSv1.2 and TLSv1.3 are served)", p)
			}
			if cfg.MinVersion == 0 || ver < cfg.MinVersion {
				cfg.MinVersion = ver
			}
			cfg.MaxVersion = max(cfg.MaxVersion, ver)
		}
	}
	if v, ok := s["ssl.cipher.suites"]; ok && v != "" {
		byName := map[string]uint16{}
		for _, c := range tls.CipherSuites() {
			byName[c.Name] = c.ID
		}
		for _, n := range strings.Split(v, ",") {
			id, ok := byName[strings.TrimSpace(n)]
			if !ok {
				return nil, fmt.Errorf("ssl.cipher.suites: %q is not a secure suite Go offers", n)
			}
			cfg.CipherSuites = append(cfg.CipherSuites, id)
		}
	}
	switch auth := s["ssl.client.auth"]; auth {
	case "", "none":
		cfg.ClientAuth = tls.NoClientCert
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("ssl.client.auth=%s: want required, requested or none", auth)
	}
	if cfg.ClientAuth != tls.NoClientCert && ks.pool == nil {
		return nil, fmt.Errorf("ssl.client.auth=%s needs a truststore (ssl.truststore.location or ssl.truststore.certificates)", s["ssl.client.auth"])
	}
	base := cfg.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cert, pool := ks.current(logf)
		c := base.Clone()
		c.Certificates, c.ClientCAs = []tls.Certificate{cert}, pool
		return c, nil
	}
	return cfg, nil
}

var knownSSL = map[string]bool{
	"ssl.keystore.type": true, "ssl.keystore.location": true, "ssl.keystore.key": true,
	"ssl.keystore.certificate.chain": true, "ssl.key.password": true, "ssl.keystore.password": true,
	"ssl.truststore.type": true, "ssl.truststore.location": true, "ssl.truststore.certificates": true,
	"ssl.truststore.password": true, "ssl.client.auth": true, "ssl.enabled.protocols": true, "ssl.protocol": true,
	"ssl.cipher.suites": true, "ssl.principal.mapping.rules": true, "ssl.endpoint.identification.algorithm": true,
}

// keystore holds a listener's certificate and CA pool, reloaded when the
// files they came from change.
type keystore struct {
	settings TLSSettings

	mu      sync.Mutex
	cert    tls.Certificate
	pool    *x509.CertPool
	mtimes  [2]time.Time // keystore, truststore files
	checked time.Time
}

func (ks *keystore) load() error {
	s := ks.settings
	var keyPEM, certPEM []byte
	var ksTime, tsTime time.Time
	switch loc := s["ssl.keystore.location"]; {
	case loc != "":
		b, err := os.ReadFile(loc)
		if err != nil {
			return fmt.Errorf("ssl.keystore.location: %w", err)
		}
		keyPEM, certPEM, ksTime = b, b, mtime(loc)
	case s["ssl.keystore.key"] != "" && s["ssl.keystore.certificate.chain"] != "":
		keyPEM, certPEM = []byte(s["ssl.keystore.key"]), []byte(s["ssl.keystore.certificate.chain"])
	default:
		return errors.New("no keystore: set ssl.keystore.location (a PEM file of the private key and certificate chain), or ssl.keystore.key and ssl.keystore.certificate.chain")
	}
	if blocks := pemTypes(keyPEM); strings.Contains(blocks, "ENCRYPTED") {
		return errors.New("ssl.keystore: the private key is encrypted; store it unencrypted, readable by the broker only")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("ssl.keystore: %w", err)
	}
	var pool *x509.CertPool
	var caPEM []byte
	switch loc := s["ssl.truststore.location"]; {
	case loc != "":
		if caPEM, err = os.ReadFile(loc); err != nil {
			return fmt.Errorf("ssl.truststore.location: %w", err)
		}
		tsTime = mtime(loc)
	case s["ssl.truststore.certificates"] != "":
		caPEM = []byte(s["ssl.truststore.certificates"])
	}
	if caPEM != nil {
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return errors.New("ssl.truststore: no PEM certificate in it")
		}
	}
	ks.mu.Lock()
	ks.cert, ks.pool, ks.mtimes = cert, pool, [2]time.Time{ksTime, tsTime}
	ks.mu.Unlock()
	return nil
}

// current returns the certificate and pool, reloading them first when a
// file changed since the last look (at most once a second).
func (ks *keystore) current(logf func(string, ...any)) (tls.Certificate, *x509.CertPool) {
	ks.mu.Lock()
	now := time.Now()
	stale := false
	if now.Sub(ks.checked) >= reloadCheckInterval {
		ks.checked = now
		for i, k := range []string{"ssl.keystore.location", "ssl.truststore.location"} {
			if loc := ks.settings[k]; loc != "" && !mtime(loc).Equal(ks.mtimes[i]) {
				stale = true
			}
		}
	}
	ks.mu.Unlock()
	if stale {
		if err := ks.load(); err != nil && logf != nil {
			logf("broker: reloading TLS files failed; serving the last good ones", "err", err)
		}
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.cert, ks.pool
}

func mtime(path string) time.Time {
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// pemTypes lists the PEM block types in b, for error messages.
func pemTypes(b []byte) string {
	var types []string
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return strings.Join(types, ",")
		}
		types = append(types, blk.Type)
		if _, ok := blk.Headers["Proc-Type"]; ok {
			types = append(types, "ENCRYPTED")
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	return slices.Sorted(maps.Keys(m))
}

// ControllerTLS builds the controller port's mutual TLS from the
// controller listener's ssl.* settings: client certificates are required
// whatever ssl.client.auth says, and the node dials its peers with its own
// certificate and the truststore's CAs, both reloaded with their files. Each node's certificate must be CN=node-<id>
// (controller.NodeCertName).
func ControllerTLS(s TLSSettings, logf func(msg string, args ...any)) (*controller.TLSConfig, error) {
	s = maps.Clone(s)
	if a := s["ssl.client.auth"]; a != "" && a != "required" {
		return nil, fmt.Errorf("ssl.client.auth=%s: the controller listener requires client certificates", a)
	}
	s["ssl.client.auth"] = "required"
	server, err := TLSConfig(s, logf)
	if err != nil {
		return nil, err
	}
	client, forHost, err := clientTLS(s, server, true, logf)
	if err != nil {
		return nil, err
	}
	return &controller.TLSConfig{Server: server, Client: client, ClientFor: forHost}, nil
}

// clientTLS is the client side of a broker's own connections (to the
// controller port, to a leader): the keystore's certificate, presented
// when asked and reloaded with its file; the truststore's CAs (the
// system's when it has none); server's versions and suites. The config
// returned checks the peer as Go does, against the CAs read now (the name
// too unless checkName is off); the function gives one connection's
// config for the host dialled, which checks the chain against the CAs of
// the moment, reloaded when the truststore file changes, so that a CA
// rotated on disk is trusted without a restart. The broker dials with the
// function (clientTLSFor finds it for the config).
func clientTLS(s TLSSettings, server *tls.Config, checkName bool, logf func(msg string, args ...any)) (*tls.Config, func(host string) *tls.Config, error) {
	ks := newKeystore(s)
	if err := ks.load(); err != nil {
		return nil, nil, err
	}
	_, pool := ks.current(logf)
	verify := func(name string) func(tls.ConnectionState) error {
		return func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("broker: the peer presented no certificate")
			}
			_, pool := ks.current(logf)
			opts := x509.VerifyOptions{Roots: pool, DNSName: name, Intermediates: x509.NewCertPool(),
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	base := &tls.Config{MinVersion: server.MinVersion, MaxVersion: server.MaxVersion, CipherSuites: server.CipherSuites, RootCAs: pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := ks.current(logf)
			return &cert, nil
		}}
	if !checkName {
		// Kafka's ssl.endpoint.identification.algorithm= (empty): the
		// chain is still checked.
		base.InsecureSkipVerify, base.VerifyConnection = true, verify("")
	}
	forHost := func(host string) *tls.Config {
		c := base.Clone()
		c.ServerName = host
		if checkName {
			// Go's own check would read RootCAs, fixed at the start.
			c.InsecureSkipVerify, c.VerifyConnection = true, verify(host)
		}
		return c
	}
	clientTLSFuncs.Store(base, forHost)
	return base, forHost, nil
}

// clientTLSFuncs maps the configs clientTLS returned to their per-host
// functions (a few per process).
var clientTLSFuncs sync.Map

// clientTLSFor returns the per-host function of a config clientTLS made,
// nil for another.
func clientTLSFor(c *tls.Config) func(host string) *tls.Config {
	if f, ok := clientTLSFuncs.Load(c); ok {
		return f.(func(string) *tls.Config)
	}
	return nil
}
