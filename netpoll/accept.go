package netpoll

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// acceptor is the listening socket and the goroutine that accepts from it,
// for both engines: gnet's own acceptor stops the whole engine when accept
// fails with anything but a reset (EMFILE, ENFILE, ENOBUFS, ENOMEM), so
// gnet is handed connections accepted here instead (see doc.go, "Accepting").
// Admission (MaxConns, MaxConnsPerIP) happens here too, before an engine
// sees the connection.
type acceptor struct {
	s    *Server
	ln   net.Listener
	done chan struct{} // closed when the accept goroutine returns

	// perIP counts open connections by client address, when a per-IP
	// bound is configured; limits holds the overrides.
	mu     sync.Mutex
	perIP  map[netip.Addr]int
	limits map[netip.Addr]int

	// quit is closed by stop: a Pace wait ends. held are the connections
	// Throttle holds until their close (under mu).
	quit chan struct{}
	held map[net.Conn]*time.Timer
}

// listen binds cfg.Addr with the keepalive settings every accepted socket
// inherits (Go's accept sets them on each connection, before either engine
// sees it; the descriptor gnet gets is a duplicate of the same socket).
func listen(s *Server) (*acceptor, error) {
	lc := net.ListenConfig{KeepAlive: -1}
	if d := s.cfg.KeepAlive; d > 0 {
		lc.KeepAliveConfig = net.KeepAliveConfig{Enable: true, Idle: d, Interval: d, Count: 9}
	}
	ln, err := lc.Listen(context.Background(), "tcp", s.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("netpoll: listen %s: %w", s.cfg.Addr, err)
	}
	a := &acceptor{s: s, ln: ln, done: make(chan struct{}), quit: make(chan struct{}), held: map[net.Conn]*time.Timer{}}
	if s.cfg.MaxConnsPerIP > 0 || len(s.cfg.MaxConnsPerIPOverrides) > 0 {
		a.perIP = make(map[netip.Addr]int)
		a.limits = make(map[netip.Addr]int, len(s.cfg.MaxConnsPerIPOverrides))
		for ip, n := range s.cfg.MaxConnsPerIPOverrides {
			a.limits[netip.MustParseAddr(ip).Unmap()] = n // checked by withDefaults
		}
	}
	return a, nil
}

// run accepts until the listener closes, and hands every admitted
// connection to serve. Errors other than the listener closing (out of
// descriptors, out of buffers) are waited out with a growing delay, as
// net/http does, rather than stop serving everyone: connections closing
// free descriptors, and the ones waiting meanwhile sit in the kernel's
// backlog.
//
// A connection that serve could not take for want of descriptors (the
// uring engine duplicates each one) counts as a failed accept: the
// connection is gone, and the acceptor waits as above.
func (a *acceptor) run(serve func(nc net.Conn, ip netip.Addr) error) {
	defer close(a.done)
	var delay time.Duration
	backOff := func(err error) {
		delay = min(max(2*delay, 5*time.Millisecond), time.Second)
		a.s.log.Warn("netpoll: accept failed; retrying", "err", err, "delay", delay)
		time.Sleep(delay)
	}
	for {
		nc, err := a.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			backOff(err)
			continue
		}
		ip := remoteIP(nc)
		if !a.limit(nc, ip) {
			continue
		}
		if !a.admit(ip) {
			_ = nc.Close()
			continue
		}
		if err := serve(nc, ip); err != nil {
			backOff(err)
			continue
		}
		delay = 0
	}
}

// stop closes the listener and waits for the accept goroutine, then
// closes the connections Throttle held.
func (a *acceptor) stop() {
	close(a.quit)
	_ = a.ln.Close()
	<-a.done
	a.mu.Lock()
	for nc, t := range a.held {
		t.Stop()
		_ = nc.Close()
	}
	clear(a.held)
	a.mu.Unlock()
}

// limit asks the ConnLimiter about a connection just accepted: it waits
// what Pace says, then holds the connection for closing if Throttle says
// so, and reports false.
func (a *acceptor) limit(nc net.Conn, ip netip.Addr) bool {
	l := a.s.cfg.ConnLimiter
	if l == nil {
		return true
	}
	if d := l.Pace(); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-a.quit:
			t.Stop()
			_ = nc.Close()
			return false
		}
	}
	d := l.Throttle(ip)
	if d <= 0 {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-a.quit:
		_ = nc.Close()
		return false
	default:
	}
	a.held[nc] = time.AfterFunc(d, func() {
		a.mu.Lock()
		delete(a.held, nc)
		a.mu.Unlock()
		_ = nc.Close()
	})
	return false
}

func remoteIP(nc net.Conn) netip.Addr {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// admit counts a new connection against MaxConns and the per-IP bound, or
// refuses it (Stats.Rejected).
func (a *acceptor) admit(ip netip.Addr) bool {
	s := a.s
	if s.closing.Load() {
		s.st.rejected.Add(1)
		return false
	}
	for {
		n := s.st.conns.Load()
		if n >= int64(s.cfg.MaxConns) {
			s.st.rejected.Add(1)
			return false
		}
		if s.st.conns.CompareAndSwap(n, n+1) {
			break
		}
	}
	if a.perIP != nil {
		a.mu.Lock()
		limit, ok := a.limits[ip]
		if !ok {
			limit = s.cfg.MaxConnsPerIP
		}
		if limit > 0 || ok {
			if a.perIP[ip] >= limit {
				a.mu.Unlock()
				s.st.conns.Add(-1)
				s.st.rejected.Add(1)
				return false
			}
		}
		a.perIP[ip]++
		a.mu.Unlock()
	}
	s.st.accepted.Add(1)
	return true
}

// release gives back what admit counted, once the connection is gone.
func (a *acceptor) release(ip netip.Addr) {
	if a.perIP != nil {
		a.mu.Lock()
		if a.perIP[ip]--; a.perIP[ip] <= 0 {
			delete(a.perIP, ip)
		}
		a.mu.Unlock()
	}
	a.s.st.conns.Add(-1)
}
