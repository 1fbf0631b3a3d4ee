package broker

import (
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"ringlog/internal/sasl"
	"ringlog/kafka"
	"ringlog/netpoll"
)

// Listener is one of the broker's listeners besides the inter-broker one
// (Config.Listen): Kafka's listeners, advertised.listeners,
// listener.security.protocol.map and the listener.name.<name>.* settings
// of one name.
type Listener struct {
	// Name is the listener's name; Protocol its security protocol.
	Name     string
	Protocol kafka.SecurityProtocol
	// Addr is the host:port to bind (port 0: a free port); Advertise the
	// host:port clients are told (empty: Addr's host and the bound port).
	Addr      string
	Advertise string
	// TLS serves the listener over TLS: required for SSL and SASL_SSL,
	// refused for the others (see TLSConfig).
	TLS *tls.Config
	// Mechanisms is sasl.enabled.mechanisms (SASL protocols only).
	Mechanisms []string
	// PlainUsers are PLAIN's users (the listener's JAAS configuration).
	PlainUsers sasl.PlainUsers
	// OAuth is how OAUTHBEARER tokens are validated: the sasl.oauthbearer.*
	// settings and the listener's OAuthBearerLoginModule JAAS options.
	// Its zero value is Kafka's default, the unsecured validator.
	OAuth sasl.OAuthConfig
	// ReauthMax is connections.max.reauth.ms (0: never).
	ReauthMax time.Duration
	// MaxReceiveBytes is sasl.server.max.receive.size (0: 512 KiB).
	MaxReceiveBytes int32
	// AuthTimeout bounds a SASL client's time to authenticate
	// (ringlog.sasl.authentication.timeout.ms; 0: 30 s).
	AuthTimeout time.Duration
	// PrincipalRules is ssl.principal.mapping.rules: how an SSL client
	// certificate's subject becomes its principal (nil: DEFAULT).
	PrincipalRules []kafka.PrincipalRule
}

// interBrokerName is the inter-broker listener's name when Config leaves
// it empty: Kafka's default security.inter.broker.protocol, PLAINTEXT.
const interBrokerName = "PLAINTEXT"

// validateListeners checks the listeners together: unique names,
// protocols that can be honoured with what each listener is given, and the
// inter-broker listener with this broker's side of it (validateInterBroker).
func (c *Config) validateListeners() error {
	names := map[string]bool{c.interBroker(): true}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		if l.Name == "" || names[l.Name] {
			return fmt.Errorf("broker: listener name %q is empty or used twice (the inter-broker listener is %q)", l.Name, c.interBroker())
		}
		names[l.Name] = true
		if err := l.validate(); err != nil {
			return err
		}
	}
	return c.validateInterBroker()
}

// validate checks that the listener's protocol can be honoured with what
// it is given.
func (l *Listener) validate() error {
	switch l.Protocol {
	case kafka.Plaintext, kafka.SSL, kafka.SASLPlaintext, kafka.SASLSSL:
	default:
		return fmt.Errorf("broker: listener %s: security protocol %q (want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", l.Name, l.Protocol)
	}
	if l.Protocol.TLS() != (l.TLS != nil) {
		if l.TLS == nil {
			return fmt.Errorf("broker: listener %s (%s) has no TLS configuration: set its ssl.keystore.* settings", l.Name, l.Protocol)
		}
		return fmt.Errorf("broker: listener %s is %s: its TLS configuration would go unused", l.Name, l.Protocol)
	}
	if !l.Protocol.SASL() {
		if len(l.Mechanisms) > 0 || len(l.PlainUsers) > 0 || !l.OAuth.Empty() {
			return fmt.Errorf("broker: listener %s is %s: its SASL settings would go unused", l.Name, l.Protocol)
		}
		return nil
	}
	if len(l.Mechanisms) == 0 {
		return fmt.Errorf("broker: listener %s (%s) enables no SASL mechanism: set sasl.enabled.mechanisms", l.Name, l.Protocol)
	}
	for _, m := range l.Mechanisms {
		switch m {
		case sasl.Plain:
			if len(l.PlainUsers) == 0 {
				return fmt.Errorf("broker: listener %s enables PLAIN without users: set listener.name.%s.plain.sasl.jaas.config with user_<name>=\"<password>\" entries", l.Name, lowerName(l.Name))
			}
		case sasl.ScramSHA256, sasl.ScramSHA512:
		case sasl.OAuthBearer:
			if err := l.OAuth.Check(); err != nil {
				return fmt.Errorf("broker: listener %s: %w", l.Name, err)
			}
		default:
			return fmt.Errorf("broker: listener %s: SASL mechanism %q is not offered (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)", l.Name, m)
		}
	}
	if !l.OAuth.Empty() && !slices.Contains(l.Mechanisms, sasl.OAuthBearer) {
		return fmt.Errorf("broker: listener %s does not enable OAUTHBEARER: its OAUTHBEARER settings would go unused", l.Name)
	}
	return nil
}

func (c *Config) interBroker() string {
	if c.InterBrokerName != "" {
		return c.InterBrokerName
	}
	return interBrokerName
}

// resolveListeners picks free ports for port-0 listeners (before the
// start, so that the broker registers the addresses it will bind) and
// returns each listener's advertised address by name, the inter-broker
// one's included.
func (b *Broker) resolveListeners(interAdvertise string) (map[string]string, error) {
	adv := map[string]string{b.cfg.interBroker(): interAdvertise}
	for i := range b.cfg.Listeners {
		l := &b.cfg.Listeners[i]
		var err error
		if l.Addr, err = freePort(l.Addr); err != nil {
			return nil, err
		}
		a := l.Advertise
		if a == "" {
			a = l.Addr
		}
		host, port, err := net.SplitHostPort(a)
		if p, perr := strconv.Atoi(port); err != nil || perr != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("broker: listener %s: advertised address %q", l.Name, a)
		}
		adv[l.Name] = net.JoinHostPort(host, port)
	}
	return adv, nil
}

// listenOthers binds every listener besides the inter-broker one.
func (b *Broker) listenOthers(base netpoll.Config, adv map[string]string) error {
	for _, l := range b.cfg.Listeners {
		ns, err := b.listen(base, l, adv[l.Name], false)
		if err != nil {
			return err
		}
		b.push("listener "+l.Name, ns.Close)
		b.others = append(b.others, namedServer{l.Name, ns})
	}
	return nil
}

// listen binds one listener, its connections served by the protocol
// server through the listener's security protocol.
func (b *Broker) listen(base netpoll.Config, l Listener, advertised string, interBroker bool) (*netpoll.Server, error) {
	nc := base
	nc.Addr, nc.TLS = l.Addr, l.TLS
	// KIP-612: the inter-broker listener is exempt from
	// max.connection.creation.rate when there are others, as Kafka's
	// protected listener is; the per-IP rates apply everywhere.
	nc.ConnLimiter = b.connLimit
	if interBroker && len(b.cfg.Listeners) > 0 {
		nc.ConnLimiter = b.connLimitInter
	}
	if l.Protocol.SASL() {
		// Until a client authenticates its frames are bounded by
		// sasl.server.max.receive.size, before their bodies are
		// allocated; the session lifts the bound when it completes.
		nc.InitialMaxFrameBytes = l.MaxReceiveBytes
		if nc.InitialMaxFrameBytes <= 0 {
			nc.InitialMaxFrameBytes = kafka.SASLMaxReceiveBytesDefault
		}
	}
	kl := kafka.Listener{Name: l.Name, Protocol: l.Protocol, InterBroker: interBroker, Advertised: advertised,
		Mechanisms: l.Mechanisms, PlainUsers: l.PlainUsers, ReauthMax: l.ReauthMax, MaxReceiveBytes: l.MaxReceiveBytes,
		AuthTimeout: l.AuthTimeout, PrincipalRules: l.PrincipalRules}
	if slices.Contains(l.Mechanisms, sasl.OAuthBearer) {
		// One validator per listener: its connections share the
		// JWKS, read here so that a missing file stops the start.
		v, err := sasl.NewOAuthValidator(l.OAuth)
		if err != nil {
			return nil, fmt.Errorf("broker: listener %s: %w", l.Name, err)
		}
		kl.OAuth = v
	}
	ns, err := netpoll.Listen(nc, b.srv.Listener(kl))
	if err != nil {
		return nil, fmt.Errorf("broker: listener %s on %s: %w", l.Name, l.Addr, err)
	}
	return ns, nil
}

type namedServer struct {
	name string
	ns   *netpoll.Server
}

// Failed receives an error when one of the broker's listeners stops
// serving on its own (netpoll's engine ended without Close): the broker
// can no longer be reached there, and the process should exit so that the
// controller fences it. Nothing is sent after Close.
func (b *Broker) Failed() <-chan error {
	b.failedOnce.Do(func() {
		b.failed = make(chan error, 1)
		watch := func(name string, ns *netpoll.Server) {
			<-ns.Done()
			if err := ns.Err(); err != nil && !b.closed.Load() {
				select {
				case b.failed <- fmt.Errorf("broker: listener %s: %w", name, err):
				default:
				}
			}
		}
		if b.net != nil {
			go watch(b.cfg.interBroker(), b.net)
		}
		for _, o := range b.others {
			go watch(o.name, o.ns)
		}
	})
	return b.failed
}

// ListenerAddr is the bound address of the named listener, or "".
func (b *Broker) ListenerAddr(name string) string {
	if name == b.cfg.interBroker() {
		return b.addr
	}
	for _, o := range b.others {
		if o.name == name {
			return o.ns.Addr().String()
		}
	}
	return ""
}

func lowerName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
