package fetcher

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The follower's side of a secured inter-broker listener: TLS around the
// socket, then SASL between ApiVersions and the first Fetch, in the order
// Kafka's clients use (SaslServerAuthenticator admits ApiVersions, then
// SaslHandshake, then SaslAuthenticate until the mechanism completes).

// startTLS wraps the connection in TLS and runs the handshake. ctx's end
// closes the socket (dial's AfterFunc), which ends a handshake in progress.
func (c *conn) startTLS(ctx context.Context, cfg *Config) error {
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return fmt.Errorf("%w: TLS to %s: %w", ErrAuthentication, cfg.Addr, err)
	}
	var tc *tls.Config
	if cfg.TLSFor != nil {
		tc = cfg.TLSFor(host)
	} else {
		tc = cfg.TLS.Clone()
		if tc.ServerName == "" && !tc.InsecureSkipVerify {
			tc.ServerName = host
		}
	}
	tlsConn := tls.Client(c.nc, tc)
	if err := tlsConn.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("%w: TLS handshake: %w", ErrAuthentication, err)
	}
	c.nc = tlsConn
	return nil
}

// authenticate runs the SASL exchange of cfg.SASL on the connection, after
// ApiVersions told which versions the leader serves. It returns the
// session's lifetime (0: none), before which the stream must connect again
// (the leader closes a connection whose session expired at its next
// request, KIP-368).
func (c *conn) authenticate(ctx context.Context, cfg *Config, v versions) (time.Duration, error) {
	if v.saslAuth < 0 {
		return 0, fmt.Errorf("%w: SaslHandshake v%d and SaslAuthenticate v%d+", ErrUnsupported, saslHandshakeVersion, saslAuthVersionMin)
	}
	m := cfg.SASL
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = saslHandshakeVersion, m.Name()
	r, err := c.roundTrip(hs)
	if err != nil {
		return 0, err
	}
	if resp := r.(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		return 0, fmt.Errorf("%w: mechanism %s (the leader enables %v): %w", ErrAuthentication, m.Name(), resp.SupportedMechanisms, leaderError(resp.ErrorCode))
	}
	session, out, err := m.Authenticate(ctx, cfg.Addr)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrAuthentication, m.Name(), err)
	}
	// PLAIN takes one round, SCRAM two; a leader that keeps asking is not
	// followed further.
	final := false
	for round := 0; ; round++ {
		if round == 8 {
			return 0, fmt.Errorf("%w: %s did not complete in %d rounds", ErrAuthentication, m.Name(), round)
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = v.saslAuth, out
		r, err := c.roundTrip(req)
		if err != nil {
			return 0, err
		}
		resp := r.(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 0 {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = ": " + *resp.ErrorMessage
			}
			return 0, fmt.Errorf("%w: %s as %w%s", ErrAuthentication, m.Name(), leaderError(resp.ErrorCode), msg)
		}
		life := time.Duration(resp.SessionLifetimeMillis) * time.Millisecond
		if final {
			return life, nil
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return 0, fmt.Errorf("%w: %s: %w", ErrAuthentication, m.Name(), err)
		}
		if done && len(next) == 0 {
			return life, nil
		}
		// A last message after done is still a SaslAuthenticate, which
		// the leader answers.
		out, final = next, done
	}
}

// reauthAt is when a connection whose session lasts life should be
// replaced: at 85 to 95% of it, as Kafka's clients re-authenticate, spread
// so that a follower's streams do not all reconnect at once. A stream
// reconnects rather than re-authenticating on the connection: the
// requests in flight are dropped and sent again, their offsets unchanged.
func reauthAt(now time.Time, life time.Duration) time.Time {
	if life <= 0 {
		return time.Time{}
	}
	return now.Add(life*85/100 + time.Duration(rand.Int64N(int64(life)/10+1)))
}
