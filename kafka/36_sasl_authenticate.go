package kafka

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/sasl"
)

// SaslAuthenticate, v0 to v2 (v1 adds session_lifetime_ms, KIP-368).
func init() {
	register(api{key: kmsg.SASLAuthenticate, min: 0, max: 2, async: handleSaslAuthenticate})
}

// handleSaslAuthenticate steps the mechanism chosen by SaslHandshake. A
// failure is SASL_AUTHENTICATION_FAILED with Kafka's message, and the
// connection closes once the answer is written. Outside an exchange it is
// ILLEGAL_SASL_STATE, as Kafka answers it once a connection is
// authenticated or on a listener without SASL. Inline, like SaslHandshake:
// a SCRAM step is a few HMACs.
func handleSaslAuthenticate(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	ss := cx.session
	if ss.state != saslAuthenticate {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = new("SaslAuthenticate request received after successful authentication")
		cx.reply(resp)
		return
	}
	out, done, err := ss.ex.Step(req.SASLAuthBytes)
	if err == nil && done {
		var credExpiry time.Time
		if e, ok := ss.ex.(sasl.CredentialExpirer); ok {
			credExpiry = e.CredentialExpiry()
		}
		var life time.Duration
		if life, err = ss.complete(ss.ex.User(), credExpiry); err == nil {
			resp.SessionLifetimeMillis = life.Milliseconds()
		}
	}
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = new(authFailure(ss.mech, err))
		s.log.Info("kafka: SASL authentication failed", "remote", cx.c.RemoteAddr(), "listener", ss.l.Name,
			"mechanism", ss.mech, "err", err)
		cx.replyThenClose(resp)
		return
	}
	resp.SASLAuthBytes = out
	cx.reply(resp)
}

// authFailure is the message Kafka's authenticators give a client that
// failed: the one the mechanism fixed (OAUTHBEARER's JSON error), the
// mechanism's own for bad credentials, the error otherwise.
func authFailure(mech string, err error) string {
	var ce *sasl.ClientError
	if errors.As(err, &ce) {
		return ce.Message
	}
	if errors.Is(err, sasl.ErrAuthentication) {
		if mech == sasl.Plain {
			return "Authentication failed: Invalid username or password"
		}
		return fmt.Sprintf("Authentication failed during authentication due to invalid credentials with SASL mechanism %s", mech)
	}
	return fmt.Sprintf("Authentication failed: %v", err)
}
