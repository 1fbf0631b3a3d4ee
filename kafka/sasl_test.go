package kafka_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509/pkix"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"ringlog/broker"
	ringsasl "ringlog/internal/sasl"
	"ringlog/internal/testkit"
	"ringlog/kafka"
)

// saslBroker is a broker with a SASL_PLAINTEXT listener named SASL beside
// its PLAINTEXT inter-broker one, offering PLAIN (user alice) and both
// SCRAM mechanisms; it returns the broker and the SASL listener's address.
func saslBroker(t *testing.T, tweak func(*broker.Listener)) (*testBroker, string) {
	t.Helper()
	b := startBroker(t, brokerOpts{Config: func(c *broker.Config) {
		l := broker.Listener{Name: "SASL", Protocol: kafka.SASLPlaintext, Addr: "127.0.0.1:0",
			Mechanisms: []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"},
			PlainUsers: map[string]string{"alice": "alice-secret"}}
		if tweak != nil {
			tweak(&l)
		}
		c.Listeners = append(c.Listeners, l)
	}})
	return b, b.B.ListenerAddr("SASL")
}

func saslClient(t *testing.T, addr string, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.SASL(m), kgo.RequestRetries(0),
		kgo.RetryTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestSASLScramEndToEnd: SCRAM credentials made with kadm on the
// PLAINTEXT listener authenticate kgo clients on the SASL listener (both
// mechanisms), which produce and consume there; Metadata on the SASL
// listener names its own address; a wrong password, an unknown user and a
// credential of the other mechanism are SASL_AUTHENTICATION_FAILED.
func TestSASLScramEndToEnd(t *testing.T) {
	b, addr := saslBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := b.admin()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-256"},
		{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "carol-512"},
	})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || described.Error() != nil {
		t.Fatalf("DescribeUserSCRAMs: %v %v", err, described.Error())
	}
	if c := described["carol"]; len(c.CredInfos) != 1 || c.CredInfos[0].Mechanism != kadm.ScramSha512 || c.CredInfos[0].Iterations != 8192 {
		t.Fatalf("carol described as %+v", c)
	}

	for _, m := range []sasl.Mechanism{scram.Auth{User: "bob", Pass: "bob-256"}.AsSha256Mechanism(),
		scram.Auth{User: "carol", Pass: "carol-512"}.AsSha512Mechanism(), plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()} {
		topic := "sasl-" + strings.ToLower(m.Name())
		cl := saslClient(t, addr, m, kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics(topic))
		md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		if err != nil {
			t.Fatalf("%s: metadata: %v", m.Name(), err)
		}
		if len(md.Brokers) != 1 || net.JoinHostPort(md.Brokers[0].Host, itoa(md.Brokers[0].Port)) != addr {
			t.Fatalf("%s: metadata on the SASL listener names %+v, want %s", m.Name(), md.Brokers, addr)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("hi")}).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", m.Name(), err)
		}
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil || len(fs.Records()) != 1 {
			t.Fatalf("%s: consume: %v %d", m.Name(), err, len(fs.Records()))
		}
	}

	for _, m := range []sasl.Mechanism{scram.Auth{User: "bob", Pass: "wrong"}.AsSha256Mechanism(),
		scram.Auth{User: "nobody", Pass: "bob-256"}.AsSha256Mechanism(),
		scram.Auth{User: "bob", Pass: "bob-256"}.AsSha512Mechanism(),
		plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()} {
		cl := saslClient(t, addr, m)
		err := cl.Ping(ctx)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("%s: %v, want SASL_AUTHENTICATION_FAILED", m.Name(), err)
		}
	}
}

// TestSASLOAuthBearerEndToEnd: a kgo client with a token signed by a key
// of the listener's JWKS (a file, sasl.oauthbearer.jwks.endpoint.url)
// produces and consumes on the SASL listener; the session lasts until the
// token's exp, without connections.max.reauth.ms (KIP-368), and a request
// after it closes the connection; an expired token gets Kafka's JSON error
// challenge, then SASL_AUTHENTICATION_FAILED with that JSON, and kgo sees
// SASL_AUTHENTICATION_FAILED.
func TestSASLOAuthBearerEndToEnd(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	url := testkit.WriteJWKS(t, filepath.Join(t.TempDir(), "jwks.json"), testkit.RSAJWK("k1", &key.PublicKey))
	_, addr := saslBroker(t, func(l *broker.Listener) {
		l.Mechanisms = append(l.Mechanisms, "OAUTHBEARER")
		l.OAuth = ringsasl.OAuthConfig{JWKSURL: url, ExpectedIssuer: "https://idp.test", ExpectedAudience: []string{"ringlog"},
			ClockSkew: ringsasl.OAuthClockSkewDefault}
	})
	token := func(exp time.Time) string {
		return testkit.SignJWT(t, "RS256", "k1", key, map[string]any{"sub": "svc-orders", "iss": "https://idp.test",
			"aud": "ringlog", "iat": time.Now().Unix(), "exp": exp.Unix(), "scope": "kafka"})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cl := saslClient(t, addr, oauth.Auth{Token: token(time.Now().Add(time.Hour))}.AsMechanism(),
		kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("oauth"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "oauth", Value: []byte("signed")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil || len(fs.Records()) != 1 || string(fs.Records()[0].Value) != "signed" {
		t.Fatalf("consume: %v %d", err, len(fs.Records()))
	}

	// The session ends with the token, 2 to 3 s from now.
	w := dialWire(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "OAUTHBEARER"
	if resp := w.roundTrip(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("handshake: %+v", resp)
	}
	exp := time.Unix(time.Now().Unix()+3, 0)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version, auth.SASLAuthBytes = 2, []byte("n,,\x01auth=Bearer "+token(exp)+"\x01\x01")
	resp := w.roundTrip(auth).(*kmsg.SASLAuthenticateResponse)
	if resp.ErrorCode != 0 || resp.SessionLifetimeMillis <= 1000 || resp.SessionLifetimeMillis > 3000 {
		t.Fatalf("authenticate with a token expiring at %v: %+v, want a session lifetime up to the token's exp", exp, resp)
	}
	w.roundTrip(kmsg.NewPtrMetadataRequest())
	time.Sleep(time.Until(exp) + 100*time.Millisecond)
	w.send(kmsg.NewPtrMetadataRequest())
	w.expectClosed()

	// An expired token, on the wire and through kgo.
	w = dialWire(t, addr)
	w.roundTrip(hs)
	auth.SASLAuthBytes = []byte("n,,\x01auth=Bearer " + token(time.Now().Add(-time.Hour)) + "\x01\x01")
	resp = w.roundTrip(auth).(*kmsg.SASLAuthenticateResponse)
	if resp.ErrorCode != 0 || string(resp.SASLAuthBytes) != `{"status":"invalid_token"}` {
		t.Fatalf("an expired token: %+v, want the JSON error challenge", resp)
	}
	auth.SASLAuthBytes = []byte{1}
	resp = w.roundTrip(auth).(*kmsg.SASLAuthenticateResponse)
	if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != `{"status":"invalid_token"}` {
		t.Fatalf("the client's %%x01 after the error: %+v", resp)
	}
	w.expectClosed()
	cl = saslClient(t, addr, oauth.Auth{Token: token(time.Now().Add(-time.Hour))}.AsMechanism())
	if err := cl.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("kgo with an expired token: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// TestSASLGate: before authentication only ApiVersions, SaslHandshake and
// SaslAuthenticate are read (anything else closes the connection, as
// Kafka's authenticator does), a mechanism the listener does not offer is
// UNSUPPORTED_SASL_MECHANISM with the list it offers, a frame above
// sasl.server.max.receive.size closes, and a client that does not
// authenticate in time is disconnected. On the PLAINTEXT listener the SASL
// APIs are ILLEGAL_SASL_STATE.
func TestSASLGate(t *testing.T) {
	b, addr := saslBroker(t, func(l *broker.Listener) { l.AuthTimeout = time.Second; l.MaxReceiveBytes = 4096 })

	w := dialWire(t, addr)
	if resp := w.roundTrip(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions before authentication: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	w.send(kmsg.NewPtrMetadataRequest())
	w.expectClosed()

	w = dialWire(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "GSSAPI"
	resp := w.roundTrip(hs).(*kmsg.SASLHandshakeResponse)
	if resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(resp.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" {
		t.Fatalf("GSSAPI: %+v", resp)
	}
	w.expectClosed()

	w = dialWire(t, addr)
	hs.Mechanism = "PLAIN"
	if resp := w.roundTrip(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("PLAIN: %+v", resp)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version, auth.SASLAuthBytes = 2, make([]byte, 8192)
	w.send(auth)
	w.expectClosed()

	w = dialWire(t, addr)
	start := time.Now()
	w.expectClosed()
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Fatalf("closed after %v, before the authentication timeout", d)
	}

	w = dialWire(t, b.Addr)
	if resp := w.roundTrip(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake on PLAINTEXT: %+v", resp)
	}
	if resp := w.roundTrip(auth).(*kmsg.SASLAuthenticateResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate on PLAINTEXT: %+v", resp)
	}
}

// plainLogin authenticates w with PLAIN through SaslHandshake v1 and
// SaslAuthenticate v2, and returns the answer.
func plainLogin(w *wireConn, user, pass string) *kmsg.SASLAuthenticateResponse {
	w.t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	w.roundTrip(hs)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version, auth.SASLAuthBytes = 2, []byte("\x00"+user+"\x00"+pass)
	return w.roundTrip(auth).(*kmsg.SASLAuthenticateResponse)
}

// TestSASLReauthentication: with connections.max.reauth.ms, SaslAuthenticate
// tells the session lifetime; kgo re-authenticates on the same connection
// and goes on; a connection that does not is closed at its next request.
func TestSASLReauthentication(t *testing.T) {
	_, addr := saslBroker(t, func(l *broker.Listener) { l.ReauthMax = 1500 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := saslClient(t, addr, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), kgo.AllowAutoTopicCreation())
	for i := range 4 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		time.Sleep(time.Second)
	}

	w := dialWire(t, addr)
	resp := plainLogin(w, "alice", "alice-secret")
	if resp.ErrorCode != 0 || resp.SessionLifetimeMillis != 1500 {
		t.Fatalf("authenticate: %+v", resp)
	}
	w.roundTrip(kmsg.NewPtrMetadataRequest())
	time.Sleep(1600 * time.Millisecond)
	w.send(kmsg.NewPtrMetadataRequest())
	w.expectClosed()
}

// TestReplicaFetchOnlyOnInterBrokerListener: a Fetch with a replica id,
// which moves high watermarks, is TOPIC_AUTHORIZATION_FAILED on any other
// listener than the inter-broker one, even authenticated.
func TestReplicaFetchOnlyOnInterBrokerListener(t *testing.T) {
	b, addr := saslBroker(t, nil)
	info := createTopic(t, b, "guarded", 1, nil)
	w := dialWire(t, addr)
	if resp := plainLogin(w, "alice", "alice-secret"); resp.ErrorCode != 0 {
		t.Fatalf("authenticate: %+v", resp)
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis = 12, 7, 0
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = info.Name
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp := w.roundTrip(req).(*kmsg.FetchResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("a replica fetch on the SASL listener: %+v", resp.Topics)
	}
}

// TestAlterUserScramCredentialsErrors: Kafka's checks and messages, one
// result per user; valid changes apply beside refused ones.
func TestAlterUserScramCredentialsErrors(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	w := dialWire(t, b.Addr)
	up := func(name string, mech int8, iters int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, iters, []byte("salt"), []byte("salted-password-0123456789abcdef")
		return u
	}
	del := func(name string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = name, mech
		return d
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{up("ok", 1, 4096), up("few", 1, 4095), up("many", 2, 16385),
		up("", 1, 4096), up("mech", 3, 4096), up("dup", 1, 4096), up("dup", 2, 4096)}
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{del("ghost", 1)}
	resp := w.roundTrip(req).(*kmsg.AlterUserSCRAMCredentialsResponse)
	want := map[string]struct {
		code int16
		msg  string
	}{
		"ok":    {0, ""},
		"few":   {kerr.UnacceptableCredential.Code, "Too few iterations"},
		"many":  {kerr.UnacceptableCredential.Code, "Too many iterations"},
		"":      {kerr.UnacceptableCredential.Code, "Username must not be empty"},
		"mech":  {kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism"},
		"dup":   {kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request"},
		"ghost": {kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist"},
	}
	if len(resp.Results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(resp.Results), len(want), resp.Results)
	}
	for _, r := range resp.Results {
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		if w := want[r.User]; r.ErrorCode != w.code || msg != w.msg {
			t.Errorf("%q: %d %q, want %d %q", r.User, r.ErrorCode, msg, w.code, w.msg)
		}
	}
	d := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range []string{"ok", "few", "ok"} {
		du := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		du.Name = u
		d.Users = append(d.Users, du)
	}
	dr := w.roundTrip(d).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if len(dr.Results) != 2 || dr.Results[0].User != "ok" || dr.Results[0].ErrorCode != kerr.DuplicateResource.Code ||
		dr.Results[1].User != "few" || dr.Results[1].ErrorCode != kerr.ResourceNotFound.Code {
		t.Fatalf("describe: %+v", dr.Results)
	}
}

// tlsListener is a listener over TLS with the CA's server certificate,
// client certificates required or not.
func tlsListener(t *testing.T, ca *testkit.CA, name string, p kafka.SecurityProtocol, clientAuth string) broker.Listener {
	t.Helper()
	server := ca.Issue(pkix.Name{CommonName: "broker"})
	cfg, err := broker.TLSConfig(broker.TLSSettings{"ssl.keystore.location": server.File, "ssl.truststore.location": ca.CertFile,
		"ssl.client.auth": clientAuth}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return broker.Listener{Name: name, Protocol: p, Addr: "127.0.0.1:0", TLS: cfg}
}

// TestSASLSSL: kgo over TLS with SCRAM-SHA-256 on a SASL_SSL listener
// (credentials made on the PLAINTEXT one) produces and consumes; a client
// that does not speak TLS there gets nothing served; and on an SSL
// listener that requires client certificates, a certificate of the CA is
// served while none, or one of another CA, is refused in the handshake.
func TestSASLSSL(t *testing.T) {
	ca, other := testkit.NewCA(t, "ringlog test CA"), testkit.NewCA(t, "another CA")
	b := startBroker(t, brokerOpts{Config: func(c *broker.Config) {
		l := tlsListener(t, ca, "SASL_SSL", kafka.SASLSSL, "none")
		l.Mechanisms = []string{"SCRAM-SHA-256"}
		c.Listeners = append(c.Listeners, l, tlsListener(t, ca, "SSL", kafka.SSL, "required"))
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := b.admin().AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-pw"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	saslAddr, sslAddr := b.B.ListenerAddr("SASL_SSL"), b.B.ListenerAddr("SSL")
	cl := saslClient(t, saslAddr, scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha256Mechanism(),
		kgo.DialTLSConfig(ca.ClientTLS(nil)), kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("over-tls"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "over-tls", Value: []byte("secret")}).FirstErr(); err != nil {
		t.Fatalf("produce over SASL_SSL: %v", err)
	}
	if fs := cl.PollFetches(ctx); fs.Err0() != nil || len(fs.Records()) != 1 || string(fs.Records()[0].Value) != "secret" {
		t.Fatalf("consume over SASL_SSL: %v %d", fs.Err0(), len(fs.Records()))
	}
	plain := saslClient(t, saslAddr, scram.Auth{User: "bob", Pass: "bob-pw"}.AsSha256Mechanism())
	if err := plain.Ping(ctx); err == nil {
		t.Fatal("a client without TLS was served on SASL_SSL")
	}

	alice := ca.Issue(pkix.Name{CommonName: "alice"})
	for name, c := range map[string]struct {
		cert *testkit.Issued
		ok   bool
	}{"the CA's certificate": {alice, true}, "no certificate": {nil, false}, "another CA's certificate": {other.Issue(pkix.Name{CommonName: "mallory"}), false}} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(sslAddr), kgo.DialTLSConfig(ca.ClientTLS(c.cert)), kgo.RequestRetries(0), kgo.RetryTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		err = cl.Ping(ctx)
		cl.Close()
		if (err == nil) != c.ok {
			t.Fatalf("%s on SSL with ssl.client.auth=required: %v", name, err)
		}
	}
}
