package broker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"

	fsasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"ringlog/internal/sasl"
	"ringlog/kafka"
	"ringlog/replication/fetcher"
)

// The inter-broker listener, as Kafka has it: inter.broker.listener.name
// names one of the listeners, with any security protocol; the broker is a
// server there (the listener's ssl.* and SASL settings) and a client of the
// other brokers' (its followers' fetch connections), with the same
// listener's keystore and truststore for TLS and, for SASL,
// sasl.mechanism.inter.broker.protocol with the username and password of
// the listener's JAAS entry for that mechanism.

// InterBrokerClient is this broker as a client of the other brokers'
// inter-broker listeners.
type InterBrokerClient struct {
	// TLS is the client side of an SSL or SASL_SSL listener
	// (InterBrokerTLS builds it from the listener's ssl.* settings).
	TLS *tls.Config
	// Mechanism is sasl.mechanism.inter.broker.protocol (PLAIN,
	// SCRAM-SHA-256 or SCRAM-SHA-512); Username and Password are the
	// username and password options of the listener's JAAS entry for it.
	Mechanism string
	Username  string
	Password  string
}

// interBrokerListener is the inter-broker listener's security settings
// with its name (the protocol PLAINTEXT when Config leaves it empty).
func (c *Config) interBrokerListener() Listener {
	l := c.InterBroker
	l.Name = c.interBroker()
	if l.Protocol == "" {
		l.Protocol = kafka.Plaintext
	}
	return l
}

// validateInterBroker checks the inter-broker listener, this broker's
// client side of it, and that the principal this broker will have on the
// others' listeners is one they let fetch as a replica: otherwise every
// follower of this broker would be refused, a cluster that starts and
// never replicates (Kafka lets it start; ringlog says why at once).
func (c *Config) validateInterBroker() error {
	l := c.interBrokerListener()
	if err := l.validate(); err != nil {
		return err
	}
	cl := c.InterBrokerClient
	name := l.Name
	if l.Protocol.TLS() != (cl.TLS != nil) {
		if cl.TLS == nil {
			return fmt.Errorf("broker: the inter-broker listener %s is %s: this broker needs a TLS client configuration for it (its ssl.keystore and ssl.truststore settings)", name, l.Protocol)
		}
		return fmt.Errorf("broker: the inter-broker listener %s is %s: the TLS client configuration would go unused", name, l.Protocol)
	}
	if !l.Protocol.SASL() && (cl.Mechanism != "" || cl.Username != "" || cl.Password != "") {
		return fmt.Errorf("broker: the inter-broker listener %s is %s: the inter-broker SASL credentials would go unused", name, l.Protocol)
	}
	var own string // this broker's principal on the others' listeners
	switch l.Protocol {
	case kafka.Plaintext:
		return nil // a trusted network: every client fetches as a replica
	case kafka.SSL:
		if l.TLS.ClientAuth == tls.NoClientCert {
			return fmt.Errorf("broker: the inter-broker listener %s is SSL without client certificates: brokers would be User:ANONYMOUS, as every client; set listener.name.%s.ssl.client.auth=required and name the brokers' certificate principals in super.users", name, lowerName(name))
		}
		p, err := certPrincipal(cl.TLS, l.PrincipalRules)
		if err != nil {
			return fmt.Errorf("broker: the inter-broker listener %s: %w", name, err)
		}
		own = p
	default:
		switch cl.Mechanism {
		case sasl.Plain, sasl.ScramSHA256, sasl.ScramSHA512:
		case "":
			return fmt.Errorf("broker: the inter-broker listener %s is %s: set sasl.mechanism.inter.broker.protocol (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", name, l.Protocol)
		default:
			return fmt.Errorf("broker: sasl.mechanism.inter.broker.protocol=%s: brokers authenticate to each other with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", cl.Mechanism)
		}
		if !slices.Contains(l.Mechanisms, cl.Mechanism) {
			return fmt.Errorf("broker: sasl.mechanism.inter.broker.protocol=%s is not enabled on the inter-broker listener %s (sasl.enabled.mechanisms=%s)", cl.Mechanism, name, strings.Join(l.Mechanisms, ","))
		}
		if cl.Username == "" || cl.Password == "" {
			return fmt.Errorf("broker: the inter-broker listener %s is %s: set username and password in listener.name.%s.%s.sasl.jaas.config, the credentials this broker authenticates with to the others", name, l.Protocol, lowerName(name), lowerName(cl.Mechanism))
		}
		if cl.Mechanism == sasl.Plain {
			// PLAIN's users are the listener's own JAAS entries: a broker
			// whose username is not among them could never log in.
			if pw, ok := l.PlainUsers[cl.Username]; !ok || pw != cl.Password {
				return fmt.Errorf("broker: the inter-broker listener %s: its PLAIN users have no user_%s with this broker's password (listener.name.%s.plain.sasl.jaas.config)", name, cl.Username, lowerName(name))
			}
		}
		own = "User:" + cl.Username
	}
	if !slices.Contains(c.SuperUsers, own) {
		return fmt.Errorf("broker: this broker is %s on the inter-broker listener %s, which super.users does not name (%q): the other brokers would refuse its replica fetches; add it to super.users", own, name, strings.Join(c.SuperUsers, ";"))
	}
	return nil
}

// certPrincipal is the principal a listener with rules gives the client
// certificate of tc.
func certPrincipal(tc *tls.Config, rules []kafka.PrincipalRule) (string, error) {
	var cert *tls.Certificate
	switch {
	case tc.GetClientCertificate != nil:
		c, err := tc.GetClientCertificate(&tls.CertificateRequestInfo{})
		if err != nil {
			return "", err
		}
		cert = c
	case len(tc.Certificates) > 0:
		cert = &tc.Certificates[0]
	}
	if cert == nil || len(cert.Certificate) == 0 {
		return "", errors.New("no client certificate: brokers present their keystore's certificate (ssl.keystore.location)")
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return "", fmt.Errorf("the keystore's certificate: %w", err)
	}
	return kafka.CertPrincipal(leaf, rules), nil
}

// InterBrokerTLS builds the client side of an SSL or SASL_SSL inter-broker
// listener from the listener's ssl.* settings, as Kafka's brokers do: the
// keystore's certificate is presented when a leader asks for one, the
// truststore's CAs are trusted (the system's when it has none), both
// reloaded when their files change (when the broker dials with it:
// clientTLS), and the leader's certificate must name
// the host it is dialled at unless ssl.endpoint.identification.algorithm
// is empty (the chain is still checked against the truststore).
func InterBrokerTLS(s TLSSettings, logf func(msg string, args ...any)) (*tls.Config, error) {
	server, err := TLSConfig(s, logf)
	if err != nil {
		return nil, err
	}
	checkName := true
	switch alg, set := s["ssl.endpoint.identification.algorithm"]; {
	case !set || strings.EqualFold(alg, "https"):
	case alg == "":
		checkName = false
	default:
		return nil, fmt.Errorf("ssl.endpoint.identification.algorithm=%s: want https or empty", alg)
	}
	client, _, err := clientTLS(s, server, checkName, logf)
	return client, err
}

// fetchSecurity sets the follower's fetch connections' TLS and SASL
// mechanism from the broker's client side of the inter-broker listener.
func (c *Config) fetchSecurity(fc *fetcher.Config) {
	cl := c.InterBrokerClient
	fc.TLS, fc.TLSFor = cl.TLS, clientTLSFor(cl.TLS)
	var m fsasl.Mechanism
	switch cl.Mechanism {
	case sasl.Plain:
		m = plain.Auth{User: cl.Username, Pass: cl.Password}.AsMechanism()
	case sasl.ScramSHA256:
		m = scram.Auth{User: cl.Username, Pass: cl.Password}.AsSha256Mechanism()
	case sasl.ScramSHA512:
		m = scram.Auth{User: cl.Username, Pass: cl.Password}.AsSha512Mechanism()
	}
	if c.interBrokerListener().Protocol.SASL() {
		fc.SASL = m
	}
}
