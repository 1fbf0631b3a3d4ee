package fetcher_test

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"ringlog/broker"
	"ringlog/engine"
	"ringlog/internal/testkit"
	"ringlog/internal/testkit/testbroker"
	"ringlog/kafka"
	"ringlog/replication/fetcher"
)

// TestStreamTLSSCRAM: ringlog's broker with a SASL_SSL inter-broker
// listener (SCRAM-SHA-512, super.users=User:broker) and a PLAINTEXT one
// for clients. A stream that dials it with TLS (the broker's own client
// configuration: hostname checked against the truststore's CA) and
// authenticates as broker copies a partition, and its replica fetches are
// authorized (a replica id outside the partition's replicas is then
// NOT_LEADER_OR_FOLLOWER, as for any broker); as alice, a SCRAM user who
// is not a super user, its replica fetches are TOPIC_AUTHORIZATION_FAILED;
// with a wrong password it never connects, the error ErrAuthentication.
func TestStreamTLSSCRAM(t *testing.T) {
	ca := testkit.NewCA(t, "ringlog test CA")
	node := ca.Issue(pkix.Name{CommonName: "node-0"})
	ts := broker.TLSSettings{"ssl.keystore.location": node.File, "ssl.truststore.location": ca.CertFile}
	serverTLS, err := broker.TLSConfig(ts, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	clientTLS, err := broker.InterBrokerTLS(ts, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testbroker.Config(t.TempDir())
	cfg.InterBrokerName = "INTERNAL"
	cfg.InterBroker = broker.Listener{Protocol: kafka.SASLSSL, TLS: serverTLS, Mechanisms: []string{"SCRAM-SHA-512"}}
	cfg.InterBrokerClient = broker.InterBrokerClient{TLS: clientTLS, Mechanism: "SCRAM-SHA-512", Username: "broker", Password: "broker-secret"}
	cfg.SuperUsers = []string{"User:broker"}
	cfg.Listeners = []broker.Listener{{Name: "CLIENT", Protocol: kafka.Plaintext, Addr: "127.0.0.1:0"}}
	b := testbroker.StartBroker(t, cfg)
	clientAddr := b.B.ListenerAddr("CLIENT")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, clientAddr))
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "broker", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "broker-secret"},
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"},
	})
	if err != nil || res.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, res.Error())
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "secure"); err != nil {
		t.Fatal(err)
	}
	var id [16]byte
	for _, ti := range b.Engine().Topics() {
		if ti.Name == "secure" {
			id = ti.ID
		}
	}
	produce(t, producer(t, clientAddr), "secure", []int32{0}, 100, 50, 10)
	tp := engine.TP{Topic: "secure"}
	stream := func(replica int32, user, password string) (*fetcher.Stream, *follower) {
		f := newFollower(t)
		s := newStream(t, fetcher.Config{Addr: b.Addr, ReplicaID: replica, TLS: clientTLS,
			SASL:             scram.Auth{User: user, Pass: password}.AsSha512Mechanism(),
			ReconnectBackoff: 10 * time.Millisecond, ReconnectBackoffMax: 50 * time.Millisecond}, f)
		s.Add(fetcher.Partition{TP: tp, TopicID: id, LeaderEpoch: -1})
		return s, f
	}

	s, f := stream(-1, "broker", "broker-secret")
	f.waitFor("the copy over TLS and SCRAM", 10*time.Second, func() bool { return f.logLocked(tp).records == 100 })
	f.check()
	if st := s.Stats(); !st.Connected || st.Connects != 1 {
		t.Errorf("stream as broker: connected %v after %d connects (%v)", st.Connected, st.Connects, st.LastConnError)
	}

	_, f = stream(42, "broker", "broker-secret")
	f.waitFor("a pause", 10*time.Second, func() bool { return f.paused[tp] != nil })
	f.mu.Lock()
	err = f.paused[tp]
	f.mu.Unlock()
	if !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Errorf("replica fetch as broker: paused with %v, want NOT_LEADER_OR_FOLLOWER (authorized, not a replica)", err)
	}

	s, f = stream(42, "alice", "alice-secret")
	waitStats(t, s, "alice's replica fetch refused", func(st fetcher.Stats) bool {
		return len(st.Partitions) == 1 && errors.Is(st.Partitions[0].Err, kerr.TopicAuthorizationFailed)
	})
	if c := f.copyOf(tp); c.calls != 0 {
		t.Error("alice's replica fetch was served")
	}

	s, f = stream(-1, "broker", "wrong")
	waitStats(t, s, "the authentication to fail", func(st fetcher.Stats) bool {
		return errors.Is(st.LastConnError, fetcher.ErrAuthentication) && st.Connects == 0
	})
	time.Sleep(200 * time.Millisecond) // several reconnects
	if st, c := s.Stats(), f.copyOf(tp); st.Connects != 0 || c.calls != 0 {
		t.Errorf("with a wrong password: %d connects, %d Records calls", st.Connects, c.calls)
	}
}

// TestStreamReauthenticates: on an inter-broker listener whose sessions
// last 400 ms (connections.max.reauth.ms), a stream connects again before
// its session expires, so the leader never has to close the connection
// under it: no disconnection, and the copy is whole.
func TestStreamReauthenticates(t *testing.T) {
	cfg := testbroker.Config(t.TempDir())
	cfg.InterBrokerName = "INTERNAL"
	cfg.InterBroker = broker.Listener{Protocol: kafka.SASLPlaintext, Mechanisms: []string{"PLAIN"},
		PlainUsers: map[string]string{"broker": "broker-secret"}, ReauthMax: 400 * time.Millisecond}
	cfg.InterBrokerClient = broker.InterBrokerClient{Mechanism: "PLAIN", Username: "broker", Password: "broker-secret"}
	cfg.SuperUsers = []string{"User:broker"}
	cfg.Listeners = []broker.Listener{{Name: "CLIENT", Protocol: kafka.Plaintext, Addr: "127.0.0.1:0"}}
	b := testbroker.StartBroker(t, cfg)
	clientAddr := b.B.ListenerAddr("CLIENT")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(newClient(t, clientAddr)).CreateTopic(ctx, 1, 1, nil, "reauth"); err != nil {
		t.Fatal(err)
	}
	var id [16]byte
	for _, ti := range b.Engine().Topics() {
		if ti.Name == "reauth" {
			id = ti.ID
		}
	}
	tp := engine.TP{Topic: "reauth"}
	f := newFollower(t)
	s := newStream(t, fetcher.Config{Addr: b.Addr, ReplicaID: -1, WaitMax: 100 * time.Millisecond,
		SASL: plain.Auth{User: "broker", Pass: "broker-secret"}.AsMechanism()}, f)
	s.Add(fetcher.Partition{TP: tp, TopicID: id, LeaderEpoch: -1})
	prod := producer(t, clientAddr)
	for i := range 15 {
		produce(t, prod, "reauth", []int32{0}, 10, 20, 10)
		f.waitLEO(int64(10*(i+1)), 10*time.Second, tp)
		time.Sleep(100 * time.Millisecond)
	}
	f.check()
	st := s.Stats()
	if st.Connects < 3 || st.Disconnects != 0 {
		t.Errorf("over %d sessions of 400 ms: %d connects, %d disconnects (%v)", 2500/400, st.Connects, st.Disconnects, st.LastConnError)
	}
}
