package netpoll

import (
	"crypto/tls"
	"net"
	"net/netip"
	"sync"
)

// portable serves connections with the standard net package: a reader and
// a writer goroutine per connection, fed by the acceptor. Blocking reads
// give natural back-pressure: a paused connection is simply not read, so
// the client's requests wait in the kernel's buffers and TCP's window.
// TLS connections are served here only (see Config.TLS).
type portable struct {
	s *Server

	mu    sync.Mutex
	conns map[*pconn]struct{}
	wg    sync.WaitGroup // connection goroutines
}

func newPortable(s *Server) engine {
	return &portable{s: s, conns: make(map[*pconn]struct{})}
}

func (p *portable) name() string { return "portable" }

// serve implements engine: the connection's goroutines start at once; a
// TLS handshake runs on the reader goroutine, not here.
func (p *portable) serve(nc net.Conn, ip netip.Addr) error {
	pc := newPconn(p, nc, ip)
	if cfg := p.s.cfg.TLS; cfg != nil {
		pc.tc = tls.Server(nc, cfg)
		pc.nc = pc.tc
	}
	p.mu.Lock()
	p.conns[pc] = struct{}{}
	p.mu.Unlock()
	p.s.track(pc.c)
	p.wg.Add(2)
	go pc.readLoop()
	go pc.writeLoop()
	return nil
}

// stopAccepting implements engine: serve hands over synchronously, so
// nothing is on its way once the acceptor has stopped.
func (p *portable) stopAccepting() {}

func (p *portable) shutdown() {
	p.mu.Lock()
	for pc := range p.conns {
		pc.closeWith(ErrClosed)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *portable) forget(pc *pconn) {
	p.mu.Lock()
	delete(p.conns, pc)
	p.mu.Unlock()
}
