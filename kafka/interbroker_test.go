package kafka_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/internal/testkit"
	"ringlog/internal/testkit/testbroker"
	"ringlog/kafka"
)

// TestReplicaFetchNeedsSuperUser: on an inter-broker listener that
// authenticates (SASL_SSL with PLAIN, SSL with client certificates), a
// replica fetch is served only to a principal of super.users, as Kafka
// serves it only with CLUSTER_ACTION; another principal, authenticated
// all the same, gets TOPIC_AUTHORIZATION_FAILED for every partition.
func TestReplicaFetchNeedsSuperUser(t *testing.T) {
	ca := testkit.NewCA(t, "ringlog test CA")
	node := ca.Issue(pkix.Name{CommonName: "node-0"})
	ts := broker.TLSSettings{"ssl.keystore.location": node.File, "ssl.truststore.location": ca.CertFile}
	clientTLS, err := broker.InterBrokerTLS(ts, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	serverTLS := func(clientAuth string) *tls.Config {
		s := broker.TLSSettings{"ssl.client.auth": clientAuth}
		for k, v := range ts {
			s[k] = v
		}
		c, err := broker.TLSConfig(s, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, c := range []struct {
		name string
		cfg  func(*broker.Config)
		// dial connects to the inter-broker listener as user (a SASL
		// username or a certificate's CN).
		dial func(t *testing.T, addr, user string) *wireConn
	}{
		{"SASL_SSL", func(cfg *broker.Config) {
			cfg.InterBroker = broker.Listener{Protocol: kafka.SASLSSL, TLS: serverTLS("none"), Mechanisms: []string{"PLAIN"},
				PlainUsers: map[string]string{"broker": "broker-secret", "alice": "alice-secret"}}
			cfg.InterBrokerClient = broker.InterBrokerClient{TLS: clientTLS, Mechanism: "PLAIN", Username: "broker", Password: "broker-secret"}
			cfg.SuperUsers = []string{"User:broker"}
		}, func(t *testing.T, addr, user string) *wireConn {
			w := dialTLSWire(t, addr, ca.ClientTLS(nil))
			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.Version, hs.Mechanism = 1, "PLAIN"
			w.roundTrip(hs)
			auth := kmsg.NewPtrSASLAuthenticateRequest()
			auth.Version, auth.SASLAuthBytes = 2, []byte("\x00"+user+"\x00"+user+"-secret")
			if resp := w.roundTrip(auth).(*kmsg.SASLAuthenticateResponse); resp.ErrorCode != 0 {
				t.Fatalf("authenticate as %s: %+v", user, resp)
			}
			return w
		}},
		{"SSL", func(cfg *broker.Config) {
			cfg.InterBroker = broker.Listener{Protocol: kafka.SSL, TLS: serverTLS("required")}
			cfg.InterBrokerClient = broker.InterBrokerClient{TLS: clientTLS}
			cfg.SuperUsers = []string{"User:CN=node-0"}
		}, func(t *testing.T, addr, user string) *wireConn {
			cert := node
			if user != "node-0" {
				cert = ca.Issue(pkix.Name{CommonName: user})
			}
			return dialTLSWire(t, addr, ca.ClientTLS(cert))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testbroker.Config(t.TempDir())
			cfg.InterBrokerName = "INTERNAL"
			c.cfg(&cfg)
			cfg.Listeners = []broker.Listener{{Name: "CLIENT", Protocol: kafka.Plaintext, Addr: "127.0.0.1:0"}}
			// Not startBroker: its readiness probe speaks PLAINTEXT to the
			// inter-broker listener.
			tb := testbroker.StartBroker(t, cfg)
			b := &testBroker{Broker: tb, t: t, Engine: tb.Engine()}
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.B.ListenerAddr("CLIENT")))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "guarded"); err != nil {
				t.Fatal(err)
			}
			waitLeading(t, b, "guarded")
			fetch := func(user string) []int16 {
				w := c.dial(t, b.Addr, user)
				req := kmsg.NewPtrFetchRequest()
				req.Version, req.ReplicaID, req.MaxWaitMillis = 12, 7, 0
				ft := kmsg.NewFetchRequestTopic()
				ft.Topic = "guarded"
				for p := range int32(2) {
					fp := kmsg.NewFetchRequestTopicPartition()
					fp.Partition, fp.PartitionMaxBytes = p, 1<<20
					ft.Partitions = append(ft.Partitions, fp)
				}
				req.Topics = append(req.Topics, ft)
				resp := w.roundTrip(req).(*kmsg.FetchResponse)
				var codes []int16
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						codes = append(codes, rp.ErrorCode)
					}
				}
				return codes
			}
			for _, code := range fetch("alice") {
				if code != kerr.TopicAuthorizationFailed.Code {
					t.Errorf("alice's replica fetch: %v, want TOPIC_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
				}
			}
			// A super user passes; broker 7 is no replica of the
			// partitions, which is the next thing the leader says.
			super := map[string]string{"SASL_SSL": "broker", "SSL": "node-0"}[c.name]
			for _, code := range fetch(super) {
				if code != kerr.NotLeaderForPartition.Code {
					t.Errorf("%s's replica fetch: %v, want NOT_LEADER_OR_FOLLOWER", super, kerr.ErrorForCode(code))
				}
			}
		})
	}
}

// dialTLSWire is dialWire over TLS.
func dialTLSWire(t *testing.T, addr string, cfg *tls.Config) *wireConn {
	t.Helper()
	w := dialWire(t, addr)
	tc := tls.Client(w.c, cfg)
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS handshake with %s: %v", addr, err)
	}
	tc.SetDeadline(time.Time{})
	w.c, w.r = tc, bufio.NewReader(tc)
	return w
}
