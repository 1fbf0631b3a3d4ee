package sasl

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// jwt is a JSON Web Token in the JWS compact serialization (RFC 7515,
// RFC 7519), decoded but not yet verified:
//
//	base64url(header) "." base64url(claims) "." base64url(signature)
//
// The claims stay raw until a check asks for one: decoding is bounded by
// the token, which is bounded by the SASL message.
type jwt struct {
	alg, kid     string
	header       []byte // the decoded header, for messages
	claims       map[string]json.RawMessage
	signingInput string // header "." claims, as sent: what is signed
	signature    []byte
}

// parseJWT splits and decodes a compact JWS. A token that is not one is
// a *TokenError (invalid_token).
func parseJWT(token string) (*jwt, error) {
	if len(token) > oauthTokenBytesMax {
		return nil, invalidToken("a token over %d bytes", oauthTokenBytesMax)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		// Five parts would be a JWE: an encrypted token is not offered.
		return nil, invalidToken("Malformed JWT provided; expected three sections (header, payload, and signature), got %d", len(parts))
	}
	t := &jwt{signingInput: parts[0] + "." + parts[1]}
	var err error
	if t.header, err = b64url(parts[0]); err != nil {
		return nil, invalidToken("malformed Base64 URL encoded header")
	}
	// The header's members by their exact names: encoding/json matches
	// struct fields without regard to case, and {"ALG":"none"} is not a
	// header with an alg.
	var h map[string]json.RawMessage
	if err := strictObject(t.header, &h); err != nil {
		return nil, invalidToken("malformed JOSE header: %v", err)
	}
	alg, ok := h["alg"]
	if !ok || json.Unmarshal(alg, &t.alg) != nil {
		return nil, invalidToken("JWS header must have an Algorithm value")
	}
	if kid, ok := h["kid"]; ok && json.Unmarshal(kid, &t.kid) != nil {
		return nil, invalidToken("malformed JOSE header: kid is not a string")
	}
	if _, ok := h["crit"]; ok {
		// RFC 7515 section 4.1.11: a critical extension the recipient
		// does not understand makes the JWS invalid; none is understood.
		return nil, invalidToken("JWS header has critical extensions (crit), none of which is understood")
	}
	claims, err := b64url(parts[1])
	if err != nil {
		return nil, invalidToken("malformed Base64 URL encoded claims")
	}
	if err := strictObject(claims, &t.claims); err != nil {
		return nil, invalidToken("malformed JWT claims: %v", err)
	}
	if t.signature, err = b64url(parts[2]); err != nil {
		return nil, invalidToken("malformed Base64 URL encoded signature")
	}
	return t, nil
}

// b64url decodes base64url without padding (RFC 7515 section 2), and
// tolerates the padding some encoders leave.
func b64url(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// strictObject decodes a JSON object into v, and nothing after it.
func strictObject(b []byte, v any) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return fmt.Errorf("not a JSON object")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return fmt.Errorf("data after the JSON object")
	}
	return nil
}

// numericDate reads a NumericDate claim (RFC 7519 section 2): seconds
// since the epoch, possibly fractional.
func (t *jwt) numericDate(name string) (time.Time, float64, bool, error) {
	raw, ok := t.claims[name]
	if !ok || string(raw) == "null" {
		return time.Time{}, 0, false, nil
	}
	s := string(bytes.TrimSpace(raw))
	if s == "" || !(s[0] == '-' || '0' <= s[0] && s[0] <= '9') {
		return time.Time{}, 0, true, invalidToken("The '%s' claim was not of type Number", name)
	}
	f, err := strconv.ParseFloat(s, 64)
	// Beyond a million years either way a date is nonsense, and would
	// overflow time.Duration arithmetic below.
	if err != nil || math.Abs(f) > 3e13 {
		return time.Time{}, 0, true, invalidToken("The '%s' claim is not a usable NumericDate: %s", name, clip(s))
	}
	sec := math.Floor(f)
	return time.Unix(int64(sec), int64((f-sec)*1e9)), f, true, nil
}

// stringClaim reads a string claim.
func (t *jwt) stringClaim(name string) (string, bool, error) {
	raw, ok := t.claims[name]
	if !ok || string(raw) == "null" {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", true, invalidToken("The '%s' claim was not of type String", name)
	}
	return s, true, nil
}

// stringsClaim reads a claim that is a string or an array of strings
// (aud, RFC 7519 section 4.1.3; scope as Kafka reads it). A string is one
// value: Kafka does not split a scope string on spaces.
func (t *jwt) stringsClaim(name string) ([]string, bool, error) {
	raw, ok := t.claims[name]
	if !ok || string(raw) == "null" {
		return nil, false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []string{s}, true, nil
	}
	var l []string
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, true, invalidToken("The '%s' claim was not a String or a List of Strings", name)
	}
	return l, true, nil
}

// unsecuredValidator is Kafka's default server callback handler,
// OAuthBearerUnsecuredValidatorCallbackHandler: an unsigned JWT (alg
// "none") whose claims are checked and believed. For development only:
// anyone can write such a token for any principal.
type unsecuredValidator struct {
	principalClaim string
	scopeClaim     string
	requiredScope  []string
	skew           time.Duration
	now            func() time.Time
}

// Validate checks what Kafka's handler checks, in its order and with its
// messages: alg none and no signature, the principal claim, exp, iat not
// in the future, exp after iat, the required scope; and nbf, which
// Kafka's unsecured token ignores and this one does not.
func (v *unsecuredValidator) Validate(token string) (Token, error) {
	t, err := parseJWT(token)
	if err != nil {
		return Token{}, err
	}
	if t.alg != "none" {
		return Token{}, invalidToken("Unsecured JWS must have 'none' for an algorithm")
	}
	if len(t.signature) != 0 {
		return Token{}, invalidToken("Unsecured JWS must not contain a digital signature")
	}
	scope, err := unsecuredScope(t, v.scopeClaim)
	if err != nil {
		return Token{}, err
	}
	exp, expF, ok, err := t.numericDate("exp")
	if err != nil {
		return Token{}, err
	}
	if !ok {
		return Token{}, invalidToken("No expiration time in JWT")
	}
	principal, _, err := t.stringClaim(v.principalClaim)
	if err != nil {
		return Token{}, err
	}
	if strings.TrimSpace(principal) == "" {
		return Token{}, invalidToken("No principal name in JWT claim: %s", v.principalClaim)
	}
	now := v.now()
	nowMs, skewMs := now.UnixMilli(), v.skew.Milliseconds()
	iat, iatF, haveIat, err := t.numericDate("iat")
	if err != nil {
		return Token{}, err
	}
	if haveIat && iat.After(now.Add(v.skew)) {
		return Token{}, invalidToken("The Issued At value (%f seconds) was after the indicated time (%d ms) plus allowable clock skew (%d ms)",
			iatF, nowMs, skewMs)
	}
	if !now.Add(-v.skew).Before(exp) {
		return Token{}, invalidToken("The indicated time (%d ms) minus allowable clock skew (%d ms) was on or after the Expiration Time value (%f seconds)",
			nowMs, skewMs, expF)
	}
	nbf, nbfF, haveNbf, err := t.numericDate("nbf")
	if err != nil {
		return Token{}, err
	}
	if haveNbf && nbf.After(now.Add(v.skew)) {
		return Token{}, invalidToken("The Not Before value (%f seconds) was after the indicated time (%d ms) plus allowable clock skew (%d ms)",
			nbfF, nowMs, skewMs)
	}
	if haveIat && !exp.After(iat) {
		return Token{}, invalidToken("The Expiration Time time (%f seconds) was not after the Issued At time (%f seconds)", expF, iatF)
	}
	have := make(map[string]bool, len(scope))
	for _, s := range scope {
		have[s] = true
	}
	for _, want := range v.requiredScope {
		if !have[want] {
			return Token{}, &TokenError{Status: "insufficient_scope", Scope: javaList(v.requiredScope),
				Reason: fmt.Sprintf("The provided scope (%s) was missing a required scope (%s).  All required scope elements: %s",
					clip(javaList(scope)), want, javaList(v.requiredScope))}
		}
	}
	return Token{Principal: principal, Expiry: exp, Scope: scope}, nil
}

// unsecuredScope is the scope of Kafka's unsecured token: a string is one
// scope value, a list is several; blank values are dropped.
func unsecuredScope(t *jwt, claim string) ([]string, error) {
	l, _, err := t.stringsClaim(claim)
	if err != nil {
		return nil, err
	}
	var scope []string
	seen := map[string]bool{}
	for _, s := range l {
		if s = strings.TrimSpace(s); s != "" && !seen[s] {
			seen[s] = true
			scope = append(scope, s)
		}
	}
	return scope, nil
}

func contains(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

// javaList formats a list as Java's List.toString does, as Kafka's
// messages show it.
func javaList(l []string) string { return "[" + strings.Join(l, ", ") + "]" }
