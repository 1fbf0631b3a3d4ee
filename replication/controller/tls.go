package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// The controller port over mutual TLS. Every connection, raft's and the
// forwarding RPC's, is TLS with a certificate both ways, checked against
// the cluster's CA; a node's certificate names its node id in its subject
// (CN=node-<id>), and the forwarding RPC acts for a broker only when the
// connection's certificate names that broker: a node cannot register,
// heartbeat, change an ISR, take producer ids or shut down for another.
// Raft's RPCs need a certificate of a voter.

// nodeCertPrefix starts a node certificate's common name: CN=node-<id>.
const nodeCertPrefix = "node-"

// NodeCertName is the common name a node's certificate must carry.
func NodeCertName(id int32) string { return nodeCertPrefix + strconv.Itoa(int(id)) }

// TLSConfig is the controller port's TLS: Server for connections this node
// accepts (it must require and verify client certificates), Client for
// those it opens (its certificate, and the CA that signs the others).
type TLSConfig struct {
	Server *tls.Config
	Client *tls.Config
	// ClientFor, when set, gives the configuration for one connection to
	// host in place of a clone of Client: for a caller that checks the
	// peer's certificate itself against CAs that change on disk, which
	// needs the name dialled (a shared VerifyConnection cannot learn an
	// IP address: there is no SNI for one).
	ClientFor func(host string) *tls.Config
}

func (t *TLSConfig) check() error {
	if t == nil {
		return nil
	}
	if t.Server == nil || t.Client == nil {
		return errors.New("controller: TLS needs both a server and a client configuration")
	}
	if t.Server.ClientAuth != tls.RequireAndVerifyClientCert {
		return errors.New("controller: TLS on the controller port must require and verify client certificates")
	}
	return nil
}

// certNodeID reads the node id a verified peer certificate names.
func certNodeID(st tls.ConnectionState) (int32, error) {
	if len(st.PeerCertificates) == 0 {
		return -1, errors.New("no client certificate")
	}
	return nodeIDOfCert(st.PeerCertificates[0])
}

func nodeIDOfCert(c *x509.Certificate) (int32, error) {
	cn := c.Subject.CommonName
	idStr, ok := strings.CutPrefix(cn, nodeCertPrefix)
	id, err := strconv.ParseInt(idStr, 10, 32)
	if !ok || err != nil || id < 0 {
		return -1, fmt.Errorf("certificate CN=%q names no node (want %s<id>)", cn, nodeCertPrefix)
	}
	return int32(id), nil
}

// handshake completes an accepted TLS connection within timeout and
// returns the node id its certificate names.
func handshake(conn net.Conn, timeout time.Duration) (int32, error) {
	tc, ok := conn.(*tls.Conn)
	if !ok {
		return -1, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return -1, err
	}
	return certNodeID(tc.ConnectionState())
}

// dial opens a connection to a peer's controller port: TLS with this
// node's certificate when configured, the peer's certificate checked
// against the CA and its name against the address dialled.
func (t *TLSConfig) dial(ctx context.Context, addr string) (net.Conn, error) {
	if t == nil {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	host, _, _ := net.SplitHostPort(addr)
	var cfg *tls.Config
	if t.ClientFor != nil {
		cfg = t.ClientFor(host)
	} else {
		cfg = t.Client.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
	}
	d := tls.Dialer{Config: cfg}
	return d.DialContext(ctx, "tcp", addr)
}

// actsFor reports the broker a command acts for, when it is one that only
// that broker may send.
func actsFor(c *command) (int32, bool) {
	switch c.typ {
	case cmdRegisterBroker, cmdHeartbeat, cmdAlterPartition, cmdAllocateProducerIDs, cmdControlledShutdown:
		return c.brokerID, true
	}
	return 0, false
}
