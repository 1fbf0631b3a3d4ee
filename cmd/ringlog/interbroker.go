package main

import (
	"fmt"
	"strings"

	"ringlog/broker"
	"ringlog/internal/sasl"
	"ringlog/kafka"
)

// interBrokerSecurity reads the inter-broker listener's settings as Kafka
// does: the listener's own ssl.* and SASL settings make its server side,
// and this broker's client side of it (its followers' fetch connections)
// takes the same listener's keystore and truststore for TLS and, for
// SASL, sasl.mechanism.inter.broker.protocol with the username and
// password of listener.name.<name>.<mechanism>.sasl.jaas.config.
func (s *settings) interBrokerSecurity(kv map[string]string, name string, p kafka.SecurityProtocol) error {
	l, err := buildListener(kv, name, p)
	if err != nil {
		return fmt.Errorf("inter-broker listener %s: %w", name, err)
	}
	s.InterBroker, s.InterBrokerClient = l, broker.InterBrokerClient{}
	if p.TLS() {
		tc, err := broker.InterBrokerTLS(listenerTLSSettings(kv, name), nil)
		if err != nil {
			return fmt.Errorf("inter-broker listener %s: %w", name, err)
		}
		s.InterBrokerClient.TLS = tc
	}
	mech, set := kv["sasl.mechanism.inter.broker.protocol"]
	if !p.SASL() {
		if set {
			return fmt.Errorf("sasl.mechanism.inter.broker.protocol: the inter-broker listener %s is %s, without SASL: it would go unused", name, p)
		}
		return nil
	}
	var module string
	switch mech {
	case sasl.Plain:
		module = plainLoginModule
	case sasl.ScramSHA256, sasl.ScramSHA512:
		module = scramLoginModule
	case "":
		return fmt.Errorf("the inter-broker listener %s is %s: set sasl.mechanism.inter.broker.protocol to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default, GSSAPI, is not offered)", name, p)
	default:
		return fmt.Errorf("sasl.mechanism.inter.broker.protocol=%s: brokers authenticate to each other with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mech)
	}
	key := "listener.name." + strings.ToLower(name) + "." + strings.ToLower(mech) + ".sasl.jaas.config"
	missing := fmt.Errorf("the inter-broker listener %s is %s with %s: set username and password in %s, the credentials this broker authenticates with to the others (%s required username=\"...\" password=\"...\";)",
		name, p, mech, key, module)
	v, ok := kv[key]
	if !ok {
		return missing
	}
	opts, err := jaasOptions(v, module)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	if opts["username"] == "" || opts["password"] == "" {
		return missing
	}
	s.InterBrokerClient.Mechanism, s.InterBrokerClient.Username, s.InterBrokerClient.Password = mech, opts["username"], opts["password"]
	return nil
}

// superUsers reads super.users: principals separated by semicolons, as
// Kafka's AclAuthorizer reads them (User:broker;User:CN=node-1,O=example).
// Only User principals exist here.
func superUsers(v string) ([]string, error) {
	var out []string
	for _, e := range strings.Split(v, ";") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if name, ok := strings.CutPrefix(e, "User:"); !ok || name == "" {
			return nil, fmt.Errorf("%q: want User:<name>", e)
		}
		out = append(out, e)
	}
	return out, nil
}
