package kafka

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
	"ringlog/internal/sasl"
	"ringlog/netpoll"
)

// SecurityProtocol is a listener's security protocol, by Kafka's names
// (listener.security.protocol.map).
type SecurityProtocol string

const (
	Plaintext     SecurityProtocol = "PLAINTEXT"
	SSL           SecurityProtocol = "SSL"
	SASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	SASLSSL       SecurityProtocol = "SASL_SSL"
)

// SASL reports whether clients authenticate with SASL on the protocol.
func (p SecurityProtocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

// TLS reports whether the protocol runs over TLS.
func (p SecurityProtocol) TLS() bool { return p == SSL || p == SASLSSL }

// Defaults of a SASL listener's limits.
const (
	// SASLMaxReceiveBytesDefault is sasl.server.max.receive.size: the
	// largest frame an unauthenticated client may send.
	SASLMaxReceiveBytesDefault = 512 << 10
	// SASLAuthTimeoutDefault bounds the time from a connection's first
	// byte to its authentication; a client that has not authenticated by
	// then is disconnected.
	SASLAuthTimeoutDefault = 30 * time.Second
)

// Listener is one of the broker's listeners as the protocol layer sees
// it: how its clients authenticate. Server.Listener binds it to the
// protocol handler that netpoll serves on the listener's socket.
type Listener struct {
	// Name is the listener's name (listeners=NAME://host:port).
	Name     string
	Protocol SecurityProtocol
	// InterBroker marks inter.broker.listener.name: followers' fetches
	// (a replica id >= 0) are served only here.
	InterBroker bool
	// Advertised is this broker's host:port on the listener
	// (advertised.listeners; empty: Config.AdvertisedHost and Port).
	Advertised string
	// Mechanisms is sasl.enabled.mechanisms: PLAIN, SCRAM-SHA-256,
	// SCRAM-SHA-512 and OAUTHBEARER are served.
	Mechanisms []string
	// PlainUsers are PLAIN's users and passwords (the listener's JAAS
	// configuration, user_<name>="<password>").
	PlainUsers sasl.PlainUsers
	// OAuth validates OAUTHBEARER tokens, for all the listener's
	// connections (nil: Kafka's default, the unsecured validator).
	OAuth sasl.TokenValidator
	// ReauthMax is connections.max.reauth.ms (0: sessions never expire).
	// A client learns it in SaslAuthenticate's session_lifetime_ms and
	// must authenticate again before it passes (KIP-368); a request after
	// that closes the connection.
	ReauthMax time.Duration
	// MaxReceiveBytes is sasl.server.max.receive.size (0: 512 KiB).
	MaxReceiveBytes int32
	// AuthTimeout bounds the time to authenticate (0: 30 s).
	AuthTimeout time.Duration
	// PrincipalRules is ssl.principal.mapping.rules (nil: DEFAULT): an SSL
	// listener's client with a certificate is User:<its mapped subject>.
	PrincipalRules []PrincipalRule
}

// Principal is the anonymous principal of a connection that does not
// authenticate (PLAINTEXT, SSL without a client certificate), as Kafka
// names it.
const anonymous = "User:ANONYMOUS"

// saslState is where a connection is in Kafka's SASL exchange
// (SaslServerAuthenticator's states).
type saslState uint8

const (
	saslHandshakeOrVersions saslState = iota // expecting ApiVersions or SaslHandshake
	saslHandshake                            // ApiVersions seen: expecting SaslHandshake
	saslAuthenticate                         // SaslHandshake done: SaslAuthenticate until the mechanism completes
	saslComplete                             // authenticated
)

// session is a connection's security state, kept in its netpoll context.
// The SASL state, mechanism and exchange are touched only on the
// connection's network goroutine (Serve, and the SASL handlers, which are
// async and so run there); the principal and expiry are read by handlers
// on other goroutines.
type session struct {
	l *Listener
	c *netpoll.Conn

	state saslState
	mech  string
	// rawTokens: SaslHandshake v0 chose the mechanism, and its tokens
	// come as bare frames rather than SaslAuthenticate requests.
	rawTokens bool
	ex        sasl.Server
	timer     *time.Timer // the authentication deadline, until authenticated

	principal atomic.Pointer[string]
	expiry    atomic.Int64 // unix nanoseconds after which requests close the connection; 0: never

	// acls caches the connection's authorization decisions (authz.go);
	// hostIP is the client's address as ACLs name it, once computed.
	acls   acl.Cache
	hostIP atomic.Pointer[string]

	// produces keeps the connection's produce requests in order while a
	// transactional one waits for its verification (txn_verify.go).
	produces produceOrder
}

// Principal is "User:<name>" once authenticated, anonymous otherwise.
func (ss *session) Principal() string {
	if p := ss.principal.Load(); p != nil {
		return *p
	}
	return anonymous
}

// handler serves one listener: it is the netpoll.Handler of the
// listener's socket.
type handler struct {
	s *Server
	l *Listener
}

// Listener returns the netpoll handler of a listener: requests on its
// connections are gated by its security protocol, then served by s.
func (s *Server) Listener(l Listener) netpoll.Handler {
	if l.MaxReceiveBytes <= 0 {
		l.MaxReceiveBytes = SASLMaxReceiveBytesDefault
	}
	if l.AuthTimeout <= 0 {
		l.AuthTimeout = SASLAuthTimeoutDefault
	}
	if l.OAuth == nil && l.enabled(sasl.OAuthBearer) {
		// Kafka's default server callback handler for OAUTHBEARER; its
		// zero configuration cannot fail.
		v, err := sasl.NewOAuthValidator(sasl.OAuthConfig{})
		if err != nil {
			panic(fmt.Sprintf("kafka: the unsecured OAUTHBEARER validator: %v", err))
		}
		l.OAuth = v
	}
	return &handler{s: s, l: &l}
}

func (h *handler) Closed(c *netpoll.Conn) { h.s.Closed(c) }

// Opened starts a new connection's session (netpoll.Opener), so that the
// authentication deadline runs from the connection's first moment, not
// from its first request.
func (h *handler) Opened(c *netpoll.Conn) { h.open(c) }

func (h *handler) Serve(c *netpoll.Conn, seq uint64, frame []byte) {
	ss, ok := c.Context().(*session)
	if !ok {
		ss = h.open(c)
	}
	if ss.state == saslAuthenticate && ss.rawTokens {
		h.rawToken(c, seq, frame, ss)
		return
	}
	if err := ss.admit(frame); err != nil {
		h.s.log.Debug("closing connection", "remote", c.RemoteAddr(), "listener", h.l.Name, "err", err)
		c.Close()
		return
	}
	h.s.serve(c, seq, frame, ss)
}

// rawToken steps the mechanism with a bare token (after SaslHandshake v0)
// and answers with the mechanism's bare token, size-prefixed and nothing
// else, as Kafka's authenticator does; a failure closes the connection,
// the only answer v0 has.
func (h *handler) rawToken(c *netpoll.Conn, seq uint64, frame []byte, ss *session) {
	out, done, err := ss.ex.Step(frame)
	if err == nil && done {
		_, err = ss.complete(ss.ex.User(), time.Time{})
		// A client of SaslHandshake v0 cannot re-authenticate (KIP-368
		// needs SaslAuthenticate v1): Kafka ends no such session.
		ss.expiry.Store(0)
	}
	if err != nil {
		h.s.log.Info("kafka: SASL authentication failed", "remote", c.RemoteAddr(), "listener", h.l.Name,
			"mechanism", ss.mech, "err", err)
		c.Close()
		return
	}
	r := &netpoll.Response{}
	r.AppendBytes(out)
	c.Reply(seq, r)
}

// open makes a new connection's session: authenticated at once on a
// listener without SASL (an SSL client with a certificate as the
// principal its subject maps to), else waiting for SASL with a deadline.
func (h *handler) open(c *netpoll.Conn) *session {
	if ss, ok := c.Context().(*session); ok {
		return ss
	}
	ss := &session{l: h.l, c: c}
	if st := c.TLS(); h.l.Protocol == SSL && st != nil && len(st.PeerCertificates) > 0 {
		p := CertPrincipal(st.PeerCertificates[0], h.l.PrincipalRules)
		ss.principal.Store(&p)
	}
	if h.l.Protocol.SASL() {
		ss.timer = time.AfterFunc(h.l.AuthTimeout, func() {
			if ss.principal.Load() == nil {
				c.Close()
			}
		})
	} else {
		ss.state = saslComplete
	}
	c.SetContext(ss)
	return ss
}

// admit vets a request frame against the session before it is parsed:
// before authentication only ApiVersions, SaslHandshake and
// SaslAuthenticate, in sasl.server.max.receive.size; after a session
// expired, only a re-authentication.
func (ss *session) admit(frame []byte) error {
	if len(frame) < 2 {
		return nil // parseHeader refuses it
	}
	key := kmsg.Key(int16(frame[0])<<8 | int16(frame[1]))
	if ss.state != saslComplete {
		if len(frame) > int(ss.l.MaxReceiveBytes) {
			return fmt.Errorf("%w: %d-byte frame before authentication, sasl.server.max.receive.size is %d",
				errBadRequest, len(frame), ss.l.MaxReceiveBytes)
		}
		switch {
		case key == kmsg.ApiVersions && ss.state <= saslHandshake:
		case key == kmsg.SASLHandshake && ss.state <= saslHandshake:
		case key == kmsg.SASLAuthenticate && ss.state == saslAuthenticate:
		default:
			return fmt.Errorf("%w: %s during SASL authentication", errBadRequest, kmsg.NameForKey(int16(key)))
		}
		return nil
	}
	if exp := ss.expiry.Load(); exp != 0 && time.Now().UnixNano() > exp && key != kmsg.SASLHandshake && key != kmsg.SASLAuthenticate {
		return fmt.Errorf("%w: SASL session expired (connections.max.reauth.ms) without re-authentication", errBadRequest)
	}
	return nil
}

// begin starts a mechanism's exchange after SaslHandshake.
func (ss *session) begin(s *Server, mech string) {
	ss.mech, ss.state = mech, saslAuthenticate
	switch mech {
	case sasl.Plain:
		ss.ex = sasl.NewPlainServer(ss.l.PlainUsers)
	case sasl.OAuthBearer:
		ss.ex = sasl.NewOAuthBearerServer(ss.l.OAuth)
	default:
		m := sasl.ScramMechanismNamed(mech)
		ss.ex = sasl.NewScramServer(m, func(user string) (sasl.Credential, bool) {
			c, ok := s.cfg.Node.Image().ScramCredential(user, int8(m))
			return sasl.Credential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}, ok
		}, nonce())
	}
}

// complete ends a successful exchange. A re-authentication must keep the
// principal (Kafka refuses a change of principal, KIP-368). credExpiry is
// when the credential itself expires (an OAUTHBEARER token's exp; zero:
// never). The session lasts min(connections.max.reauth.ms, credExpiry -
// now), as Kafka's SaslServerAuthenticator computes it: a token's expiry
// bounds the session even without connections.max.reauth.ms. It returns
// the session lifetime to tell the client (0: none).
func (ss *session) complete(user string, credExpiry time.Time) (time.Duration, error) {
	p := "User:" + user
	if old := ss.principal.Load(); old != nil && *old != p {
		return 0, fmt.Errorf("cannot change principals during re-authentication from %s to %s", *old, p)
	}
	ss.principal.Store(&p)
	ss.state, ss.ex = saslComplete, nil
	if ss.timer != nil {
		ss.timer.Stop()
	}
	// An authenticated client may send what any client may
	// (socket.request.max.bytes).
	ss.c.SetMaxFrameBytes(0)
	now := time.Now()
	life := ss.l.ReauthMax
	if !credExpiry.IsZero() {
		left := max(credExpiry.Sub(now), 0)
		if life <= 0 || left < life {
			life = left
		}
	}
	if ss.l.ReauthMax > 0 || !credExpiry.IsZero() {
		ss.expiry.Store(now.Add(life).UnixNano())
	}
	return life, nil
}

// nonce is a SCRAM server nonce: 24 random bytes, base64 without commas.
func nonce() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// clusterAction reports whether a request may act as a broker (Kafka's
// CLUSTER_ACTION on the cluster, which a replica fetch needs). Only on the
// inter-broker listener: there a PLAINTEXT listener trusts every client
// (its network is trusted, docs/security.md), and a listener that
// authenticates only super.users, the brokers' principals. Kafka gives
// brokers CLUSTER_ACTION the same way, through super.users, or through an
// ACL with an authorizer (authz.go).
func (s *Server) clusterAction(cx *reqCtx) bool {
	ss := cx.session
	if ss == nil || !ss.l.InterBroker {
		return false
	}
	if ss.l.Protocol == Plaintext {
		return true
	}
	return s.superUsers[ss.Principal()] || (s.cfg.Authorizer != nil && s.authorizeCluster(cx, acl.OpClusterAction))
}

// enabled reports whether the listener offers mechanism m.
func (l *Listener) enabled(m string) bool { return slices.Contains(l.Mechanisms, m) }
