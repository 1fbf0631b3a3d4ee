package main

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"time"

	"ringlog/engine"
	"ringlog/internal/testkit"
	"ringlog/kafka"

	"errors"
	"strings"
	"testing"

	"ringlog/ioring"
	"ringlog/segment"
)

func TestServerProperties(t *testing.T) {
	s := defaultSettings()
	err := s.loadProperties(strings.NewReader(`
# A Kafka-style file.
listeners=PLAINTEXT://127.0.0.1:19092
advertised.listeners=PLAINTEXT://broker.local:19092
log.dirs=/var/lib/ringlog
num.partitions=6
auto.create.topics.enable=false
log.retention.ms=60000
log.retention.hours=1
log.retention.bytes=1073741824
log.segment.bytes=104857600
message.max.bytes=2000000
log.flush.interval.messages=1
node.id=3
log.cleaner.enable=false
log.cleaner.min.cleanable.ratio=0.25
num.io.threads=4
ringlog.io=portable
ringlog.writes=direct
ringlog.tail.cache.bytes=1048576
`))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case s.Listen != "127.0.0.1:19092", s.Advertise != "broker.local:19092", s.DataDir != "/var/lib/ringlog":
		t.Fatalf("addresses: %+v", s)
	case s.NumPartitions != 6 || s.AutoCreateTopics || s.NodeID != 3 || s.Shards != 4 || s.IO != ioring.ModePortable:
		t.Fatalf("broker settings: %+v", s)
	case s.Topic.Log.RetentionMs != 60000: // ms wins over hours whatever the order
		t.Fatalf("retention.ms %d", s.Topic.Log.RetentionMs)
	case s.Topic.Log.RetentionBytes != 1<<30 || s.Topic.Log.SegmentBytes != 100<<20 || s.Topic.Log.MaxMessageBytes != 2000000:
		t.Fatalf("topic defaults: %+v", s.Topic.Log)
	case s.Topic.Log.Flush != segment.FlushAlways:
		t.Fatalf("flush policy %v", s.Topic.Log.Flush)
	case !s.Cleaner.Disabled:
		t.Fatalf("log.cleaner.enable=false ignored")
	case s.Writes != engine.WritesDirect || s.TailCacheBytes != 1<<20:
		t.Fatalf("writes %q, tail cache bytes %d", s.Writes, s.TailCacheBytes)
	}
	if c, _ := engineTopicEntry(s, "min.cleanable.dirty.ratio"); c != "0.25" {
		t.Fatalf("min.cleanable.dirty.ratio %q", c)
	}
}

// TestServerPropertiesGroupsAndCluster: the group and transaction
// coordinators' and the cluster's keys reach their settings (a rename of the settings once
// turned offsets.topic.* into unknown keys, and only the benchmark's
// cluster, which writes them, noticed).
func TestServerPropertiesGroupsAndCluster(t *testing.T) {
	s := defaultSettings()
	err := s.loadProperties(strings.NewReader(`
offsets.topic.num.partitions=4
offsets.topic.replication.factor=3
offsets.topic.segment.bytes=1048576
group.initial.rebalance.delay.ms=0
group.max.size=7
controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9095
replica.lag.time.max.ms=5000
broker.session.timeout.ms=3000
default.replication.factor=2
transaction.state.log.num.partitions=5
transaction.state.log.replication.factor=2
transaction.state.log.min.isr=1
transaction.max.timeout.ms=60000
transactional.id.expiration.ms=3600000
transaction.abort.timed.out.transaction.cleanup.interval.ms=500
`))
	if err != nil {
		t.Fatal(err)
	}
	g, c := s.Groups, s.Cluster
	if g.OffsetsTopicPartitions != 4 || g.OffsetsTopicReplicationFactor != 3 || g.OffsetsTopicSegmentBytes != 1<<20 ||
		g.InitialRebalanceDelay != 0 || g.MaxSize != 7 {
		t.Fatalf("group settings: %+v", g)
	}
	if x := s.Txns; x.Partitions != 5 || x.ReplicationFactor != 2 || x.MinISR != 1 || x.MaxTimeout.Milliseconds() != 60000 ||
		x.IDExpiration.Milliseconds() != 3600000 || x.AbortTimedOutInterval.Milliseconds() != 500 {
		t.Fatalf("transaction settings: %+v", x)
	}
	if c.Voters != "1@127.0.0.1:9093,2@127.0.0.1:9095" || c.LagTimeMax.Milliseconds() != 5000 ||
		c.SessionTimeout.Milliseconds() != 3000 || c.ReplicationFactor != 2 {
		t.Fatalf("cluster settings: %+v", c)
	}
}

func TestServerPropertiesErrors(t *testing.T) {
	for text, want := range map[string]string{
		"zookeeper.connect=localhost:2181":                       `unknown config key "zookeeper.connect"`,
		"listeners=SSL://0.0.0.0:9093":                           "inter.broker.listener.name: no listener named PLAINTEXT",
		"listeners=PLAINTEXT://:1,SASL_PLAINTEXT://:2":           "no SASL mechanism",
		"listeners=PLAINTEXT://:1,SSL://:2":                      "no keystore",
		"listeners=PLAINTEXT://:1,CLIENT://:2":                   "CLIENT has no security protocol",
		"listeners=PLAINTEXT://:1,PLAINTEXT://:2":                "PLAINTEXT named twice",
		"listeners=PLAINTEXT://:1\ninter.broker.listener.name=X": "no listener named X",
		"listeners=PLAINTEXT://:1,SASL_PLAINTEXT://:2\nsasl.enabled.mechanisms=PLAIN\nlistener.name.sasl_plaintext.plain.sasl.jaas.config=x": "PlainLoginModule",
		"listeners=PLAINTEXT://:1\nadvertised.listeners=OTHER://h:1":                                                                         "OTHER is not in listeners",
		"ssl.client.auth=required":    "the only listener is PLAINTEXT",
		"log.dirs=,":                  "no directory",
		"num.partitions=zero":         "num.partitions",
		"log.segment.bytes=1":         "segment.bytes",
		"log.segment.bytes=1048575":   "log.segment.bytes: Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576",
		"log.index.size.max.bytes=3":  "Value must be at least 4",
		"log.roll.ms=0":               "Value must be at least 1",
		"log.index.interval.bytes=-1": "Value must be at least 0",
		"ringlog.max.partitions=0":    "want a positive bound",
		"ringlog.max.partitions=x":    "ringlog.max.partitions",
		"ringlog.tail.cache.bytes=-1": "ringlog.tail.cache.bytes=-1: want an integer in [0,",
		"just a line":                 "want key=value",
		oauthBase + `\nsasl.oauthbearer.jwks.endpoint.url=file:///j`:                                                                                             "Kafka would accept unsigned tokens and ignore the JWKS",
		oauthBase + `\nlistener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=` + oauthValidatorHandler:                                     "wants sasl.oauthbearer.jwks.endpoint.url",
		oauthBase + `\nlistener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=com.example.Mine`:                                             "not offered",
		oauthBase + `\nsasl.oauthbearer.token.endpoint.url=https://idp`:                                                                                          "not an OAUTHBEARER setting a broker reads",
		oauthBase + `\nlistener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.issuers=x`:                                                             "not an OAUTHBEARER setting a broker reads",
		oauthBase + `\nlistener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required;`:              "OAuthBearerLoginModule",
		oauthBase + `\nlistener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=` + oauthLoginModule + ` required unsecuredValidatorAllowableClockSkewMs="-1";`: "unsecuredValidatorAllowableClockSkewMs",
		oauthBase + `\nlistener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=` + oauthValidatorHandler +
			`\nsasl.oauthbearer.jwks.endpoint.url=file:///j\nsasl.oauthbearer.clock.skew.seconds=soon`: "sasl.oauthbearer.clock.skew.seconds=soon",
	} {
		s := defaultSettings()
		err := s.loadProperties(strings.NewReader(strings.ReplaceAll(text, `\n`, "\n")))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%q: err %v, want it to mention %q", text, err, want)
		}
	}
	s := defaultSettings()
	if err := s.loadProperties(strings.NewReader("foo.bar=1")); !errors.Is(err, errUnknownKey) {
		t.Fatalf("unknown key: %v", err)
	}
}

// TestListenerProperties: Kafka's listener settings make an inter-broker
// PLAINTEXT listener and a SASL_SSL one with its own mechanisms, JAAS
// users, TLS files (a listener.name.<name>.ssl.* override beside the
// global ssl.*) and re-authentication lifetime; the controller listener
// is left to controller.quorum.voters.
func TestListenerProperties(t *testing.T) {
	ca := testkit.NewCA(t, "ca")
	server := ca.Issue(pkix.Name{CommonName: "broker"})
	text := `listeners=INTERNAL://127.0.0.1:19092,CLIENT://0.0.0.0:19093,CONTROLLER://127.0.0.1:19094
advertised.listeners=INTERNAL://127.0.0.1:19092,CLIENT://broker.example:19093
listener.security.protocol.map=INTERNAL:PLAINTEXT,CLIENT:SASL_SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=INTERNAL
controller.listener.names=CONTROLLER
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.client.sasl.enabled.mechanisms=SCRAM-SHA-256,PLAIN
listener.name.client.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="a" user_admin="a" user_alice="al\"ice";
ssl.keystore.type=PEM
ssl.keystore.location=` + server.File + `
listener.name.client.ssl.truststore.location=` + ca.CertFile + `
listener.name.client.ssl.client.auth=requested
connections.max.reauth.ms=60000
`
	s := defaultSettings()
	if err := s.loadProperties(strings.NewReader(text)); err != nil {
		t.Fatal(err)
	}
	if s.Listen != "127.0.0.1:19092" || s.InterBrokerName != "INTERNAL" || len(s.Listeners) != 1 {
		t.Fatalf("listen %s as %s, others %+v", s.Listen, s.InterBrokerName, s.Listeners)
	}
	l := s.Listeners[0]
	if l.Name != "CLIENT" || l.Protocol != kafka.SASLSSL || l.Addr != "0.0.0.0:19093" || l.Advertise != "broker.example:19093" ||
		strings.Join(l.Mechanisms, ",") != "SCRAM-SHA-256,PLAIN" || l.PlainUsers["alice"] != `al"ice` || l.PlainUsers["admin"] != "a" ||
		l.ReauthMax != time.Minute || l.TLS == nil {
		t.Fatalf("CLIENT: %+v", l)
	}
}

func TestMaxPartitionsProperty(t *testing.T) {
	for text, want := range map[string]int{"ringlog.max.partitions=50000": 50000, "ringlog.max.partitions=-1": -1, "": 0} {
		s := defaultSettings()
		if err := s.loadProperties(strings.NewReader(text)); err != nil || s.MaxPartitions != want {
			t.Fatalf("%q: %d %v, want %d", text, s.MaxPartitions, err, want)
		}
	}
}

// TestFetchSessionProperties: Kafka's KIP-227 settings, 0 slots turning
// fetch sessions off.
func TestFetchSessionProperties(t *testing.T) {
	for text, want := range map[string][2]int64{
		"max.incremental.fetch.session.cache.slots=10\nmin.incremental.fetch.session.eviction.ms=5000": {10, 5000},
		"max.incremental.fetch.session.cache.slots=0":                                                  {-1, 0},
		"": {0, 0},
	} {
		s := defaultSettings()
		if err := s.loadProperties(strings.NewReader(text)); err != nil || int64(s.FetchSessionSlots) != want[0] || s.FetchSessionEviction.Milliseconds() != want[1] {
			t.Fatalf("%q: %d %v %v, want %v", text, s.FetchSessionSlots, s.FetchSessionEviction, err, want)
		}
	}
}

// TestQuotaProperties: the controller mutation quota's windows and
// max.connection.creation.rate (KIP-599, KIP-612); Kafka's default rate,
// Int.MaxValue, is none.
func TestQuotaProperties(t *testing.T) {
	for text, want := range map[string][3]float64{
		"controller.quota.window.num=4\ncontroller.quota.window.size.seconds=2\nmax.connection.creation.rate=30": {4, 2, 30},
		"max.connection.creation.rate=2147483647": {0, 0, 0},
		"": {0, 0, 0},
	} {
		s := defaultSettings()
		err := s.loadProperties(strings.NewReader(text))
		got := [3]float64{float64(s.ControllerQuotaWindowNum), s.ControllerQuotaWindow.Seconds(), s.MaxConnectionCreationRate}
		if err != nil || got != want {
			t.Fatalf("%q: %v %v, want %v", text, got, err, want)
		}
	}
	s := defaultSettings()
	if err := s.loadProperties(strings.NewReader("max.connection.creation.rate=0")); err == nil {
		t.Fatal("max.connection.creation.rate=0 accepted")
	}
}

const oauthBase = `listeners=PLAINTEXT://:1,SASL_PLAINTEXT://:2\nsasl.enabled.mechanisms=OAUTHBEARER`

// TestOAuthBearerProperties: Kafka's OAUTHBEARER settings. With the
// validating handler, the sasl.oauthbearer.* keys, the most specific of
// listener.name.<name>.oauthbearer.<key>, listener.name.<name>.<key> and
// <key> winning, and Kafka's 30 s clock skew by default; without it, the
// unsecured validator's options from the listener's JAAS entry.
func TestOAuthBearerProperties(t *testing.T) {
	text := `listeners=PLAINTEXT://127.0.0.1:19092,SECURED://:19093,DEV://:19094
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SECURED:SASL_PLAINTEXT,DEV:SASL_PLAINTEXT
sasl.enabled.mechanisms=OAUTHBEARER,PLAIN
listener.name.dev.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";
listener.name.secured.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";
listener.name.secured.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
listener.name.secured.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;
sasl.oauthbearer.jwks.endpoint.url=file:///etc/ringlog/jwks.json
sasl.oauthbearer.expected.issuer=https://global.example
listener.name.secured.oauthbearer.sasl.oauthbearer.expected.issuer=https://idp.example
listener.name.secured.sasl.oauthbearer.expected.audience=ringlog, kafka
listener.name.secured.oauthbearer.sasl.oauthbearer.sub.claim.name=client_id
sasl.oauthbearer.scope.claim.name=scp
sasl.oauthbearer.jwks.endpoint.refresh.ms=3600000
listener.name.dev.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin" unsecuredValidatorRequiredScope="kafka  admin" unsecuredValidatorAllowableClockSkewMs="1500" unsecuredValidatorPrincipalClaimName="email" unsecuredValidatorScopeClaimName="roles";
`
	// The DEV listener takes the global JWKS URL unless it says
	// otherwise: a JWKS beside the unsecured handler is refused.
	text = strings.Replace(text, "sasl.oauthbearer.jwks.endpoint.url=", "listener.name.secured.sasl.oauthbearer.jwks.endpoint.url=", 1)
	s := defaultSettings()
	if err := s.loadProperties(strings.NewReader(text)); err != nil {
		t.Fatal(err)
	}
	if len(s.Listeners) != 2 {
		t.Fatalf("listeners %+v", s.Listeners)
	}
	sec, dev := s.Listeners[0].OAuth, s.Listeners[1].OAuth
	if sec.JWKSURL != "file:///etc/ringlog/jwks.json" || sec.ExpectedIssuer != "https://idp.example" ||
		strings.Join(sec.ExpectedAudience, "|") != "ringlog|kafka" || sec.ClockSkew != 30*time.Second ||
		sec.SubClaimName != "client_id" || sec.ScopeClaimName != "scp" || len(sec.Unsecured.RequiredScope) != 0 {
		t.Fatalf("SECURED: %+v", sec)
	}
	if err := sec.Check(); err != nil {
		t.Fatalf("SECURED: %v", err)
	}
	u := dev.Unsecured
	if dev.Secured() || strings.Join(u.RequiredScope, "|") != "kafka|admin" || u.AllowableClockSkew != 1500*time.Millisecond ||
		u.PrincipalClaimName != "email" || u.ScopeClaimName != "roles" {
		t.Fatalf("DEV: %+v", dev)
	}
	if err := dev.Check(); err != nil {
		t.Fatalf("DEV: %v", err)
	}
}

func TestFlushFlag(t *testing.T) {
	for policy, want := range map[string]segment.FlushPolicy{"always": segment.FlushAlways, "interval": segment.FlushInterval, "never": segment.FlushNever} {
		s := defaultSettings()
		if err := s.applyFlush(policy); err != nil || s.Topic.Log.Flush != want {
			t.Fatalf("%s: %v %v", policy, s.Topic.Log.Flush, err)
		}
	}
	s := defaultSettings()
	if err := s.applyFlush("sometimes"); err == nil {
		t.Fatal("bad policy accepted")
	}
}

func engineTopicEntry(s settings, name string) (string, bool) {
	for _, e := range s.Topic.Entries(nil) {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func TestAdminAddr(t *testing.T) {
	for addr, ok := range map[string]bool{"": true, "127.0.0.1:9644": true, "[::1]:9644": true, "localhost:9644": true,
		":9644": false, "0.0.0.0:9644": false, "10.0.0.5:9644": false, "example.com:9644": false} {
		if err := checkAdminAddr(addr, false); (err == nil) != ok {
			t.Errorf("-admin %q: %v", addr, err)
		}
		if err := checkAdminAddr(addr, true); err != nil && addr != "" {
			t.Errorf("-admin %q -admin-public: %v", addr, err)
		}
	}
}

// TestControllerListenerTLS: a controller listener mapped to SSL runs the
// controller port over mutual TLS (client certificates required); SASL
// there is refused, and an ssl.client.auth other than required too.
func TestControllerListenerTLS(t *testing.T) {
	ca := testkit.NewCA(t, "ca")
	node := ca.Issue(pkix.Name{CommonName: "node-1"})
	base := `listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093
controller.listener.names=CONTROLLER
listener.name.controller.ssl.keystore.location=` + node.File + `
listener.name.controller.ssl.truststore.location=` + ca.CertFile + "\n"
	s := defaultSettings()
	if err := s.loadProperties(strings.NewReader(base + "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL\n")); err != nil {
		t.Fatal(err)
	}
	if s.Cluster.TLS == nil || s.Cluster.TLS.Server.ClientAuth != tls.RequireAndVerifyClientCert || s.Cluster.TLS.Client == nil {
		t.Fatalf("controller TLS: %+v", s.Cluster.TLS)
	}
	for extra, want := range map[string]string{
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL\n":                                           "PLAINTEXT or SSL",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL\nlistener.name.controller.ssl.client.auth=none\n": "requires client certificates",
	} {
		s := defaultSettings()
		if err := s.loadProperties(strings.NewReader(base + extra)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %q", extra, err, want)
		}
	}
}

// TestInterBrokerListenerProperties: Kafka's settings for an inter-broker
// listener over SASL_SSL (the listener's ssl.* for both sides,
// sasl.mechanism.inter.broker.protocol and the username and password of
// the mechanism's JAAS entry for the broker's own client, super.users),
// over SSL with client certificates, and the errors for what cannot be
// honoured.
func TestInterBrokerListenerProperties(t *testing.T) {
	ca := testkit.NewCA(t, "ca")
	node := ca.Issue(pkix.Name{CommonName: "node-1"})
	base := `listeners=INTERNAL://127.0.0.1:19092,CLIENT://127.0.0.1:19093
listener.security.protocol.map=INTERNAL:SASL_SSL,CLIENT:PLAINTEXT
inter.broker.listener.name=INTERNAL
listener.name.internal.ssl.keystore.location=` + node.File + `
listener.name.internal.ssl.truststore.location=` + ca.CertFile + `
listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
listener.name.internal.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a";
super.users=User:broker; User:CN=node-1
`
	scram := `sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.internal.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="b\"pw";
`
	s := defaultSettings()
	if err := s.loadProperties(strings.NewReader(base + scram)); err != nil {
		t.Fatal(err)
	}
	ib, cl := s.InterBroker, s.InterBrokerClient
	if s.InterBrokerName != "INTERNAL" || s.Listen != "127.0.0.1:19092" || ib.Protocol != kafka.SASLSSL || ib.TLS == nil ||
		strings.Join(ib.Mechanisms, ",") != "SCRAM-SHA-512,PLAIN" || ib.PlainUsers["alice"] != "a" {
		t.Fatalf("inter-broker listener %s on %s: %+v", s.InterBrokerName, s.Listen, ib)
	}
	if cl.TLS == nil || cl.TLS.RootCAs == nil || cl.TLS.GetClientCertificate == nil || cl.Mechanism != "SCRAM-SHA-512" || cl.Username != "broker" || cl.Password != `b"pw` {
		t.Fatalf("inter-broker client: %+v", cl)
	}
	if strings.Join(s.SuperUsers, ";") != "User:broker;User:CN=node-1" {
		t.Fatalf("super.users: %q", s.SuperUsers)
	}
	if len(s.Listeners) != 1 || s.Listeners[0].Name != "CLIENT" {
		t.Fatalf("other listeners: %+v", s.Listeners)
	}

	ssl := strings.NewReplacer("INTERNAL:SASL_SSL", "INTERNAL:SSL", "listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN\n", "",
		"listener.name.internal.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"a\";\n", "").Replace(base) +
		"listener.name.internal.ssl.client.auth=required\n"
	s = defaultSettings()
	if err := s.loadProperties(strings.NewReader(ssl)); err != nil {
		t.Fatal(err)
	}
	if s.InterBroker.Protocol != kafka.SSL || s.InterBroker.TLS.ClientAuth != tls.RequireAndVerifyClientCert || s.InterBrokerClient.TLS == nil || s.InterBrokerClient.Mechanism != "" {
		t.Fatalf("SSL inter-broker listener: %+v, client %+v", s.InterBroker, s.InterBrokerClient)
	}

	for text, want := range map[string]string{
		base: "set sasl.mechanism.inter.broker.protocol to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
		base + "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n": "set username and password in listener.name.internal.scram-sha-512.sasl.jaas.config",
		base + "sasl.mechanism.inter.broker.protocol=PLAIN\n":         "set username and password in listener.name.internal.plain.sasl.jaas.config",
		base + "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\nlistener.name.internal.scram-sha-512.sasl.jaas.config=x required username=\"b\";\n": "ScramLoginModule",
		base + "sasl.mechanism.inter.broker.protocol=GSSAPI\n": "brokers authenticate to each other with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
		ssl + "sasl.mechanism.inter.broker.protocol=PLAIN\n":   "it would go unused",
		base + scram + "super.users=broker\n":                  `"broker": want User:<name>`,
		strings.Replace(base, "listener.name.internal.ssl.keystore.location", "listener.name.client.ssl.keystore.location", 1) + scram: "no keystore",
	} {
		s := defaultSettings()
		if err := s.loadProperties(strings.NewReader(text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %q", text, err, want)
		}
	}
}

// TestProcessRolesProperties: process.roles, the quorum's bootstrap
// servers, and a controller-only node whose only listener is its
// controller listener (bound from listeners, not from the voter list).
func TestProcessRolesProperties(t *testing.T) {
	s := defaultSettings()
	err := s.loadProperties(strings.NewReader(`
process.roles=controller
node.id=4
listeners=CONTROLLER://127.0.0.1:19093
controller.listener.names=CONTROLLER
controller.quorum.bootstrap.servers=127.0.0.1:19094,127.0.0.1:19095
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Roles.String() != "controller" || s.Cluster.ControllerListen != "127.0.0.1:19093" ||
		s.Cluster.BootstrapServers != "127.0.0.1:19094,127.0.0.1:19095" {
		t.Fatalf("roles %s, controller listener %q, bootstrap servers %q", s.Roles, s.Cluster.ControllerListen, s.Cluster.BootstrapServers)
	}
	s = defaultSettings()
	err = s.loadProperties(strings.NewReader("process.roles=broker,zookeeper\n"))
	if err == nil || !strings.Contains(err.Error(), "unknown process role 'zookeeper'") {
		t.Fatalf("process.roles=broker,zookeeper: %v", err)
	}
}

// log.dirs takes several directories (JBOD): the first holds the broker's
// metadata, the others partition logs only.
func TestLogDirsList(t *testing.T) {
	s := defaultSettings()
	if err := s.loadProperties(strings.NewReader("log.dirs=/a, /b,/c\n")); err != nil {
		t.Fatal(err)
	}
	if s.DataDir != "/a" || len(s.LogDirs) != 2 || s.LogDirs[0] != "/b" || s.LogDirs[1] != "/c" {
		t.Fatalf("DataDir %q LogDirs %q", s.DataDir, s.LogDirs)
	}
}
