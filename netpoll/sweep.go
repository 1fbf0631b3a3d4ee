package netpoll

import (
	"time"
)

// sweeper is the one goroutine per server that closes idle connections
// (IdleTimeout) and connections whose client stopped reading
// (WriteTimeout). Connections never arm timers: the reader and the writer
// only raise a flag when bytes move (Conn.markRead, Conn.markWrite: a load,
// and a store at most once per sweep), and the sweeper, a few times per
// timeout, turns the flags it finds raised into times of its own.
type sweeper struct {
	every time.Duration
	stopc chan struct{}
	done  chan struct{}
	conns []*Conn // scratch: the live connections of one sweep
}

// sweepState is the sweeper's view of one connection, touched only by the
// sweeper goroutine (and by track, before the connection is shared).
type sweepState struct {
	lastRead, lastWrite time.Time // when the sweeper last saw bytes move
	stalled             bool      // responses were waiting at the last sweep
	stalledSince        time.Time // when the sweeper first saw them waiting
	// closed: the sweeper closed the connection; it stays live until its
	// engine has torn it down (a turn of its gnet loop, say), and must not
	// be closed, and counted, again meanwhile.
	closed bool
}

// sweepsPerTimeout: a connection is checked this often per timeout, so it
// outlives its timeout by at most an eighth of it.
const sweepsPerTimeout = 8

func (sw *sweeper) start(s *Server) {
	shortest := time.Duration(0)
	for _, d := range []time.Duration{s.cfg.IdleTimeout, s.cfg.WriteTimeout} {
		if d > 0 && (shortest == 0 || d < shortest) {
			shortest = d
		}
	}
	if shortest == 0 {
		return // both disabled: no goroutine
	}
	sw.every = min(max(shortest/sweepsPerTimeout, 5*time.Millisecond), time.Second)
	sw.stopc, sw.done = make(chan struct{}), make(chan struct{})
	go sw.run(s)
}

func (sw *sweeper) run(s *Server) {
	defer close(sw.done)
	t := time.NewTicker(sw.every)
	defer t.Stop()
	for {
		select {
		case <-sw.stopc:
			return
		case now := <-t.C:
			sw.sweep(s, now)
		}
	}
}

func (sw *sweeper) stop() {
	if sw.stopc != nil {
		close(sw.stopc)
		<-sw.done
	}
}

// sweep looks at every live connection once.
func (sw *sweeper) sweep(s *Server, now time.Time) {
	s.liveMu.Lock()
	for c := range s.live {
		sw.conns = append(sw.conns, c)
	}
	s.liveMu.Unlock()
	for _, c := range sw.conns {
		if c.sweep.closed {
			continue
		}
		if err := c.sweepCheck(now, s.cfg.IdleTimeout, s.cfg.WriteTimeout); err != nil {
			c.sweep.closed = true
			if err == ErrIdle {
				s.st.idleClosed.Add(1)
			} else {
				s.st.writeTimeouts.Add(1)
			}
			c.t.closeFor(err)
		}
	}
	clear(sw.conns)
	sw.conns = sw.conns[:0]
}

// sweepCheck updates the sweeper's view of c and says why c must close
// (ErrIdle, ErrWriteTimeout), or nil. A negative timeout is disabled.
func (c *Conn) sweepCheck(now time.Time, idle, write time.Duration) error {
	st := &c.sweep
	if c.readMark.Load() {
		c.readMark.Store(false)
		st.lastRead = now
	}
	if c.writeMark.Load() {
		c.writeMark.Store(false)
		st.lastWrite = now
	}
	// Response bytes waiting: netpoll's queue, and on gnet its outbound
	// buffer (published by the loop after each turn).
	waiting := c.queued.Load()+c.outBuffered.Load() > 0
	if !waiting {
		st.stalled = false
	} else if !st.stalled {
		st.stalled, st.stalledSince = true, now
	}
	if write > 0 && waiting && now.Sub(st.stalledSince) >= write && now.Sub(st.lastWrite) >= write {
		return ErrWriteTimeout
	}
	if idle > 0 && !waiting && now.Sub(st.lastRead) >= idle && now.Sub(st.lastWrite) >= idle && !c.busy() {
		return ErrIdle
	}
	return nil
}
