package controller

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net"
	"testing"
	"time"

	"ringlog/internal/testkit"
)

// nodeTLS is node id's controller TLS from ca: its certificate CN=node-<id>.
func nodeTLS(ca *testkit.CA, id int32) *TLSConfig {
	cert := ca.Issue(pkix.Name{CommonName: NodeCertName(id)})
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &TLSConfig{
		Server: &tls.Config{Certificates: []tls.Certificate{cert.TLS}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12},
		Client: &tls.Config{Certificates: []tls.Certificate{cert.TLS}, RootCAs: pool, MinVersion: tls.VersionTLS12},
	}
}

// forwardAs sends cmd to addr's forwarding RPC over a connection whose
// client certificate is cert (nil: none; plain: no TLS at all) and
// returns the answer's error, or the transport's.
func forwardAs(t *testing.T, addr string, cfg *tls.Config, cmd *command) (error, error) {
	t.Helper()
	var conn net.Conn
	var err error
	if cfg == nil {
		conn, err = net.DialTimeout("tcp", addr, 5*time.Second)
	} else {
		conn, err = tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	}
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte{rpcMagic}); err != nil {
		return nil, err
	}
	if err := writeFrame(conn, encodeRequest(5*time.Second, cmd.encode())); err != nil {
		return nil, err
	}
	body, err := readFrame(bufio.NewReader(conn))
	if err != nil {
		return nil, err
	}
	_, rerr := decodeResponse(body)
	return rerr, nil
}

// TestControllerMutualTLS: a quorum whose controller port runs over
// mutual TLS elects a leader and forwards a broker's registration; the
// forwarding RPC refuses a command that acts for another broker than the
// certificate names (CLUSTER_AUTHORIZATION_FAILED), and a connection
// without TLS, without a certificate, or with another CA's certificate is
// not served.
func TestControllerMutualTLS(t *testing.T) {
	ca, other := testkit.NewCA(t, "cluster CA"), testkit.NewCA(t, "another CA")
	nodes := newCluster(t, 3, func(c *Config) { c.TLS = nodeTLS(ca, c.NodeID) })
	leader := waitLeader(t, nodes, 20*time.Second)
	var follower *testNode
	for _, nd := range nodes {
		if nd != leader {
			follower = nd
			break
		}
	}
	ctx := ctxTimeout(t, 20*time.Second)
	id := follower.cfg.NodeID
	if _, err := follower.c.RegisterBroker(ctx, BrokerInfo{ID: id, Addr: "127.0.0.1:19092"}); err != nil {
		t.Fatalf("broker %d registering through its own controller over TLS: %v", id, err)
	}
	addr := leader.cfg.Voters[leader.cfg.NodeID-1].Addr
	forged := &command{typ: cmdRegisterBroker, brokerID: 99, addr: "127.0.0.1:6666"}
	rerr, err := forwardAs(t, addr, follower.cfg.TLS.Client, forged)
	if err != nil || !errors.Is(rerr, ErrClusterAuthorization) {
		t.Fatalf("node %d registering broker 99: %v (transport %v), want CLUSTER_AUTHORIZATION_FAILED", id, rerr, err)
	}
	if _, ok := leader.c.Image().Broker(99); ok {
		t.Fatal("broker 99 was registered")
	}
	own := &command{typ: cmdHeartbeat, brokerID: id, epoch: -5}
	if rerr, err := forwardAs(t, addr, follower.cfg.TLS.Client, own); err != nil || errors.Is(rerr, ErrClusterAuthorization) {
		t.Fatalf("node %d's own heartbeat: %v (transport %v), want it judged on its epoch", id, rerr, err)
	}
	stranger := nodeTLS(other, id).Client
	stranger.RootCAs = follower.cfg.TLS.Client.RootCAs
	noCert := follower.cfg.TLS.Client.Clone()
	noCert.Certificates = nil
	for name, cfg := range map[string]*tls.Config{"no TLS": nil, "no certificate": noCert, "another CA's certificate": stranger} {
		if rerr, err := forwardAs(t, addr, cfg, &command{typ: cmdNoop}); err == nil {
			t.Fatalf("%s was served (answer %v)", name, rerr)
		}
	}
}

// TestControllerMutualTLSObserver: under mutual TLS a broker-only node
// joins by a bootstrap address (the leader's raft connections to it are
// taken while its configuration is empty, then because the leader is a
// member) and applies the log; a quorum heartbeat naming another node
// than the certificate is refused.
func TestControllerMutualTLSObserver(t *testing.T) {
	ca := testkit.NewCA(t, "cluster CA")
	nodes := newCluster(t, 1, func(c *Config) { c.TLS = nodeTLS(ca, c.NodeID) })
	leader := waitLeader(t, nodes, 10*time.Second)
	ln := listen(t)
	cfg := leader.cfg
	cfg.NodeID, cfg.Voters, cfg.Dir, cfg.Listener, cfg.TLS = 4, nil, t.TempDir(), ln, nodeTLS(ca, 4)
	cfg.Addr, cfg.BootstrapServers, cfg.NonVoter = ln.Addr().String(), []string{leader.cfg.Voters[0].Addr}, true
	b := &testNode{cfg: cfg}
	b.open(t)
	t.Cleanup(func() { b.close(t) })
	if err := b.c.Sync(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatalf("observer Sync over TLS: %v", err)
	}
	// Node 4's certificate heartbeating as node 7.
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", leader.cfg.Voters[0].Addr, b.cfg.TLS.Client)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	e := &encoder{}
	e.u32(5000)
	e.u8(opHeartbeat)
	e.i32(7)
	e.str("127.0.0.1:1")
	e.str("")
	e.bool(true)
	e.u64(1)
	if _, err := conn.Write([]byte{quorumMagic}); err != nil {
		t.Fatal(err)
	}
	if err := writeFrame(conn, e.b); err != nil {
		t.Fatal(err)
	}
	body, err := readFrame(bufio.NewReader(conn))
	if err != nil {
		t.Fatal(err)
	}
	if _, rerr := decodeResponse(body); !errors.Is(rerr, ErrClusterAuthorization) {
		t.Fatalf("node 4 heartbeating as node 7: %v, want CLUSTER_AUTHORIZATION_FAILED", rerr)
	}
}
