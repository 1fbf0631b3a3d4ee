package sasl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// OAuthBearer is the mechanism name of RFC 7628 as SaslHandshake carries it.
const OAuthBearer = "OAUTHBEARER"

// Bounds on a client's SASL extensions (RFC 7628 section 3.1; KIP-342).
// Kafka accepts any extension and records it for a custom principal
// builder; ringlog records them too, and bounds what it keeps.
const (
	oauthExtensionsMax      = 32
	oauthExtensionBytesMax  = 8 << 10 // keys and values together
	oauthTokenBytesMax      = 64 << 10
	oauthAuthorizationIDMax = 1 << 10
)

// ClientError is a failure whose message to the client the mechanism
// fixes, as Kafka's SaslAuthenticationException does: SaslAuthenticate
// carries Message and not the error's text, which may say more than an
// unauthenticated peer should learn (the reason is for the broker's log).
type ClientError struct {
	Message string
	Err     error
}

func (e *ClientError) Error() string { return e.Err.Error() }
func (e *ClientError) Unwrap() error { return e.Err }

// TokenError is a token a validator refused. Reason says why, for the
// broker's log; Status is RFC 6750's error code the client is told
// ("invalid_token", or "insufficient_scope" with Scope, the scope it
// lacks), in the JSON challenge of RFC 7628 section 3.2.2.
type TokenError struct {
	Status string
	Scope  string
	Reason string
}

func (e *TokenError) Error() string { return "sasl: OAUTHBEARER token refused: " + e.Reason }

// Is makes every refused token an ErrAuthentication.
func (e *TokenError) Is(target error) bool { return target == ErrAuthentication }

func invalidToken(format string, args ...any) error {
	return &TokenError{Status: "invalid_token", Reason: fmt.Sprintf(format, args...)}
}

// challenge is the server's error message of RFC 7628 section 3.2.2 as
// Kafka's OAuthBearerSaslServer writes it.
func (e *TokenError) challenge() []byte {
	m := map[string]string{"status": e.Status}
	if e.Scope != "" {
		m["scope"] = e.Scope
	}
	b, err := json.Marshal(m)
	if err != nil {
		return []byte(`{"status":"invalid_token"}`)
	}
	return b
}

// Token is what a validator makes of a valid token.
type Token struct {
	// Principal is the principal claim (sasl.oauthbearer.sub.claim.name,
	// unsecuredValidatorPrincipalClaimName; default sub).
	Principal string
	// Expiry is the exp claim: the session ends there (KIP-368).
	Expiry time.Time
	// Scope is the scope claim's values.
	Scope []string
}

// TokenValidator checks an OAUTHBEARER token: Kafka's server callback
// handler. Validate is called from many connections' goroutines at once.
// A refused token is a *TokenError.
type TokenValidator interface {
	Validate(token string) (Token, error)
}

// CredentialExpirer is a Server whose credential expires: once done, the
// session lasts until CredentialExpiry at most (Kafka's
// CREDENTIAL.LIFETIME.MS negotiated property, KIP-368).
type CredentialExpirer interface {
	CredentialExpiry() time.Time
}

// oauthServer is the server side of one OAUTHBEARER exchange:
//
//	client  n,[a=<authzid>],^Aauth=Bearer <token>^A[<key>=<value>^A]*^A
//	server  empty, done                      the token is valid
//	server  {"status":"invalid_token"}       it is not: the client
//	client  ^A                               acknowledges, and the
//	                                         exchange fails
//
// (^A is %x01.) The error round trip is RFC 7628's; Kafka fails the
// authentication only on the client's ^A, with the JSON as its message,
// and clients (the Java one, librdkafka, franz-go) expect exactly that.
type oauthServer struct {
	v TokenValidator

	failed     *TokenError // the error sent, awaiting the client's ^A
	done       bool
	token      Token
	extensions map[string]string
}

// NewOAuthBearerServer starts an OAUTHBEARER exchange that checks the
// client's token with v.
func NewOAuthBearerServer(v TokenValidator) Server { return &oauthServer{v: v} }

func (s *oauthServer) User() string { return s.token.Principal }

// CredentialExpiry is the token's expiry, once done.
func (s *oauthServer) CredentialExpiry() time.Time { return s.token.Expiry }

// Extensions are the client's SASL extensions, once done.
func (s *oauthServer) Extensions() map[string]string { return s.extensions }

func (s *oauthServer) Step(msg []byte) ([]byte, bool, error) {
	if s.done {
		return nil, false, fmt.Errorf("%w: OAUTHBEARER exchange already over", ErrProtocol)
	}
	if s.failed != nil {
		// RFC 7628 section 3.2.3: the client answers an error with a
		// single ^A. Kafka would read anything else as a new first
		// message, a second try; one token per exchange is enough.
		failed := s.failed
		s.failed, s.done = nil, true
		if !bytes.Equal(msg, []byte{0x01}) {
			return nil, false, fmt.Errorf("%w: OAUTHBEARER client did not acknowledge the server's error with %%x01", ErrProtocol)
		}
		return nil, false, &ClientError{Message: string(failed.challenge()), Err: failed}
	}
	first, err := parseOAuthFirst(msg)
	if err != nil {
		s.done = true
		return nil, false, err
	}
	tok, err := s.v.Validate(first.token)
	if err != nil {
		var te *TokenError
		if !errors.As(err, &te) {
			s.done = true
			return nil, false, fmt.Errorf("sasl: OAUTHBEARER validation: %w", err)
		}
		s.failed = te
		return te.challenge(), false, nil
	}
	s.done = true
	// Kafka's OAuthBearerSaslServer: an authorization id, when given,
	// must be the token's principal.
	if first.authzid != "" && first.authzid != tok.Principal {
		msg := fmt.Sprintf("Authentication failed: Client requested an authorization id (%s) that is different from the token's principal name (%s)",
			first.authzid, tok.Principal)
		return nil, false, &ClientError{Message: msg, Err: fmt.Errorf("%w: %s", ErrAuthentication, msg)}
	}
	s.token, s.extensions = tok, first.extensions
	return []byte{}, true, nil
}

// oauthFirst is a client's first message, parsed.
type oauthFirst struct {
	authzid    string
	token      string
	extensions map[string]string
}

// parseOAuthFirst reads the client's first message with Kafka's grammar
// (OAuthBearerClientInitialResponse):
//
//	"n," ["a=" saslname] "," %x01 *(key "=" value %x01) %x01
//	key   = 1*ALPHA
//	value = 1*(%x21-7E / SP / HTAB / CR / LF)
//	auth  = scheme 1*SP token    scheme "Bearer" in any case,
//	                             token 1*(ALPHA / DIGIT / "-" / "_" / ".")
//
// auth is required; the other keys are extensions. A repeated key keeps
// its last value, as Kafka's parser does.
func parseOAuthFirst(msg []byte) (oauthFirst, error) {
	var f oauthFirst
	bad := func(why string) (oauthFirst, error) {
		return oauthFirst{}, fmt.Errorf("%w: invalid OAUTHBEARER client first message: %s", ErrProtocol, why)
	}
	// The GS2 header: no channel binding ("n"), an optional authzid.
	rest, ok := bytes.CutPrefix(msg, []byte("n,"))
	if !ok {
		return bad("the GS2 header does not start with n,")
	}
	authz, kvs, ok := bytes.Cut(rest, []byte(","))
	if !ok {
		return bad("the GS2 header does not end with a comma")
	}
	if len(authz) > 0 {
		a, ok := bytes.CutPrefix(authz, []byte("a="))
		if !ok || len(a) == 0 || len(a) > oauthAuthorizationIDMax || !saslNameOK(a) {
			return bad("authorization id")
		}
		f.authzid = string(a)
	}
	// %x01 kvpairs %x01: the pairs each end with %x01, and one more
	// closes them.
	kvs, ok = bytes.CutPrefix(kvs, []byte{0x01})
	if !ok {
		return bad("no %x01 after the GS2 header")
	}
	kvs, ok = bytes.CutSuffix(kvs, []byte{0x01})
	if !ok {
		return bad("no closing %x01")
	}
	var auth []byte
	haveAuth, extBytes := false, 0
	for len(kvs) > 0 {
		var kv []byte
		kv, kvs, ok = bytes.Cut(kvs, []byte{0x01})
		if !ok {
			return bad("a key=value pair without its %x01")
		}
		k, v, ok := bytes.Cut(kv, []byte("="))
		if !ok || len(k) == 0 || len(v) == 0 || !extensionKeyOK(k) || !extensionValueOK(v) {
			return bad("a malformed key=value pair")
		}
		if string(k) == "auth" {
			auth, haveAuth = v, true
			continue
		}
		if f.extensions == nil {
			f.extensions = map[string]string{}
		}
		if _, dup := f.extensions[string(k)]; !dup && len(f.extensions) == oauthExtensionsMax {
			return bad(fmt.Sprintf("more than %d extensions", oauthExtensionsMax))
		}
		if extBytes += len(k) + len(v); extBytes > oauthExtensionBytesMax {
			return bad(fmt.Sprintf("extensions over %d bytes", oauthExtensionBytesMax))
		}
		f.extensions[string(k)] = string(v)
	}
	if !haveAuth {
		return bad("'auth' not specified")
	}
	scheme, tok, ok := bytes.Cut(auth, []byte(" "))
	tok = bytes.TrimLeft(tok, " ")
	if !ok || len(tok) == 0 || !tokenOK(tok) || !schemeOK(scheme) {
		return bad("invalid 'auth' format")
	}
	if !strings.EqualFold(string(scheme), "bearer") {
		return bad(fmt.Sprintf("invalid scheme %q", clip(string(scheme))))
	}
	if len(tok) > oauthTokenBytesMax {
		return bad(fmt.Sprintf("a token over %d bytes", oauthTokenBytesMax))
	}
	f.token = string(tok)
	return f, nil
}

// saslNameOK: RFC 5801's saslname as Kafka matches it, %x01-7F but "="
// and "," unless escaped as =2C or =3D. Kafka compares it undecoded.
func saslNameOK(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '=':
			if i+2 >= len(b) || (string(b[i+1:i+3]) != "2C" && string(b[i+1:i+3]) != "3D") {
				return false
			}
			i += 2
		case c == ',' || c == 0 || c > 0x7f:
			return false
		}
	}
	return true
}

func extensionKeyOK(b []byte) bool {
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

func extensionValueOK(b []byte) bool {
	for _, c := range b {
		if !(0x21 <= c && c <= 0x7e || c == ' ' || c == '\t' || c == '\r' || c == '\n') {
			return false
		}
	}
	return true
}

// schemeOK: Java's \w+.
func schemeOK(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// tokenOK: the characters of a JWT's compact serialization.
func tokenOK(b []byte) bool {
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
