package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"ringlog/internal/sasl"
)

// Kafka's OAUTHBEARER settings for a broker (KIP-255, KIP-768). The
// validator is chosen as Kafka chooses it, by
// listener.name.<name>.oauthbearer.sasl.server.callback.handler.class:
// unset, the unsecured one (Kafka's default); OAuthBearerValidatorCallbackHandler,
// signed tokens checked against sasl.oauthbearer.jwks.endpoint.url.

// oauthKeys are the sasl.oauthbearer.* settings read. Each may be set
// globally, for a listener (listener.name.<name>.<key>) or for a
// listener's OAUTHBEARER (listener.name.<name>.oauthbearer.<key>), the
// most specific winning, as Kafka's ConfigurationUtils looks them up.
var oauthKeys = map[string]bool{
	"sasl.oauthbearer.jwks.endpoint.url":  true,
	"sasl.oauthbearer.expected.issuer":    true,
	"sasl.oauthbearer.expected.audience":  true,
	"sasl.oauthbearer.clock.skew.seconds": true,
	"sasl.oauthbearer.sub.claim.name":     true,
	"sasl.oauthbearer.scope.claim.name":   true,
	// How often and how patiently Kafka fetches a JWKS over HTTP; a
	// file is checked every 2 s instead, so these are read and unused.
	"sasl.oauthbearer.jwks.endpoint.refresh.ms":           false,
	"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms":     false,
	"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": false,
}

// The server callback handlers of Kafka's OAUTHBEARER.
const (
	oauthValidatorHandler = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
	// Its older name, in the secured package, still in configurations.
	oauthValidatorHandlerOld = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"
	oauthUnsecuredHandler    = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
	oauthLoginModule         = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
)

// checkOAuthKeys refuses a sasl.oauthbearer.* setting that is not read
// (a client's, sasl.oauthbearer.token.endpoint.url and the like, or a
// misspelling), wherever it is set.
func checkOAuthKeys(kv map[string]string) error {
	for k := range kv {
		rest := k
		if strings.HasPrefix(k, "listener.name.") {
			_, rest, _ = strings.Cut(strings.TrimPrefix(k, "listener.name."), ".")
			rest = strings.TrimPrefix(rest, "oauthbearer.")
		}
		if _, ok := oauthKeys[rest]; !ok && strings.HasPrefix(rest, "sasl.oauthbearer.") {
			return fmt.Errorf("%s: not an OAUTHBEARER setting a broker reads (%s)", k, strings.Join(oauthKeyNames(), ", "))
		}
	}
	return nil
}

func oauthKeyNames() []string {
	var names []string
	for k, read := range oauthKeys {
		if read {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}

// oauthSetting is a listener's value of an OAUTHBEARER key and the key it
// came from.
func oauthSetting(kv map[string]string, name, key string) (string, string, bool) {
	prefix := "listener.name." + strings.ToLower(name) + "."
	for _, k := range []string{prefix + "oauthbearer." + key, prefix + key, key} {
		if v, ok := kv[k]; ok {
			return strings.TrimSpace(v), k, true
		}
	}
	return "", "", false
}

// buildOAuth reads a listener's OAUTHBEARER configuration.
func buildOAuth(kv map[string]string, name string) (sasl.OAuthConfig, error) {
	var c sasl.OAuthConfig
	prefix := "listener.name." + strings.ToLower(name) + ".oauthbearer."
	handler := strings.TrimSpace(kv[prefix+"sasl.server.callback.handler.class"])
	url, urlKey, haveURL := oauthSetting(kv, name, "sasl.oauthbearer.jwks.endpoint.url")
	switch handler {
	case "", oauthUnsecuredHandler:
		if haveURL {
			// Kafka would leave the JWKS unused and take unsigned
			// tokens: a broker that looks as if it checked signatures.
			return c, fmt.Errorf("%s is set but %ssasl.server.callback.handler.class is not %s: Kafka would accept unsigned tokens and ignore the JWKS; set the handler",
				urlKey, prefix, oauthValidatorHandler)
		}
		opts, err := oauthJAAS(kv, prefix+"sasl.jaas.config")
		if err != nil {
			return c, err
		}
		c.Unsecured, err = unsecuredOptions(opts, prefix+"sasl.jaas.config")
		if err != nil {
			return c, err
		}
		return c, nil
	case oauthValidatorHandler, oauthValidatorHandlerOld:
		if !haveURL || url == "" {
			return c, fmt.Errorf("%ssasl.server.callback.handler.class=%s wants sasl.oauthbearer.jwks.endpoint.url (a file: URL)", prefix, handler)
		}
		// The JAAS entry, when there, must be OAuthBearerLoginModule's;
		// its unsecured* options are the unsecured validator's, unused.
		if _, err := oauthJAAS(kv, prefix+"sasl.jaas.config"); err != nil {
			return c, err
		}
	default:
		return c, fmt.Errorf("%ssasl.server.callback.handler.class=%s: not offered (%s, or unset for the unsecured validator)", prefix, handler, oauthValidatorHandler)
	}
	c.JWKSURL = url
	c.ExpectedIssuer, _, _ = oauthSetting(kv, name, "sasl.oauthbearer.expected.issuer")
	if v, _, ok := oauthSetting(kv, name, "sasl.oauthbearer.expected.audience"); ok {
		c.ExpectedAudience = splitList(v)
	}
	c.ClockSkew = sasl.OAuthClockSkewDefault
	if v, k, ok := oauthSetting(kv, name, "sasl.oauthbearer.clock.skew.seconds"); ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return c, fmt.Errorf("%s=%s: want a count of seconds", k, v)
		}
		c.ClockSkew = time.Duration(n) * time.Second
	}
	c.SubClaimName, _, _ = oauthSetting(kv, name, "sasl.oauthbearer.sub.claim.name")
	c.ScopeClaimName, _, _ = oauthSetting(kv, name, "sasl.oauthbearer.scope.claim.name")
	return c, nil
}

// oauthJAAS reads the options of a listener's OAuthBearerLoginModule
// entry (none when the key is not set).
func oauthJAAS(kv map[string]string, key string) (map[string]string, error) {
	v, ok := kv[key]
	if !ok {
		return nil, nil
	}
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, oauthLoginModule) {
		return nil, fmt.Errorf("%s: want %s required [option=\"value\" ...];", key, oauthLoginModule)
	}
	opts := map[string]string{}
	for _, m := range jaasOption.FindAllStringSubmatch(v, -1) {
		opts[m[1]] = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(m[2])
	}
	return opts, nil
}

// unsecuredOptions are the unsecuredValidator* options of Kafka's
// OAuthBearerUnsecuredValidatorCallbackHandler.
func unsecuredOptions(opts map[string]string, key string) (sasl.UnsecuredOptions, error) {
	u := sasl.UnsecuredOptions{
		PrincipalClaimName: strings.TrimSpace(opts["unsecuredValidatorPrincipalClaimName"]),
		ScopeClaimName:     strings.TrimSpace(opts["unsecuredValidatorScopeClaimName"]),
		// Space-delimited, as Kafka's OAuthBearerScopeUtils parses it.
		RequiredScope: strings.Fields(opts["unsecuredValidatorRequiredScope"]),
	}
	if v := strings.TrimSpace(opts["unsecuredValidatorAllowableClockSkewMs"]); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return u, fmt.Errorf("%s: unsecuredValidatorAllowableClockSkewMs=%q: want a non-negative count of milliseconds", key, v)
		}
		u.AllowableClockSkew = time.Duration(n) * time.Millisecond
	}
	return u, nil
}
