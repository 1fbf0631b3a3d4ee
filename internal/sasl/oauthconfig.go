package sasl

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// OAuthConfig is how a listener validates OAUTHBEARER tokens, with
// Kafka's two server callback handlers:
//
//   - with JWKSURL, OAuthBearerValidatorCallbackHandler (KIP-768): a JWT
//     signed with a key of the JWKS, checked against the expected issuer
//     and audience;
//   - without, Kafka's default OAuthBearerUnsecuredValidatorCallbackHandler
//     (KIP-255): an unsigned JWT, believed. For development only.
type OAuthConfig struct {
	// JWKSURL is sasl.oauthbearer.jwks.endpoint.url. Only a file: URL
	// is served; the file is read again when it changes.
	JWKSURL string
	// ExpectedIssuer is sasl.oauthbearer.expected.issuer (empty: iss is
	// not checked).
	ExpectedIssuer string
	// ExpectedAudience is sasl.oauthbearer.expected.audience. Empty, a
	// token with an aud claim is refused, as Kafka (jose4j) refuses it.
	ExpectedAudience []string
	// ClockSkew is sasl.oauthbearer.clock.skew.seconds: the leeway on exp
	// and nbf. Zero is none; Kafka's default is OAuthClockSkewDefault.
	ClockSkew time.Duration
	// SubClaimName and ScopeClaimName are sasl.oauthbearer.sub.claim.name
	// and sasl.oauthbearer.scope.claim.name (empty: sub, scope).
	SubClaimName   string
	ScopeClaimName string

	// Unsecured holds the unsecured validator's options, the
	// unsecuredValidator* options of the listener's OAuthBearerLoginModule
	// JAAS entry.
	Unsecured UnsecuredOptions

	// Now is the clock (nil: time.Now), for tests.
	Now func() time.Time
}

// UnsecuredOptions are the options of Kafka's unsecured validator.
type UnsecuredOptions struct {
	// PrincipalClaimName is unsecuredValidatorPrincipalClaimName (empty: sub).
	PrincipalClaimName string
	// ScopeClaimName is unsecuredValidatorScopeClaimName (empty: scope).
	ScopeClaimName string
	// RequiredScope is unsecuredValidatorRequiredScope, space-separated
	// in the JAAS option: each must be in the token's scope.
	RequiredScope []string
	// AllowableClockSkew is unsecuredValidatorAllowableClockSkewMs (default 0).
	AllowableClockSkew time.Duration
}

// OAuthClockSkewDefault is sasl.oauthbearer.clock.skew.seconds' default.
const OAuthClockSkewDefault = 30 * time.Second

// Secured reports whether tokens are checked against a JWKS.
func (c *OAuthConfig) Secured() bool { return c.JWKSURL != "" }

// Empty reports whether nothing is set: Kafka's default.
func (c *OAuthConfig) Empty() bool {
	u := c.Unsecured
	return c.JWKSURL == "" && c.ExpectedIssuer == "" && len(c.ExpectedAudience) == 0 && c.ClockSkew == 0 &&
		c.SubClaimName == "" && c.ScopeClaimName == "" && u.PrincipalClaimName == "" && u.ScopeClaimName == "" &&
		len(u.RequiredScope) == 0 && u.AllowableClockSkew == 0
}

// Check vets the configuration without reading the JWKS, so that a
// listener's settings are refused before anything starts.
func (c *OAuthConfig) Check() error {
	if c.ClockSkew < 0 || c.Unsecured.AllowableClockSkew < 0 {
		return fmt.Errorf("sasl: OAUTHBEARER: a negative clock skew")
	}
	if !c.Secured() {
		// Kafka would ignore these without its validating handler; a
		// broker that looks as if it checked issuers and does not is
		// worse than one that refuses to start.
		if c.ExpectedIssuer != "" || len(c.ExpectedAudience) > 0 {
			return fmt.Errorf("sasl: OAUTHBEARER: sasl.oauthbearer.expected.issuer and expected.audience are checked only with a JWKS (sasl.oauthbearer.jwks.endpoint.url)")
		}
		return nil
	}
	if len(c.Unsecured.RequiredScope) > 0 {
		return fmt.Errorf("sasl: OAUTHBEARER: unsecuredValidatorRequiredScope applies to the unsecured validator, not to tokens checked against a JWKS")
	}
	_, err := jwksPath(c.JWKSURL)
	return err
}

// jwksPath is the file of a file: JWKS URL.
func jwksPath(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("sasl: sasl.oauthbearer.jwks.endpoint.url=%s: %w", raw, err)
	}
	if u.Scheme != "file" {
		return "", fmt.Errorf("sasl: sasl.oauthbearer.jwks.endpoint.url=%s: only a file: URL is served (ringlog fetches nothing over the network)", raw)
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("sasl: sasl.oauthbearer.jwks.endpoint.url=%s: a file: URL on another host", raw)
	}
	p := u.Path
	if p == "" {
		p = u.Opaque // file:relative/path
	}
	if p == "" {
		return "", fmt.Errorf("sasl: sasl.oauthbearer.jwks.endpoint.url=%s: no file path", raw)
	}
	return p, nil
}

// NewOAuthValidator makes the configuration's validator. With a JWKS it
// reads the file, which must hold a usable key.
func NewOAuthValidator(c OAuthConfig) (TokenValidator, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	now := c.Now
	if now == nil {
		now = time.Now
	}
	if !c.Secured() {
		u := c.Unsecured
		return &unsecuredValidator{
			principalClaim: orDefault(u.PrincipalClaimName, "sub"),
			scopeClaim:     orDefault(u.ScopeClaimName, "scope"),
			requiredScope:  u.RequiredScope,
			skew:           u.AllowableClockSkew,
			now:            now,
		}, nil
	}
	path, _ := jwksPath(c.JWKSURL)
	f, err := openJWKSFile(c.JWKSURL, path, now)
	if err != nil {
		return nil, err
	}
	return &jwksValidator{
		keys:       f,
		issuer:     c.ExpectedIssuer,
		audience:   c.ExpectedAudience,
		skew:       c.ClockSkew,
		subClaim:   orDefault(c.SubClaimName, "sub"),
		scopeClaim: orDefault(c.ScopeClaimName, "scope"),
		now:        now,
	}, nil
}

func orDefault(s, def string) string {
	if s = strings.TrimSpace(s); s != "" {
		return s
	}
	return def
}
