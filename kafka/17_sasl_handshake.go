package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SaslHandshake, v0 and v1. After v1 the mechanism's tokens travel in
// SaslAuthenticate requests (KIP-152); after v0 they travel raw, each a
// size-prefixed frame with no request header, as Kafka still serves them
// (librdkafka wants v0 listed before it authenticates at all).
func init() {
	register(api{key: kmsg.SASLHandshake, min: 0, max: 1, async: handleSaslHandshake})
}

// handleSaslHandshake picks the mechanism of a SASL listener's exchange.
// On a listener without SASL it is ILLEGAL_SASL_STATE, as Kafka answers
// it there. A mechanism the listener does not offer is
// UNSUPPORTED_SASL_MECHANISM with the list it does offer, and the
// connection closes once that is written (Kafka's authenticator fails the
// connection). Sent again after authentication, it starts a
// re-authentication (KIP-368). It runs inline: the session is the
// connection's, touched only on its network goroutine.
func handleSaslHandshake(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	ss := cx.session
	if !ss.l.Protocol.SASL() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		cx.reply(resp)
		return
	}
	resp.SupportedMechanisms = append([]string(nil), ss.l.Mechanisms...)
	if !ss.l.enabled(req.Mechanism) {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		cx.replyThenClose(resp)
		return
	}
	ss.begin(s, req.Mechanism)
	ss.rawTokens = req.Version == 0
	cx.reply(resp)
}
