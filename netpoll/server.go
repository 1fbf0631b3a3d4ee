package netpoll

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Handler receives a connection's frames. See doc.go for the concurrency
// contract.
type Handler interface {
	// Serve is called once per request frame, in arrival order for a
	// connection, on that connection's event loop (gnet) or reader goroutine
	// (portable); never concurrently for one connection. frame is the body
	// the Splitter cut (with LengthPrefixed, the frame without its length
	// prefix), owned by the handler (it may keep slices of it after Serve
	// returns) until it gives it back with c.Recycle(seq), if ever. Serve
	// must not block.
	// The handler later calls exactly one of c.Reply(seq, r) or
	// c.NoReply(seq), from any goroutine, or closes the connection.
	Serve(c *Conn, seq uint64, frame []byte)
	// Closed is called once when the connection is gone, on the same
	// goroutine as Serve and never concurrently with it, after the last
	// Serve. Answers that arrive afterwards are released and dropped.
	Closed(c *Conn)
}

// Opener is a Handler that wants to know of a connection before its first
// frame: a deadline to authenticate runs from the connection's first
// moment, not from its first request. Opened is called once per
// connection, on the goroutine Serve will be called on, after a TLS
// handshake has completed and before any Serve. A connection whose TLS
// handshake fails is never opened, but Closed is called for it.
type Opener interface {
	Opened(c *Conn)
}

// engine is one implementation of the connection layer.
type engine interface {
	// name is "gnet" or "portable", for logs.
	name() string
	// serve takes over a connection the acceptor admitted: from now on
	// the engine serves it, and calls Server.forget once it is gone. On
	// the accept goroutine; it must not block on the client. An error is
	// the process out of descriptors (the uring engine's dup): the
	// connection is closed and released, and the acceptor backs off as
	// from a failed accept.
	serve(nc net.Conn, ip netip.Addr) error
	// stopAccepting returns once every connection handed to serve is
	// either running or gone (the acceptor has stopped already).
	stopAccepting()
	// shutdown closes every connection (dropping what is unwritten) and
	// returns once every connection has been torn down and Handler.Closed
	// has run for it.
	shutdown()
}

// Server accepts connections and serves their frames to a Handler. Its
// methods may be called from any goroutine.
type Server struct {
	cfg  Config
	h    Handler
	log  *slog.Logger
	addr net.Addr
	st   counters
	eng  engine
	acc  *acceptor

	// live holds the open connections, for the sweeper (IdleTimeout,
	// WriteTimeout). Connections enter on open and leave on close, never
	// on the path of a request.
	liveMu sync.Mutex
	live   map[*Conn]struct{}
	sweep  sweeper

	// reqBytes is the sum of the request frames handed to the handler and
	// not yet answered, kept only when MaxQueuedRequestBytes is set;
	// budgetWait holds the connections paused on it, woken when answers
	// bring the sum back under the budget.
	reqBytes   atomic.Int64
	budgetMu   sync.Mutex
	budgetWait map[*Conn]struct{}

	// closing is set by Close: no new connection, no new request served.
	closing atomic.Bool

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error

	// done is closed when the server stops serving, by Close or on its
	// own; stopErr says why, set once before done closes.
	doneOnce sync.Once
	done     chan struct{}
	stopErr  error
}

// Listen binds cfg.Addr and serves connections in the background with the
// implementation cfg selects. It returns once the socket is listening.
func Listen(cfg Config, h Handler) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("%w: nil handler", ErrConfig)
	}
	s := &Server{cfg: cfg, h: h, log: cfg.Logger, closed: make(chan struct{}), done: make(chan struct{}),
		live: make(map[*Conn]struct{}), budgetWait: make(map[*Conn]struct{})}
	s.acc, err = listen(s)
	if err != nil {
		return nil, err
	}
	s.addr = s.acc.ln.Addr()
	var detail string
	s.eng, detail, err = startEngine(s)
	if err != nil {
		_ = s.acc.ln.Close()
		return nil, err
	}
	s.sweep.start(s)
	go s.acc.run(s.eng.serve)
	s.log.Info("netpoll: listening", "addr", s.addr.String(), "io", s.eng.name(), "detail", detail,
		"tls", cfg.TLS != nil, "max_frame_bytes", cfg.MaxFrameBytes, "initial_max_frame_bytes", cfg.InitialMaxFrameBytes,
		"max_in_flight", cfg.MaxInFlight, "max_queued_bytes", cfg.MaxQueuedBytes,
		"max_queued_request_bytes", cfg.MaxQueuedRequestBytes, "max_conns", cfg.MaxConns,
		"max_conns_per_ip", cfg.MaxConnsPerIP, "idle_timeout", cfg.IdleTimeout,
		"write_timeout", cfg.WriteTimeout, "keepalive", cfg.KeepAlive)
	return s, nil
}

// startEngine starts the implementation cfg.IO asks for, or the one it
// falls back to, and says why in detail.
func startEngine(s *Server) (engine, string, error) {
	cfg := &s.cfg
	io := cfg.IO
	switch {
	case cfg.TLS != nil:
		return newPortable(s), "TLS: event loops cannot terminate TLS", nil
	case io == IOPortable:
		return newPortable(s), "configured", nil
	case io == IOUring || io == IOUringShards || io == IOUringLoops:
		probe := probeUring
		if cfg.uring != nil && cfg.uring.probe != nil {
			probe = cfg.uring.probe
		}
		why := probe()
		if why == "" {
			if io == IOUringShards && len(cfg.Owners) == 0 {
				s.log.Warn("netpoll: no ring owners given; connections on io_uring loops of netpoll's own", "addr", cfg.Addr)
			}
			e, err := startUring(s)
			if err == nil {
				if e.name() == IOUringShards {
					return e, fmt.Sprintf("connections on %d ring owners", len(cfg.Owners)), nil
				}
				return e, fmt.Sprintf("%d io_uring event loops", cfg.Loops), nil
			}
			why = err.Error()
		}
		if cfg.autoIO {
			s.log.Info("netpoll: io_uring network path unavailable; epoll loops (gnet)", "addr", cfg.Addr, "reason", why)
		} else {
			s.log.Warn("netpoll: io_uring network path unavailable; falling back to gnet", "addr", cfg.Addr, "reason", why)
		}
		fallthrough
	default:
		if !gnetSupported {
			return newPortable(s), "gnet not supported on this system", nil
		}
		e, err := startGnet(s)
		return e, fmt.Sprintf("%d event loops", cfg.Loops), err
	}
}

// Addr returns the address the server listens on (with the real port when
// Config.Addr asked for port 0).
func (s *Server) Addr() net.Addr { return s.addr }

// IO reports the implementation serving: "gnet", "uring" or "portable".
func (s *Server) IO() string { return s.eng.name() }

// Done returns a channel closed when the server has stopped serving: once
// Close has finished, or as soon as its implementation stopped on its own
// (gnet's engine ended without Close: a poller failure), in which case the
// listener is closed too, and the process should exit rather than look
// alive. Any goroutine.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err returns why the server stopped on its own (ErrEngineStopped, with
// the cause), or nil: while it serves, and after Close. Any goroutine.
func (s *Server) Err() error {
	select {
	case <-s.done:
		return s.stopErr
	default:
		return nil
	}
}

// stopped closes Done, with err as Err, unless it is closed already.
func (s *Server) stopped(err error) {
	s.doneOnce.Do(func() {
		s.stopErr = err
		if err != nil {
			_ = s.acc.ln.Close() // refuse rather than accept and drop
		}
		close(s.done)
	})
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats { return s.st.snapshot(s) }

// Close shuts the server down gracefully: it stops accepting connections
// and serving new requests at once, waits until every request already
// handed to the handler is answered and its response written (or ctx is
// done), then closes every connection. Responses not written by then are
// dropped, their OnDone run. It returns ctx's error if ctx ended the wait.
// Calls after the first wait for it and return its result.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		s.acc.stop()
		s.eng.stopAccepting()
		s.closeErr = s.drain(ctx)
		s.eng.shutdown()
		s.sweep.stop()
		s.log.Info("netpoll: closed", "addr", s.addr.String(), "err", s.closeErr)
		s.stopped(nil)
		close(s.closed)
	})
	<-s.closed
	return s.closeErr
}

// drain waits until no request is in flight. Polling keeps the hot path free
// of any shutdown signalling; the wait is short and happens once.
func (s *Server) drain(ctx context.Context) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for s.st.inFlight.Load() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("netpoll: %d requests still in flight: %w", s.st.inFlight.Load(), ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// track registers a connection the engine opened, for the sweeper.
func (s *Server) track(c *Conn) {
	c.sweep = sweepState{lastRead: time.Now(), lastWrite: time.Now()}
	s.liveMu.Lock()
	s.live[c] = struct{}{}
	s.liveMu.Unlock()
}

// forget undoes track and admit, once a connection is gone (after
// Handler.Closed).
func (s *Server) forget(c *Conn) {
	s.liveMu.Lock()
	delete(s.live, c)
	s.liveMu.Unlock()
	s.acc.release(c.ip)
}
