package testkit

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"os"
	"testing"
)

var b64 = base64.RawURLEncoding.EncodeToString

// SignJWT makes a JWT in the JWS compact serialization (RFC 7515) of
// claims, signed with key: an *rsa.PrivateKey for RS256, RS384, RS512, an
// *ecdsa.PrivateKey for ES256, ES384, ES512 (R || S, RFC 7518 section
// 3.4), or nil for an unsigned token whatever alg says. kid, when not
// empty, goes in the header.
func SignJWT(t testing.TB, alg, kid string, key any, claims map[string]any) string {
	t.Helper()
	h := map[string]any{"alg": alg, "typ": "JWT"}
	if kid != "" {
		h["kid"] = kid
	}
	hb, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	input := b64(hb) + "." + b64(cb)
	if key == nil {
		return input + "."
	}
	var hash crypto.Hash
	var digest []byte
	switch alg[len(alg)-3:] {
	case "256":
		d := sha256.Sum256([]byte(input))
		hash, digest = crypto.SHA256, d[:]
	case "384":
		d := sha512.Sum384([]byte(input))
		hash, digest = crypto.SHA384, d[:]
	default:
		d := sha512.Sum512([]byte(input))
		hash, digest = crypto.SHA512, d[:]
	}
	var sig []byte
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if sig, err = rsa.SignPKCS1v15(rand.Reader, k, hash, digest); err != nil {
			t.Fatal(err)
		}
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, k, digest)
		if err != nil {
			t.Fatal(err)
		}
		size := (k.Curve.Params().BitSize + 7) / 8
		sig = make([]byte, 2*size)
		r.FillBytes(sig[:size])
		s.FillBytes(sig[size:])
	default:
		t.Fatalf("testkit: a JWT signing key of type %T", key)
	}
	return input + "." + b64(sig)
}

// RSAJWK is an RSA public key as a JWK (RFC 7517, RFC 7518 section 6.3).
func RSAJWK(kid string, k *rsa.PublicKey) map[string]any {
	e := []byte{byte(k.E >> 24), byte(k.E >> 16), byte(k.E >> 8), byte(k.E)}
	for len(e) > 1 && e[0] == 0 {
		e = e[1:]
	}
	return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "n": b64(k.N.Bytes()), "e": b64(e)}
}

// ECJWK is an EC public key as a JWK (RFC 7518 section 6.2).
func ECJWK(t testing.TB, kid string, k *ecdsa.PublicKey) map[string]any {
	t.Helper()
	b, err := k.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	size := (len(b) - 1) / 2
	crv := map[int]string{32: "P-256", 48: "P-384", 66: "P-521"}[size]
	return map[string]any{"kty": "EC", "kid": kid, "crv": crv, "x": b64(b[1 : 1+size]), "y": b64(b[1+size:])}
}

// WriteJWKS writes a JWK Set of keys to path and returns its file: URL,
// what sasl.oauthbearer.jwks.endpoint.url takes.
func WriteJWKS(t testing.TB, path string, keys ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return "file://" + path
}
