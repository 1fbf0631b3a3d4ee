package netpoll

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// portable serves connections with the standard net package: an accept
// goroutine, and a reader and a writer goroutine per connection. Blocking
// reads give natural back-pressure: a paused connection is simply not read,
// so the client's requests wait in the kernel's buffers and TCP's window.
type portable struct {
	s  *Server
	ln net.Listener

	acceptDone chan struct{}
	mu         sync.Mutex
	conns      map[*pconn]struct{}
	wg         sync.WaitGroup // connection goroutines
}

func listenPortable(s *Server) (engine, error) {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("netpoll: listen %s: %w", s.cfg.Addr, err)
	}
	s.addr = ln.Addr()
	p := &portable{s: s, ln: ln, acceptDone: make(chan struct{}), conns: make(map[*pconn]struct{})}
	go p.acceptLoop()
	return p, nil
}

func (p *portable) name() string { return "portable" }

func (p *portable) acceptLoop() {
	defer close(p.acceptDone)
	var delay time.Duration
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off and go on, as
			// net/http does, rather than stop serving everyone.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			p.s.log.Warn("netpoll: accept failed; retrying", "err", err, "delay", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if !p.s.admit() {
			_ = nc.Close()
			continue
		}
		pc := newPconn(p, nc)
		p.mu.Lock()
		p.conns[pc] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go pc.readLoop()
		go pc.writeLoop()
	}
}

func (p *portable) stopAccepting() {
	_ = p.ln.Close()
	<-p.acceptDone
}

func (p *portable) shutdown() {
	p.stopAccepting()
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
