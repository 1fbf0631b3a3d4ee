package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// The controller port carries two protocols. raft's NetworkTransport opens
// every connection by writing the type of its first RPC, a byte from 0 to
// 4 (AppendEntries ... RequestPreVote); the forwarding RPC opens with
// rpcMagic. The mux accepts, reads one byte (with a deadline), and either
// serves the connection as forwarding RPC itself or hands it to raft's
// Accept with the byte put back in front.
//
//	client ──► [first byte] ─┬─ 0..4        ──► raft (byte restored)
//	                         ├─ rpcMagic    ──► forwarding RPC (rpc.go)
//	                         └─ quorumMagic ──► quorum RPC (quorum.go)

const (
	rpcMagic = 0xC7
	// peekTimeout bounds how long a connection may stay silent before its
	// first byte.
	peekTimeout = 5 * time.Second
	// maxConns bounds the connections accepted and open at once, both
	// protocols together (raft pools at most a few per peer).
	maxConns = 256
)

type mux struct {
	ln        net.Listener
	addr      advertisedAddr
	tls       *TLSConfig
	member    func(id int32) bool
	serveRPC  func(conn net.Conn, peer int32)
	serveQ    func(conn net.Conn, peer int32)
	log       *slog.Logger
	raftConns chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{} // every accepted connection not yet closed
}

var _ raft.StreamLayer = (*mux)(nil)

// advertisedAddr is the voter address raft knows this node by, whatever
// the listener is bound to.
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

// newMux serves the controller port on ln. With tlsCfg, ln is wrapped in
// TLS (client certificates required) and every connection's certificate
// names its node; raft's connections are taken only from the nodes member
// accepts (those of the raft configuration).
func newMux(ln net.Listener, addr string, tlsCfg *TLSConfig, member func(int32) bool, serveRPC, serveQuorum func(net.Conn, int32), log *slog.Logger) *mux {
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg.Server)
	}
	m := &mux{
		ln:        ln,
		addr:      advertisedAddr(addr),
		tls:       tlsCfg,
		member:    member,
		serveRPC:  serveRPC,
		serveQ:    serveQuorum,
		log:       log,
		raftConns: make(chan net.Conn),
		closed:    make(chan struct{}),
		conns:     map[net.Conn]struct{}{},
	}
	m.wg.Add(1)
	go m.acceptLoop()
	return m
}

func (m *mux) acceptLoop() {
	defer m.wg.Done()
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: wait instead of spinning.
			m.log.Warn("controller: accept failed", "error", err)
			select {
			case <-m.closed:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if !m.track(conn) {
			conn.Close()
			continue
		}
		m.wg.Add(1)
		go m.route(conn)
	}
}

// track registers an accepted connection; false when closed or full.
func (m *mux) track(c net.Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.closed:
		return false
	default:
	}
	if len(m.conns) >= maxConns {
		m.log.Warn("controller: too many connections, refusing one", "remote", c.RemoteAddr().String())
		return false
	}
	m.conns[c] = struct{}{}
	return true
}

func (m *mux) untrack(c net.Conn) {
	m.mu.Lock()
	delete(m.conns, c)
	m.mu.Unlock()
}

// route completes the TLS handshake (when configured), reads the first
// byte and dispatches the connection. peer is the node id of the
// connection's certificate (-1 without TLS: every peer is trusted).
func (m *mux) route(conn net.Conn) {
	defer m.wg.Done()
	peer, err := handshake(conn, peekTimeout)
	if err != nil {
		m.log.Warn("controller: connection refused", "remote", conn.RemoteAddr().String(), "error", err)
		m.untrack(conn)
		conn.Close()
		return
	}
	var first [1]byte
	err = conn.SetReadDeadline(time.Now().Add(peekTimeout))
	if err == nil {
		_, err = io.ReadFull(conn, first[:])
	}
	if err == nil {
		err = conn.SetReadDeadline(time.Time{})
	}
	if err != nil {
		m.untrack(conn)
		conn.Close()
		return
	}
	if first[0] == rpcMagic {
		m.serveRPC(conn, peer)
		m.untrack(conn)
		conn.Close()
		return
	}
	if first[0] == quorumMagic {
		m.serveQ(conn, peer)
		m.untrack(conn)
		conn.Close()
		return
	}
	if m.tls != nil && !m.member(peer) {
		m.log.Warn("controller: raft connection from a node that is no member of the quorum refused", "remote", conn.RemoteAddr().String(), "node", peer)
		m.untrack(conn)
		conn.Close()
		return
	}
	pc := &peekedConn{Conn: conn, first: first[0], pending: true, m: m}
	select {
	case m.raftConns <- pc:
	case <-m.closed:
		pc.Close()
	}
}

// Accept hands raft its connections.
func (m *mux) Accept() (net.Conn, error) {
	select {
	case c := <-m.raftConns:
		return c, nil
	case <-m.closed:
		return nil, net.ErrClosed
	}
}

// Close stops accepting, closes every accepted connection (raft's inbound
// handlers only return when their connection fails) and waits for the
// routing and RPC goroutines. Idempotent; raft's transport calls it too.
func (m *mux) Close() error {
	var err error
	m.closeOnce.Do(func() {
		close(m.closed)
		err = m.ln.Close()
		m.mu.Lock()
		for c := range m.conns {
			c.Close()
		}
		m.mu.Unlock()
		m.wg.Wait()
	})
	return err
}

func (m *mux) Addr() net.Addr { return m.addr }

// Dial opens a raft connection to a peer; raft writes its type byte first.
func (m *mux) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return m.tls.dial(ctx, string(addr))
}

// peekedConn gives back the byte the mux read before raft reads the rest.
// Only raft's one handler goroutine reads it.
type peekedConn struct {
	net.Conn
	first   byte
	pending bool
	m       *mux
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if c.pending && len(p) > 0 {
		p[0] = c.first
		c.pending = false
		return 1, nil
	}
	return c.Conn.Read(p)
}

func (c *peekedConn) Close() error {
	c.m.untrack(c.Conn)
	return c.Conn.Close()
}
