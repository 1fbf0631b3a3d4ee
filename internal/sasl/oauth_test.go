package sasl

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"ringlog/internal/testkit"
)

// The test keys, generated once per test binary.
var (
	keysOnce           sync.Once
	rsaKey, rsaOther   *rsa.PrivateKey
	ecKey256, ecKey384 *ecdsa.PrivateKey
	ecKey521           *ecdsa.PrivateKey
	testNow            = time.Unix(1_800_000_000, 0)
	testNowFn          = func() time.Time { return testNow }
	b64                = base64.RawURLEncoding.EncodeToString
)

func testKeys(t testing.TB) {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if rsaOther, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		for _, k := range []struct {
			c elliptic.Curve
			p **ecdsa.PrivateKey
		}{{elliptic.P256(), &ecKey256}, {elliptic.P384(), &ecKey384}, {elliptic.P521(), &ecKey521}} {
			if *k.p, err = ecdsa.GenerateKey(k.c, rand.Reader); err != nil {
				panic(err)
			}
		}
	})
}

// claims are a valid token's claims at testNow, with changes.
func claims(change map[string]any) map[string]any {
	c := map[string]any{"sub": "alice", "iss": "https://idp.example", "aud": "ringlog",
		"iat": testNow.Unix() - 60, "exp": testNow.Unix() + 3600, "scope": "kafka"}
	for k, v := range change {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func jwksTestValidator(t *testing.T) TokenValidator {
	t.Helper()
	testKeys(t)
	url := testkit.WriteJWKS(t, filepath.Join(t.TempDir(), "jwks.json"),
		testkit.RSAJWK("rsa1", &rsaKey.PublicKey), testkit.ECJWK(t, "ec256", &ecKey256.PublicKey),
		testkit.ECJWK(t, "ec384", &ecKey384.PublicKey), testkit.ECJWK(t, "ec521", &ecKey521.PublicKey),
		map[string]any{"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"}) // skipped: not offered
	v, err := NewOAuthValidator(OAuthConfig{JWKSURL: url, ExpectedIssuer: "https://idp.example",
		ExpectedAudience: []string{"other", "ringlog"}, ClockSkew: OAuthClockSkewDefault, Now: testNowFn})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestJWKSValidation: the checks of Kafka's OAuthBearerValidatorCallbackHandler,
// each failure with a reason that says which.
func TestJWKSValidation(t *testing.T) {
	v := jwksTestValidator(t)
	for _, tc := range []struct {
		name, alg, kid string
		key            any
		change         map[string]any
		err            string // "" for a valid token
	}{
		{"RS256", "RS256", "rsa1", rsaKey, nil, ""},
		{"RS384", "RS384", "rsa1", rsaKey, nil, ""},
		{"RS512 without kid", "RS512", "", rsaKey, nil, ""},
		{"ES256", "ES256", "ec256", ecKey256, nil, ""},
		{"ES384", "ES384", "ec384", ecKey384, nil, ""},
		{"ES512", "ES512", "ec521", ecKey521, nil, ""},
		{"aud a list", "RS256", "rsa1", rsaKey, map[string]any{"aud": []string{"x", "ringlog"}}, ""},
		{"scope a list", "RS256", "rsa1", rsaKey, map[string]any{"scope": []string{"a", "b"}}, ""},
		{"expired within the clock skew", "RS256", "rsa1", rsaKey, map[string]any{"exp": testNow.Unix() - 20}, ""},
		{"expired", "RS256", "rsa1", rsaKey, map[string]any{"exp": testNow.Unix() - 31}, "The JWT is no longer valid"},
		{"nbf in the future", "RS256", "rsa1", rsaKey, map[string]any{"nbf": testNow.Unix() + 31}, "The JWT is not yet valid"},
		{"nbf within the clock skew", "RS256", "rsa1", rsaKey, map[string]any{"nbf": testNow.Unix() + 29}, ""},
		{"no exp", "RS256", "rsa1", rsaKey, map[string]any{"exp": nil}, "No Expiration Time (exp) claim present."},
		{"no iat", "RS256", "rsa1", rsaKey, map[string]any{"iat": nil}, "No Issued At (iat) claim present."},
		{"exp a string", "RS256", "rsa1", rsaKey, map[string]any{"exp": "soon"}, "'exp' claim was not of type Number"},
		{"wrong iss", "RS256", "rsa1", rsaKey, map[string]any{"iss": "https://evil.example"}, "Issuer (iss) claim value (https://evil.example) doesn't match expected value of https://idp.example"},
		{"no iss", "RS256", "rsa1", rsaKey, map[string]any{"iss": nil}, "No Issuer (iss) claim present"},
		{"wrong aud", "RS256", "rsa1", rsaKey, map[string]any{"aud": "billing"}, "Audience (aud) claim [billing] doesn't contain an acceptable identifier. Expected one of [other, ringlog]"},
		{"no aud", "RS256", "rsa1", rsaKey, map[string]any{"aud": nil}, "No Audience (aud) claim present."},
		{"bad signature", "RS256", "rsa1", rsaOther, nil, "JWT rejected due to invalid signature"},
		{"EC signature under the RSA kid", "ES256", "rsa1", ecKey256, nil, "Unable to find a suitable verification key"},
		{"unknown kid", "RS256", "rsa9", rsaKey, nil, "Unable to find a suitable verification key for JWS w/ header"},
		{"alg none", "none", "rsa1", nil, nil, "'none' is a blocked algorithm"},
		{"HS256", "HS256", "hmac", nil, nil, `JWS algorithm "HS256" is not offered`},
		{"no sub", "RS256", "rsa1", rsaKey, map[string]any{"sub": nil}, "sub value must be non-null"},
		{"blank sub", "RS256", "rsa1", rsaKey, map[string]any{"sub": "  "}, "sub value must not contain only whitespace"},
		{"sub a number", "RS256", "rsa1", rsaKey, map[string]any{"sub": 7}, "Could not extract the 'sub' claim"},
		{"duplicate scope", "RS256", "rsa1", rsaKey, map[string]any{"scope": []string{"a", "a"}}, "scope value must not contain duplicates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := v.Validate(testkit.SignJWT(t, tc.alg, tc.kid, tc.key, claims(tc.change)))
			if tc.err == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if tok.Principal != "alice" || !tok.Expiry.Equal(time.Unix(claims(tc.change)["exp"].(int64), 0)) {
					t.Fatalf("token %+v", tok)
				}
				return
			}
			var te *TokenError
			if !errors.As(err, &te) || te.Status != "invalid_token" || !errors.Is(err, ErrAuthentication) {
				t.Fatalf("err %v, want an invalid_token TokenError", err)
			}
			if !strings.Contains(te.Reason, tc.err) || !strings.HasPrefix(te.Reason, "Could not validate the access token: ") {
				t.Fatalf("reason %q, want it to say %q", te.Reason, tc.err)
			}
		})
	}
}

// TestJWKSAudienceUnexpected: without expected.audience, a token with an
// aud claim is refused, as jose4j's default check in Kafka refuses it;
// one without aud passes.
func TestJWKSAudienceUnexpected(t *testing.T) {
	testKeys(t)
	url := testkit.WriteJWKS(t, filepath.Join(t.TempDir(), "jwks.json"), testkit.RSAJWK("k", &rsaKey.PublicKey))
	v, err := NewOAuthValidator(OAuthConfig{JWKSURL: url, Now: testNowFn})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Validate(testkit.SignJWT(t, "RS256", "k", rsaKey, claims(map[string]any{"aud": nil}))); err != nil {
		t.Fatalf("no aud: %v", err)
	}
	_, err = v.Validate(testkit.SignJWT(t, "RS256", "k", rsaKey, claims(nil)))
	if err == nil || !strings.Contains(err.Error(), "present in the JWT but no expected audience value(s) were provided") {
		t.Fatalf("aud, none expected: %v", err)
	}
}

// TestJWKSFileReload: a key added to the file is used once the file is
// checked again (a token with an unknown kid asks for the check sooner);
// a file that stops parsing leaves the last good keys in use.
func TestJWKSFileReload(t *testing.T) {
	testKeys(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	url := testkit.WriteJWKS(t, path, testkit.RSAJWK("old", &rsaKey.PublicKey))
	now := testNow
	v, err := NewOAuthValidator(OAuthConfig{JWKSURL: url, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	newTok := testkit.SignJWT(t, "RS256", "new", rsaOther, claims(map[string]any{"aud": nil}))
	if _, err := v.Validate(newTok); err == nil {
		t.Fatal("a key not yet in the file")
	}
	testkit.WriteJWKS(t, path, testkit.RSAJWK("old", &rsaKey.PublicKey), testkit.RSAJWK("new", &rsaOther.PublicKey), map[string]any{"pad": "size changes"})
	if _, err := v.Validate(newTok); err == nil {
		t.Fatal("the file was checked again at once")
	}
	now = now.Add(jwksForceEvery)
	if _, err := v.Validate(newTok); err != nil {
		t.Fatalf("the new key after the file changed: %v", err)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(jwksCheckEvery)
	if _, err := v.Validate(newTok); err != nil {
		t.Fatalf("a broken file dropped the keys: %v", err)
	}
}

// TestUnsecuredValidation: Kafka's default validator, for unsigned
// tokens, with its JAAS options.
func TestUnsecuredValidation(t *testing.T) {
	testKeys(t)
	base := UnsecuredOptions{}
	for _, tc := range []struct {
		name   string
		opts   UnsecuredOptions
		alg    string
		key    any
		change map[string]any
		err    string
		status string
	}{
		{"good", base, "none", nil, nil, "", ""},
		{"expired", base, "none", nil, map[string]any{"exp": testNow.Unix()}, "was on or after the Expiration Time value", ""},
		{"expired within the skew", UnsecuredOptions{AllowableClockSkew: 2 * time.Second}, "none", nil, map[string]any{"exp": testNow.Unix() - 1}, "", ""},
		{"no exp", base, "none", nil, map[string]any{"exp": nil}, "No expiration time in JWT", ""},
		{"iat in the future", base, "none", nil, map[string]any{"iat": testNow.Unix() + 5}, "The Issued At value", ""},
		{"nbf in the future", base, "none", nil, map[string]any{"nbf": testNow.Unix() + 5}, "The Not Before value", ""},
		{"exp before iat", UnsecuredOptions{AllowableClockSkew: time.Hour}, "none", nil,
			map[string]any{"iat": testNow.Unix() + 60, "exp": testNow.Unix() + 30}, "was not after the Issued At time", ""},
		{"no sub", base, "none", nil, map[string]any{"sub": nil}, "No principal name in JWT claim: sub", ""},
		{"principal claim", UnsecuredOptions{PrincipalClaimName: "email"}, "none", nil, map[string]any{"sub": nil, "email": "alice"}, "", ""},
		{"principal claim missing", UnsecuredOptions{PrincipalClaimName: "email"}, "none", nil, nil, "No principal name in JWT claim: email", ""},
		{"required scope", UnsecuredOptions{RequiredScope: []string{"kafka"}}, "none", nil, nil, "", ""},
		{"required scope in a list", UnsecuredOptions{RequiredScope: []string{"b", "a"}}, "none", nil, map[string]any{"scope": []string{"a", "b", "c"}}, "", ""},
		{"scope missing", UnsecuredOptions{RequiredScope: []string{"kafka", "admin"}}, "none", nil, nil,
			"The provided scope ([kafka]) was missing a required scope (admin).  All required scope elements: [kafka, admin]", "insufficient_scope"},
		{"no scope claim", UnsecuredOptions{RequiredScope: []string{"kafka"}}, "none", nil, map[string]any{"scope": nil}, "missing a required scope (kafka)", "insufficient_scope"},
		{"scope claim name", UnsecuredOptions{ScopeClaimName: "scp", RequiredScope: []string{"kafka"}}, "none", nil, map[string]any{"scope": nil, "scp": []string{"kafka"}}, "", ""},
		{"signed", base, "RS256", rsaKey, nil, "Unsecured JWS must have 'none' for an algorithm", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := NewOAuthValidator(OAuthConfig{Unsecured: tc.opts, Now: testNowFn})
			if err != nil {
				t.Fatal(err)
			}
			tok, err := v.Validate(testkit.SignJWT(t, tc.alg, "", tc.key, claims(tc.change)))
			if tc.err == "" {
				if err != nil || tok.Principal != "alice" {
					t.Fatalf("refused: %v (%+v)", err, tok)
				}
				return
			}
			var te *TokenError
			if !errors.As(err, &te) || !strings.Contains(te.Reason, tc.err) {
				t.Fatalf("err %v, want it to say %q", err, tc.err)
			}
			if want := cmpOr(tc.status, "invalid_token"); te.Status != want {
				t.Fatalf("status %q, want %q", te.Status, want)
			}
		})
	}
	v, _ := NewOAuthValidator(OAuthConfig{Now: testNowFn})
	// Header member names are exact: {"ALG":"none"} has no alg
	// (encoding/json would match a struct field without regard to case;
	// the fuzzer found that).
	cb, _ := json.Marshal(claims(nil))
	if _, err := v.Validate(b64([]byte(`{"ALG":"none"}`)) + "." + b64(cb) + "."); err == nil || !strings.Contains(err.Error(), "must have an Algorithm") {
		t.Fatalf("a header with ALG: %v", err)
	}
	// A signature on an unsecured token.
	tok := testkit.SignJWT(t, "none", "", nil, claims(nil)) + "c2ln"
	if _, err := v.Validate(tok); err == nil || !strings.Contains(err.Error(), "must not contain a digital signature") {
		t.Fatalf("a signed unsecured token: %v", err)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestOAuthBearerWithFranzGoClient: franz-go's OAUTHBEARER client against
// the server: a valid token authenticates with its extensions recorded;
// a refused one gets Kafka's JSON error challenge, answers %x01, and the
// exchange then fails with the JSON as the client's message.
func TestOAuthBearerWithFranzGoClient(t *testing.T) {
	v := jwksTestValidator(t)
	good := testkit.SignJWT(t, "ES256", "ec256", ecKey256, claims(nil))
	s := NewOAuthBearerServer(v)
	if err := run(t, oauth.Auth{Token: good, Extensions: map[string]string{"traceId": "x y", "logicalCluster": "lc-1"}}.AsMechanism(), s); err != nil {
		t.Fatalf("a valid token: %v", err)
	}
	if s.User() != "alice" || !s.(CredentialExpirer).CredentialExpiry().Equal(testNow.Add(time.Hour)) {
		t.Fatalf("user %q, expiry %v", s.User(), s.(CredentialExpirer).CredentialExpiry())
	}
	if ext := s.(*oauthServer).Extensions(); ext["traceId"] != "x y" || ext["logicalCluster"] != "lc-1" || len(ext) != 2 {
		t.Fatalf("extensions %v", ext)
	}
	if err := run(t, oauth.Auth{Zid: "alice", Token: good}.AsMechanism(), NewOAuthBearerServer(v)); err != nil {
		t.Fatalf("the principal as the authorization id: %v", err)
	}
	err := run(t, oauth.Auth{Zid: "bob", Token: good}.AsMechanism(), NewOAuthBearerServer(v))
	var ce *ClientError
	if !errors.As(err, &ce) || !errors.Is(err, ErrAuthentication) || !strings.Contains(ce.Message, "Client requested an authorization id (bob)") {
		t.Fatalf("another authorization id: %v", err)
	}

	expired := testkit.SignJWT(t, "RS256", "rsa1", rsaKey, claims(map[string]any{"exp": testNow.Unix() - 3600}))
	s = NewOAuthBearerServer(v)
	out, done, err := s.Step([]byte("n,,\x01auth=Bearer " + expired + "\x01\x01"))
	if err != nil || done || string(out) != `{"status":"invalid_token"}` {
		t.Fatalf("an expired token: %q %v %v, want the JSON error challenge", out, done, err)
	}
	err = run(t, oauth.Auth{Token: expired}.AsMechanism(), NewOAuthBearerServer(v))
	if !errors.As(err, &ce) || !errors.Is(err, ErrAuthentication) || ce.Message != `{"status":"invalid_token"}` ||
		!strings.Contains(err.Error(), "The JWT is no longer valid") {
		t.Fatalf("an expired token through the client: %v", err)
	}

	// insufficient_scope carries the scope.
	uv, _ := NewOAuthValidator(OAuthConfig{Unsecured: UnsecuredOptions{RequiredScope: []string{"admin"}}, Now: testNowFn})
	out, _, _ = NewOAuthBearerServer(uv).Step([]byte("n,,\x01auth=Bearer " + testkit.SignJWT(t, "none", "", nil, claims(nil)) + "\x01\x01"))
	if string(out) != `{"scope":"[admin]","status":"insufficient_scope"}` {
		t.Fatalf("insufficient scope challenge %s", out)
	}
}

// TestOAuthBearerMalformed: messages outside Kafka's grammar, and a
// second message other than %x01 after an error, are protocol errors.
func TestOAuthBearerMalformed(t *testing.T) {
	v, _ := NewOAuthValidator(OAuthConfig{Now: testNowFn})
	tok := testkit.SignJWT(t, "none", "", nil, claims(nil))
	if _, done, err := NewOAuthBearerServer(v).Step([]byte("n,,\x01auth=bearer  " + tok + "\x01k=v\x01\x01")); err != nil || !done {
		t.Fatalf("a valid message: %v", err)
	}
	many := "n,,\x01auth=Bearer " + tok + "\x01"
	for i := range oauthExtensionsMax + 1 {
		many += "k" + strings.Repeat("a", i) + "=v\x01"
	}
	many += "\x01"
	for _, msg := range []string{"", "n,,", "y,,\x01auth=Bearer " + tok + "\x01\x01", "n,\x01auth=Bearer " + tok + "\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01", "n,,auth=Bearer " + tok + "\x01\x01", "n,,\x01\x01", "n,,\x01k=v\x01\x01",
		"n,,\x01auth=Basic " + tok + "\x01\x01", "n,,\x01auth=Bearer\x01\x01", "n,,\x01auth=Bearer a/b\x01\x01",
		"n,,\x01auth=Bearer " + tok + "\x01k1=v\x01\x01", "n,,\x01auth=Bearer " + tok + "\x01k=\x01\x01",
		"n,a=x,y,\x01auth=Bearer " + tok + "\x01\x01", many,
		"n,,\x01auth=Bearer " + tok + "\x01k=" + strings.Repeat("v", oauthExtensionBytesMax) + "\x01\x01"} {
		if _, _, err := NewOAuthBearerServer(v).Step([]byte(msg)); !errors.Is(err, ErrProtocol) {
			t.Errorf("%q: %v, want ErrProtocol", clip(msg), err)
		}
	}
	s := NewOAuthBearerServer(v)
	if out, _, _ := s.Step([]byte("n,,\x01auth=Bearer e30.e30.\x01\x01")); len(out) == 0 {
		t.Fatal("no error challenge")
	}
	if _, _, err := s.Step([]byte("n,,\x01auth=Bearer " + tok + "\x01\x01")); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a second token after an error: %v", err)
	}
}

// TestJWKSParse: keys that cannot be used are skipped, a set without any
// is refused.
func TestJWKSParse(t *testing.T) {
	testKeys(t)
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	enc := testkit.RSAJWK("enc", &rsaKey.PublicKey)
	enc["use"] = "enc"
	offCurve := testkit.ECJWK(t, "off", &ecKey256.PublicKey)
	offCurve["y"] = offCurve["x"]
	for _, keys := range [][]map[string]any{{testkit.RSAJWK("small", &small.PublicKey)}, {enc}, {offCurve}, {{"kty": "OKP", "crv": "Ed25519", "x": "AA"}}, {}} {
		b, _ := json.Marshal(map[string]any{"keys": keys})
		if _, err := parseJWKS(b); err == nil {
			t.Errorf("%s: accepted", b)
		}
	}
	for _, b := range []string{"", "[]", `{"keys":{}}`, `{"keys":[]} x`} {
		if _, err := parseJWKS([]byte(b)); err == nil {
			t.Errorf("%q: accepted", b)
		}
	}
	if err := (&OAuthConfig{JWKSURL: "https://idp.example/jwks"}).Check(); err == nil {
		t.Error("an https JWKS URL")
	}
	if err := (&OAuthConfig{ExpectedIssuer: "x"}).Check(); err == nil {
		t.Error("an expected issuer without a JWKS")
	}
}

// FuzzOAuthBearerMessage: any first and second client message never
// panic, authenticate only as the principal of a token the validator
// accepts, and never after an error challenge.
func FuzzOAuthBearerMessage(f *testing.F) {
	valid := testkit.SignJWT(f, "none", "", nil, claims(nil))
	f.Add([]byte("n,,\x01auth=Bearer "+valid+"\x01\x01"), []byte{1})
	f.Add([]byte("n,a=alice,\x01auth=Bearer "+valid+"\x01traceId=x\x01\x01"), []byte{1})
	f.Add([]byte("n,,\x01auth=Bearer e30.e30.\x01\x01"), []byte{1})
	f.Add([]byte("n,a=b=2C,\x01auth=Bearer a.b.c\x01k=v\x01k=w\x01\x01"), []byte("n,,\x01\x01"))
	v, _ := NewOAuthValidator(OAuthConfig{Now: testNowFn})
	f.Fuzz(func(t *testing.T, first, second []byte) {
		s := NewOAuthBearerServer(v)
		out, done, err := s.Step(first)
		if done {
			// Unsecured tokens are forgeable by design: what must hold
			// is that the principal is the token's, as the validator
			// reads it on its own.
			f, perr := parseOAuthFirst(first)
			tok, verr := v.Validate(f.token)
			if err != nil || perr != nil || verr != nil || s.User() == "" || s.User() != tok.Principal {
				t.Fatalf("authenticated %q as %q: %v %v %v", first, s.User(), err, perr, verr)
			}
			return
		}
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("challenge %q is not JSON", out)
		}
		if _, done, err := s.Step(second); done || err == nil {
			t.Fatalf("authenticated after an error: %q %q", first, second)
		}
	})
}

// FuzzJWT: any token and JWKS never panic; a JWKS never yields more keys
// than its bytes can hold; a token validated against the test key has
// the claims it must have.
func FuzzJWT(f *testing.F) {
	testKeys(f)
	path := filepath.Join(f.TempDir(), "jwks.json")
	url := testkit.WriteJWKS(f, path, testkit.RSAJWK("rsa1", &rsaKey.PublicKey), testkit.ECJWK(f, "ec256", &ecKey256.PublicKey))
	seedJWKS, _ := os.ReadFile(path)
	v, err := NewOAuthValidator(OAuthConfig{JWKSURL: url, ClockSkew: OAuthClockSkewDefault, Now: testNowFn})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(testkit.SignJWT(f, "RS256", "rsa1", rsaKey, claims(map[string]any{"aud": nil, "iss": nil})), seedJWKS)
	f.Add(testkit.SignJWT(f, "ES256", "ec256", ecKey256, claims(map[string]any{"aud": nil, "iss": nil})), seedJWKS)
	f.Add(testkit.SignJWT(f, "none", "", nil, claims(nil)), []byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}`))
	f.Add("eyJhbGciOiJSUzI1NiJ9.e30.AAAA", []byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`))
	f.Fuzz(func(t *testing.T, token string, jwks []byte) {
		if keys, err := parseJWKS(jwks); err == nil && len(keys) > len(jwks)/16 {
			t.Fatalf("%d keys from %d bytes", len(keys), len(jwks))
		}
		tok, err := v.Validate(token)
		if err != nil {
			var te *TokenError
			if !errors.As(err, &te) {
				t.Fatalf("an error that is not a TokenError: %v", err)
			}
			return
		}
		if tok.Principal == "" || !tok.Expiry.After(testNow.Add(-OAuthClockSkewDefault)) {
			t.Fatalf("accepted %q as %+v", token, tok)
		}
		if _, err := (&unsecuredValidator{principalClaim: "sub", scopeClaim: "scope", now: testNowFn}).Validate(token); err == nil {
			t.Fatalf("%q is both signed and unsecured", token)
		}
	})
}
