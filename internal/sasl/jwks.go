package sasl

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"strings"
	"sync"
	"time"
)

// Bounds on a JWKS (RFC 7517) and its keys.
const (
	jwksBytesMax = 1 << 20
	jwksKeysMax  = 256
	// RSA keys: jose4j, which Kafka verifies with, refuses keys under
	// 2048 bits; above 8192 a verification costs too much to offer an
	// unauthenticated peer.
	rsaBitsMin = 2048
	rsaBitsMax = 8192
	// jwsTriesMax bounds the keys one token's signature is tried with
	// (a token without a kid, several keys of its algorithm): each try
	// is work an unauthenticated client makes the broker do.
	jwsTriesMax = 4
)

// jwk is one usable verification key of a JWKS.
type jwk struct {
	kid, alg, use string
	rsa           *rsa.PublicKey
	ec            *ecdsa.PublicKey
}

// jwsAlg is a JWS signature algorithm (RFC 7518 section 3.1) offered here:
// RSASSA-PKCS1-v1_5 and ECDSA with SHA-2, what identity providers sign
// access tokens with. HMAC (a shared secret is not a JWKS's business) and
// "none" are refused.
type jwsAlg struct {
	hash  crypto.Hash
	curve elliptic.Curve // nil: RSA
}

var jwsAlgs = map[string]jwsAlg{
	"RS256": {crypto.SHA256, nil},
	"RS384": {crypto.SHA384, nil},
	"RS512": {crypto.SHA512, nil},
	"ES256": {crypto.SHA256, elliptic.P256()},
	"ES384": {crypto.SHA384, elliptic.P384()},
	"ES512": {crypto.SHA512, elliptic.P521()},
}

// parseJWKS reads a JWK Set: {"keys":[{...},...]}. Keys it cannot use (a
// key type or curve not offered, an RSA key out of bounds, a point off its
// curve, an encryption key) are skipped, as jose4j skips them; a set with
// none left is an error.
func parseJWKS(b []byte) ([]jwk, error) {
	if len(b) > jwksBytesMax {
		return nil, fmt.Errorf("sasl: JWKS of %d bytes, more than %d", len(b), jwksBytesMax)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := strictObject(b, &set); err != nil {
		return nil, fmt.Errorf("sasl: JWKS: %w", err)
	}
	if len(set.Keys) > jwksKeysMax {
		return nil, fmt.Errorf("sasl: JWKS of %d keys, more than %d", len(set.Keys), jwksKeysMax)
	}
	var keys []jwk
	for _, raw := range set.Keys {
		if k, ok := parseJWK(raw); ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("sasl: JWKS has no usable verification key (RSA of %d to %d bits, EC on P-256, P-384 or P-521)", rsaBitsMin, rsaBitsMax)
	}
	return keys, nil
}

func parseJWK(raw json.RawMessage) (jwk, bool) {
	var j struct {
		Kty, Kid, Use, Alg, N, E, Crv, X, Y string
	}
	if err := strictObject(raw, &j); err != nil || (j.Use != "" && j.Use != "sig") {
		return jwk{}, false
	}
	k := jwk{kid: j.Kid, alg: j.Alg, use: j.Use}
	switch j.Kty {
	case "RSA":
		n, err1 := b64url(j.N)
		e, err2 := b64url(j.E)
		if err1 != nil || err2 != nil || len(n) > rsaBitsMax/8+1 || len(e) == 0 || len(e) > 4 {
			return jwk{}, false
		}
		nn := new(big.Int).SetBytes(n)
		ee := new(big.Int).SetBytes(e).Int64()
		if nn.BitLen() < rsaBitsMin || nn.BitLen() > rsaBitsMax || ee < 3 || ee > 1<<31-1 || ee%2 == 0 {
			return jwk{}, false
		}
		k.rsa = &rsa.PublicKey{N: nn, E: int(ee)}
	case "EC":
		var c elliptic.Curve
		switch j.Crv {
		case "P-256":
			c = elliptic.P256()
		case "P-384":
			c = elliptic.P384()
		case "P-521":
			c = elliptic.P521()
		default:
			return jwk{}, false
		}
		size := (c.Params().BitSize + 7) / 8
		x, err1 := b64url(j.X)
		y, err2 := b64url(j.Y)
		if err1 != nil || err2 != nil || len(x) > size || len(y) > size {
			return jwk{}, false
		}
		// The uncompressed point 0x04 || X || Y, each left-padded to the
		// field size (RFC 7518 wants them full length; some encoders
		// drop leading zeros).
		pt := make([]byte, 1+2*size)
		pt[0] = 4
		copy(pt[1+size-len(x):1+size], x)
		copy(pt[1+2*size-len(y):], y)
		pub, err := ecdsa.ParseUncompressedPublicKey(c, pt)
		if err != nil {
			return jwk{}, false
		}
		k.ec = pub
	default:
		return jwk{}, false
	}
	return k, true
}

// fits reports whether k can verify a signature of alg.
func (k *jwk) fits(alg string, a jwsAlg) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	if a.curve == nil {
		return k.rsa != nil
	}
	return k.ec != nil && k.ec.Curve == a.curve
}

// verify checks a JWS signature over input with k.
func (k *jwk) verify(a jwsAlg, input string, sig []byte) bool {
	var digest []byte
	switch a.hash {
	case crypto.SHA256:
		d := sha256.Sum256([]byte(input))
		digest = d[:]
	case crypto.SHA384:
		d := sha512.Sum384([]byte(input))
		digest = d[:]
	default:
		d := sha512.Sum512([]byte(input))
		digest = d[:]
	}
	if a.curve == nil {
		return rsa.VerifyPKCS1v15(k.rsa, a.hash, digest, sig) == nil
	}
	// RFC 7518 section 3.4: R || S, each the field size, not ASN.1.
	size := (a.curve.Params().BitSize + 7) / 8
	if len(sig) != 2*size {
		return false
	}
	r := new(big.Int).SetBytes(sig[:size])
	s := new(big.Int).SetBytes(sig[size:])
	return ecdsa.Verify(k.ec, digest, r, s)
}

// jwksFile is a JWKS kept from a file (sasl.oauthbearer.jwks.endpoint.url
// with a file: URL). The file is checked at most every checkEvery, and
// read again when its size or modification time changed; a token whose
// key is not found asks for a check sooner (at most every forceEvery), as
// Kafka's RefreshingHttpsJwks expedites a refresh for an unknown kid. A
// file that no longer reads or parses leaves the last good keys in use.
type jwksFile struct {
	url, path  string
	checkEvery time.Duration
	forceEvery time.Duration
	now        func() time.Time

	mu      sync.Mutex
	keys    []jwk
	checked time.Time
	size    int64
	mod     time.Time
	lastErr error
}

// JWKS file checks: often enough that a rotated key is seen within
// seconds, rarely enough that the stat costs nothing.
const (
	jwksCheckEvery = 2 * time.Second
	jwksForceEvery = 500 * time.Millisecond
)

func openJWKSFile(url, path string, now func() time.Time) (*jwksFile, error) {
	f := &jwksFile{url: url, path: path, checkEvery: jwksCheckEvery, forceEvery: jwksForceEvery, now: now}
	if err := f.reload(); err != nil {
		return nil, err
	}
	f.checked = now()
	return f, nil
}

// reload reads the file if it changed. Called with mu held, or before f
// is shared.
func (f *jwksFile) reload() error {
	st, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("sasl: JWKS %s: %w", f.url, err)
	}
	if f.keys != nil && st.Size() == f.size && st.ModTime().Equal(f.mod) {
		return nil
	}
	fh, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("sasl: JWKS %s: %w", f.url, err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, jwksBytesMax+1))
	if err != nil {
		return fmt.Errorf("sasl: JWKS %s: %w", f.url, err)
	}
	keys, err := parseJWKS(b)
	if err != nil {
		return fmt.Errorf("%w (from %s)", err, f.url)
	}
	f.keys, f.size, f.mod = keys, st.Size(), st.ModTime()
	return nil
}

// get returns the keys, checking the file first if it is time to; force
// asks for an early check.
func (f *jwksFile) get(force bool) []jwk {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	since := now.Sub(f.checked)
	if since >= f.checkEvery || (force && since >= f.forceEvery) || since < 0 {
		f.checked = now
		f.lastErr = f.reload()
	}
	return f.keys
}

// jwksValidator is Kafka's OAuthBearerValidatorCallbackHandler (KIP-768)
// with its BrokerJwtValidator: a JWT signed by a key of the JWKS, with
// exp and iat, checked against the expected issuer and audience.
type jwksValidator struct {
	keys       *jwksFile
	issuer     string
	audience   []string
	skew       time.Duration
	subClaim   string
	scopeClaim string
	now        func() time.Time
}

// Validate checks a signed token. The reasons are jose4j's and Kafka's
// messages, prefixed as Kafka logs them; the client is told only
// invalid_token, as Kafka tells it.
func (v *jwksValidator) Validate(token string) (Token, error) {
	tok, err := v.validate(token)
	if err != nil {
		var te *TokenError
		if errors.As(err, &te) {
			te.Reason = "Could not validate the access token: " + te.Reason
		}
	}
	return tok, err
}

func (v *jwksValidator) validate(token string) (Token, error) {
	t, err := parseJWT(token)
	if err != nil {
		return Token{}, err
	}
	if t.alg == "none" {
		return Token{}, invalidToken("'none' is a blocked algorithm: an unsigned token is refused when a JWKS is configured")
	}
	a, ok := jwsAlgs[t.alg]
	if !ok {
		return Token{}, invalidToken("JWS algorithm %q is not offered (RS256, RS384, RS512, ES256, ES384, ES512)", clip(t.alg))
	}
	if err := v.verify(t, a); err != nil {
		return Token{}, err
	}
	exp, _, ok, err := t.numericDate("exp")
	if err != nil {
		return Token{}, err
	}
	if !ok {
		return Token{}, invalidToken("No Expiration Time (exp) claim present.")
	}
	if _, _, ok, err := t.numericDate("iat"); err != nil || !ok {
		if err != nil {
			return Token{}, err
		}
		return Token{}, invalidToken("No Issued At (iat) claim present.")
	}
	now := v.now()
	leeway := int64(v.skew / time.Second)
	if !now.Before(exp.Add(v.skew)) {
		return Token{}, invalidToken("The JWT is no longer valid - the evaluation time %s is on or after the Expiration Time (exp=%s) claim value (even when providing %d seconds of leeway to account for clock skew).",
			now.UTC().Format(time.RFC3339), exp.UTC().Format(time.RFC3339), leeway)
	}
	nbf, _, ok, err := t.numericDate("nbf")
	if err != nil {
		return Token{}, err
	}
	if ok && now.Add(v.skew).Before(nbf) {
		return Token{}, invalidToken("The JWT is not yet valid as the evaluation time %s is before the Not Before (nbf=%s) claim time (even when providing %d seconds of leeway to account for clock skew).",
			now.UTC().Format(time.RFC3339), nbf.UTC().Format(time.RFC3339), leeway)
	}
	if v.issuer != "" {
		iss, ok, err := t.stringClaim("iss")
		if err != nil {
			return Token{}, err
		}
		if !ok {
			return Token{}, invalidToken("No Issuer (iss) claim present but was expecting %s", v.issuer)
		}
		if iss != v.issuer {
			return Token{}, invalidToken("Issuer (iss) claim value (%s) doesn't match expected value of %s", clip(iss), v.issuer)
		}
	}
	if err := v.checkAudience(t); err != nil {
		return Token{}, err
	}
	sub, _, err := t.stringClaim(v.subClaim)
	if err != nil {
		return Token{}, invalidToken("Could not extract the '%s' claim from the access token", v.subClaim)
	}
	if sub == "" {
		return Token{}, invalidToken("%s value must be non-null", v.subClaim)
	}
	if trimmedEmpty(sub) {
		return Token{}, invalidToken("%s value must not contain only whitespace", v.subClaim)
	}
	scope, err := v.scope(t)
	if err != nil {
		return Token{}, err
	}
	return Token{Principal: sub, Expiry: exp, Scope: scope}, nil
}

// verify finds the token's key and checks its signature. With a kid, the
// key of that kid; without, any key that fits the algorithm (jose4j's
// VerificationJwkSelector tries each).
func (v *jwksValidator) verify(t *jwt, a jwsAlg) error {
	for _, force := range []bool{false, true} {
		found := 0
		for i, keys := 0, v.keys.get(force); i < len(keys) && found < jwsTriesMax; i++ {
			k := &keys[i]
			if (t.kid != "" && k.kid != t.kid) || !k.fits(t.alg, a) {
				continue
			}
			found++
			if k.verify(a, t.signingInput, t.signature) {
				return nil
			}
		}
		if found > 0 {
			return invalidToken("JWT rejected due to invalid signature (JWS header %s).", clip(string(t.header)))
		}
	}
	return invalidToken("Unable to find a suitable verification key for JWS w/ header %s from JWKs obtained from %s",
		clip(string(t.header)), v.keys.url)
}

// checkAudience is jose4j's default audience check, which Kafka keeps:
// with expected audiences, aud must name one; without, a token that has
// an aud at all is refused (RFC 7519 section 4.1.3: a recipient that
// does not identify itself with a value of aud must reject the token).
func (v *jwksValidator) checkAudience(t *jwt) error {
	aud, ok, err := t.stringsClaim("aud")
	if err != nil {
		return err
	}
	if !ok {
		if len(v.audience) > 0 {
			return invalidToken("No Audience (aud) claim present.")
		}
		return nil
	}
	for _, a := range aud {
		if contains(v.audience, a) {
			return nil
		}
	}
	want := "one of " + javaList(v.audience)
	if len(v.audience) == 1 {
		want = v.audience[0]
	}
	if len(v.audience) == 0 {
		return invalidToken("Audience (aud) claim %s present in the JWT but no expected audience value(s) were provided to the JWT Consumer. Expected %s as an aud value.",
			clip(javaList(aud)), want)
	}
	return invalidToken("Audience (aud) claim %s doesn't contain an acceptable identifier. Expected %s as an aud value.", clip(javaList(aud)), want)
}

// scope checks the scope claim as Kafka's ClaimValidationUtils does: a
// string is one value, a list several, none blank or repeated.
func (v *jwksValidator) scope(t *jwt) ([]string, error) {
	l, _, err := t.stringsClaim(v.scopeClaim)
	if err != nil {
		return nil, invalidToken("Could not extract the '%s' claim from the access token", v.scopeClaim)
	}
	// A map, not a scan, for duplicates: the list is as long as the
	// client makes it.
	var scope []string
	seen := map[string]bool{}
	for _, s := range l {
		if s == "" {
			return nil, invalidToken("%s value must be non-empty", v.scopeClaim)
		}
		if trimmedEmpty(s) {
			return nil, invalidToken("%s value must not contain only whitespace", v.scopeClaim)
		}
		s = strings.TrimSpace(s)
		if seen[s] {
			return nil, invalidToken("%s value must not contain duplicates - %s already present", v.scopeClaim, clip(s))
		}
		seen[s] = true
		scope = append(scope, s)
	}
	return scope, nil
}

func trimmedEmpty(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] > ' ' {
			return false
		}
	}
	return true
}
