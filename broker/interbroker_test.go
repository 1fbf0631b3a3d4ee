package broker

import (
	"crypto/x509/pkix"
	"strings"
	"testing"

	"ringlog/internal/testkit"
	"ringlog/kafka"
)

// TestValidateInterBroker: the inter-broker listener's protocols beyond
// PLAINTEXT start only with what this broker needs as a client of the
// others' (TLS, a mechanism the listener enables, credentials) and with
// its own principal in super.users, which the others' listeners check
// before serving its replica fetches.
func TestValidateInterBroker(t *testing.T) {
	ca := testkit.NewCA(t, "ca")
	node := ca.Issue(pkix.Name{CommonName: "node-1"})
	ts := TLSSettings{"ssl.keystore.location": node.File, "ssl.truststore.location": ca.CertFile}
	serverTLS := func(clientAuth string) TLSSettings {
		s := TLSSettings{"ssl.client.auth": clientAuth}
		for k, v := range ts {
			s[k] = v
		}
		return s
	}
	tlsConfigs := func(clientAuth string) (Listener, InterBrokerClient) {
		srv, err := TLSConfig(serverTLS(clientAuth), t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := InterBrokerTLS(ts, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		return Listener{TLS: srv}, InterBrokerClient{TLS: cl}
	}
	plainUsers := map[string]string{"broker": "pw", "alice": "a"}
	for _, c := range []struct {
		name  string
		cfg   func(*Config)
		error string // "" when valid
	}{
		{"PLAINTEXT", func(*Config) {}, ""},
		{"SASL_SSL with PLAIN", func(c *Config) {
			l, cl := tlsConfigs("none")
			l.Protocol, l.Mechanisms, l.PlainUsers = kafka.SASLSSL, []string{"PLAIN"}, plainUsers
			cl.Mechanism, cl.Username, cl.Password = "PLAIN", "broker", "pw"
			c.InterBroker, c.InterBrokerClient, c.SuperUsers = l, cl, []string{"User:broker"}
		}, ""},
		{"SASL_PLAINTEXT with SCRAM", func(c *Config) {
			c.InterBroker = Listener{Protocol: kafka.SASLPlaintext, Mechanisms: []string{"SCRAM-SHA-512"}}
			c.InterBrokerClient = InterBrokerClient{Mechanism: "SCRAM-SHA-512", Username: "broker", Password: "pw"}
			c.SuperUsers = []string{"User:admin", "User:broker"}
		}, ""},
		{"SSL with client certificates", func(c *Config) {
			l, cl := tlsConfigs("required")
			l.Protocol = kafka.SSL
			c.InterBroker, c.InterBrokerClient, c.SuperUsers = l, cl, []string{"User:CN=node-1"}
		}, ""},
		{"SSL with a principal mapping rule", func(c *Config) {
			l, cl := tlsConfigs("requested")
			rules, err := kafka.ParsePrincipalRules("RULE:^CN=(.*)$/$1/,DEFAULT")
			if err != nil {
				t.Fatal(err)
			}
			l.Protocol, l.PrincipalRules = kafka.SSL, rules
			c.InterBroker, c.InterBrokerClient, c.SuperUsers = l, cl, []string{"User:node-1"}
		}, ""},
		{"SSL without client certificates", func(c *Config) {
			l, cl := tlsConfigs("none")
			l.Protocol = kafka.SSL
			c.InterBroker, c.InterBrokerClient, c.SuperUsers = l, cl, []string{"User:CN=node-1"}
		}, "ssl.client.auth=required"},
		{"SSL, the broker's certificate not a super user", func(c *Config) {
			l, cl := tlsConfigs("required")
			l.Protocol = kafka.SSL
			c.InterBroker, c.InterBrokerClient, c.SuperUsers = l, cl, []string{"User:CN=node-2"}
		}, "this broker is User:CN=node-1 on the inter-broker listener INTERNAL, which super.users does not name"},
		{"SASL_SSL without a TLS client", func(c *Config) {
			l, _ := tlsConfigs("none")
			l.Protocol, l.Mechanisms, l.PlainUsers = kafka.SASLSSL, []string{"PLAIN"}, plainUsers
			c.InterBroker = l
			c.InterBrokerClient = InterBrokerClient{Mechanism: "PLAIN", Username: "broker", Password: "pw"}
			c.SuperUsers = []string{"User:broker"}
		}, "needs a TLS client configuration"},
		{"SASL without credentials", func(c *Config) {
			c.InterBroker = Listener{Protocol: kafka.SASLPlaintext, Mechanisms: []string{"SCRAM-SHA-256"}}
			c.InterBrokerClient = InterBrokerClient{Mechanism: "SCRAM-SHA-256"}
			c.SuperUsers = []string{"User:broker"}
		}, "set username and password in listener.name.internal.scram-sha-256.sasl.jaas.config"},
		{"SASL without a mechanism", func(c *Config) {
			c.InterBroker = Listener{Protocol: kafka.SASLPlaintext, Mechanisms: []string{"SCRAM-SHA-256"}}
			c.InterBrokerClient = InterBrokerClient{Username: "broker", Password: "pw"}
		}, "set sasl.mechanism.inter.broker.protocol"},
		{"a mechanism the listener does not enable", func(c *Config) {
			c.InterBroker = Listener{Protocol: kafka.SASLPlaintext, Mechanisms: []string{"SCRAM-SHA-256"}}
			c.InterBrokerClient = InterBrokerClient{Mechanism: "SCRAM-SHA-512", Username: "broker", Password: "pw"}
		}, "is not enabled on the inter-broker listener INTERNAL"},
		{"OAUTHBEARER between brokers", func(c *Config) {
			c.InterBroker = Listener{Protocol: kafka.SASLPlaintext, Mechanisms: []string{"OAUTHBEARER"}}
			c.InterBrokerClient = InterBrokerClient{Mechanism: "OAUTHBEARER", Username: "broker", Password: "pw"}
		}, "brokers authenticate to each other with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"},
		{"PLAIN, the broker not among the listener's users", func(c *Config) {
			c.InterBroker = Listener{Protocol: kafka.SASLPlaintext, Mechanisms: []string{"PLAIN"}, PlainUsers: map[string]string{"alice": "a"}}
			c.InterBrokerClient = InterBrokerClient{Mechanism: "PLAIN", Username: "broker", Password: "pw"}
			c.SuperUsers = []string{"User:broker"}
		}, "no user_broker with this broker's password"},
		{"SASL, the broker not a super user", func(c *Config) {
			c.InterBroker = Listener{Protocol: kafka.SASLPlaintext, Mechanisms: []string{"SCRAM-SHA-256"}}
			c.InterBrokerClient = InterBrokerClient{Mechanism: "SCRAM-SHA-256", Username: "broker", Password: "pw"}
			c.SuperUsers = []string{"User:alice"}
		}, "add it to super.users"},
		{"credentials on PLAINTEXT", func(c *Config) {
			c.InterBrokerClient = InterBrokerClient{Mechanism: "PLAIN", Username: "broker", Password: "pw"}
		}, "would go unused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.InterBrokerName = "INTERNAL"
			c.cfg(&cfg)
			err := cfg.validateListeners()
			if c.error == "" && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if c.error != "" && (err == nil || !strings.Contains(err.Error(), c.error)) {
				t.Fatalf("error %v, want one with %q", err, c.error)
			}
		})
	}
}
