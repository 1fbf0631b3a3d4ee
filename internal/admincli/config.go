package admincli

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// ErrConfig is returned, wrapped, for a --command-config file that names
// a key this command does not know or a value it cannot honour.
var ErrConfig = errors.New("admincli: command config")

// knownKeys are the Kafka client properties --command-config understands;
// anything else is refused by name rather than ignored, so that a setting
// the operator relies on (a keystore password, a JKS store) never silently
// does nothing.
var knownKeys = map[string]bool{
	"security.protocol":                     true,
	"ssl.truststore.location":               true,
	"ssl.truststore.type":                   true,
	"ssl.keystore.location":                 true,
	"ssl.keystore.type":                     true,
	"ssl.endpoint.identification.algorithm": true,
	"sasl.mechanism":                        true,
	"sasl.jaas.config":                      true,
	"client.id":                             true,
}

// ReadProperties is readProperties, for `ringlog mirror`'s -source-config
// and -target-config.
func ReadProperties(path string) (map[string]string, error) { return readProperties(path) }

// readProperties reads a Java properties file: key=value, key:value or
// key value lines, # and ! comments, a trailing backslash continuing the
// line (sasl.jaas.config is often written over several lines).
func readProperties(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--command-config: %w", err)
	}
	defer f.Close()
	props := make(map[string]string)
	sc := bufio.NewScanner(f)
	var logical string
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if logical == "" && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if strings.HasSuffix(line, `\`) && !strings.HasSuffix(line, `\\`) {
			logical += strings.TrimSuffix(line, `\`)
			continue
		}
		logical += line
		i := strings.IndexAny(logical, "=: \t")
		if i < 0 {
			props[logical] = ""
		} else {
			key := logical[:i]
			val := strings.TrimLeft(logical[i:], " \t")
			if val != "" && (val[0] == '=' || val[0] == ':') {
				val = strings.TrimLeft(val[1:], " \t")
			}
			props[key] = strings.TrimRight(val, " \t")
		}
		logical = ""
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", path, err)
	}
	return props, nil
}

// securityOptions turns Kafka client properties into franz-go options:
// TLS for SSL and SASL_SSL (PEM trust and key stores, as docs/security.md
// configures clients), PLAIN or SCRAM for the SASL protocols with the
// username and password of sasl.jaas.config.
// SecurityOptions are kgo's options for Kafka client properties (the
// keys knownKeys lists): `ringlog mirror` reads each cluster's with it.
func SecurityOptions(props map[string]string) ([]kgo.Opt, error) { return securityOptions(props) }

func securityOptions(props map[string]string) ([]kgo.Opt, error) {
	var unknown []string
	for k := range props {
		if !knownKeys[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("%w: unsupported keys %s (supported: security.protocol, ssl.truststore.location, ssl.truststore.type=PEM, "+
			"ssl.keystore.location, ssl.keystore.type=PEM, ssl.endpoint.identification.algorithm, sasl.mechanism, sasl.jaas.config, client.id)",
			ErrConfig, strings.Join(unknown, ", "))
	}
	for _, k := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
		if v, ok := props[k]; ok && !strings.EqualFold(v, "PEM") {
			return nil, fmt.Errorf("%w: %s=%s: only PEM stores are read", ErrConfig, k, v)
		}
	}
	protocol := strings.ToUpper(props["security.protocol"])
	if protocol == "" {
		protocol = "PLAINTEXT"
	}
	var useTLS, useSASL bool
	switch protocol {
	case "PLAINTEXT":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		return nil, fmt.Errorf("%w: security.protocol=%s: not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", ErrConfig, props["security.protocol"])
	}
	if !useTLS {
		for _, k := range []string{"ssl.truststore.location", "ssl.keystore.location", "ssl.endpoint.identification.algorithm"} {
			if _, ok := props[k]; ok {
				return nil, fmt.Errorf("%w: %s is set but security.protocol=%s uses no TLS", ErrConfig, k, protocol)
			}
		}
	}
	if !useSASL {
		for _, k := range []string{"sasl.mechanism", "sasl.jaas.config"} {
			if _, ok := props[k]; ok {
				return nil, fmt.Errorf("%w: %s is set but security.protocol=%s uses no SASL", ErrConfig, k, protocol)
			}
		}
	}
	var opts []kgo.Opt
	if id := props["client.id"]; id != "" {
		opts = append(opts, kgo.ClientID(id))
	}
	if useTLS {
		cfg, err := tlsConfig(props)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if useSASL {
		opt, err := saslOption(props)
		if err != nil {
			return nil, err
		}
		opts = append(opts, opt)
	}
	return opts, nil
}

func tlsConfig(props map[string]string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if path := props["ssl.truststore.location"]; path != "" {
		pemBytes, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: ssl.truststore.location: %w", ErrConfig, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("%w: ssl.truststore.location %s holds no PEM certificate", ErrConfig, path)
		}
		cfg.RootCAs = pool
	}
	if path := props["ssl.keystore.location"]; path != "" {
		// Kafka's PEM keystore: the private key and the certificate
		// chain in one file; X509KeyPair picks each kind of block.
		pemBytes, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: ssl.keystore.location: %w", ErrConfig, err)
		}
		cert, err := tls.X509KeyPair(pemBytes, pemBytes)
		if err != nil {
			return nil, fmt.Errorf("%w: ssl.keystore.location %s: %w (an unencrypted PEM key and its certificate chain are needed)", ErrConfig, path, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	switch alg, set := props["ssl.endpoint.identification.algorithm"]; {
	case !set || strings.EqualFold(alg, "https"):
		// Kafka's default: the broker's certificate must name the host.
	case alg == "":
		// The chain is still verified against the trust store; only the
		// host name check is dropped, as Kafka does for "".
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: the broker sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	default:
		return nil, fmt.Errorf("%w: ssl.endpoint.identification.algorithm=%s: only https or empty", ErrConfig, alg)
	}
	return cfg, nil
}

// jaasOption matches one key="value" option of a JAAS login module line.
var jaasOption = regexp.MustCompile(`(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"`)

func saslOption(props map[string]string) (kgo.Opt, error) {
	mech := strings.ToUpper(props["sasl.mechanism"])
	if mech == "" {
		mech = "GSSAPI" // Kafka's default, which is not offered here
	}
	jaas := strings.TrimSpace(props["sasl.jaas.config"])
	if jaas == "" {
		return nil, fmt.Errorf("%w: sasl.jaas.config is needed (a username and password)", ErrConfig)
	}
	module, _, _ := strings.Cut(jaas, " ")
	opts := make(map[string]string)
	for _, m := range jaasOption.FindAllStringSubmatch(jaas, -1) {
		opts[m[1]] = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(m[2])
	}
	user, pass := opts["username"], opts["password"]
	if user == "" {
		return nil, fmt.Errorf("%w: sasl.jaas.config has no username=\"...\"", ErrConfig)
	}
	var wantModule string
	var opt kgo.Opt
	switch mech {
	case "PLAIN":
		wantModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
		opt = kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())
	case "SCRAM-SHA-256":
		wantModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
		opt = kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism())
	case "SCRAM-SHA-512":
		wantModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
		opt = kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())
	default:
		return nil, fmt.Errorf("%w: sasl.mechanism=%s: only PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", ErrConfig, mech)
	}
	if module != wantModule {
		return nil, fmt.Errorf("%w: sasl.jaas.config names %s, sasl.mechanism=%s needs %s", ErrConfig, module, mech, wantModule)
	}
	return opt, nil
}
