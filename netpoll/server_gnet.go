//go:build linux || freebsd || darwin

package netpoll

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// gnetSupported: gnet serves here (it also runs on the other BSDs, where
// sendfile in golang.org/x/sys is missing or differs; they use the portable
// path).
const gnetSupported = true

// loopReadBufferBytes is gnet's read buffer, one per event loop: each read
// event reads up to this much from one socket.
const loopReadBufferBytes = 64 << 10

// gnetEngine serves connections on gnet event loops: multicore, one loop per
// locked OS thread, each owning its connections' sockets. Everything a loop
// does for a connection (read frames, call Serve, write, sendfile, close)
// happens on that loop; other goroutines reach a connection through gnet's
// Wake and Close, which queue a task on its loop.
type gnetEngine struct {
	gnet.BuiltinEventEngine
	s      *Server
	eng    gnet.Engine
	watch  *drainWatcher
	booted chan struct{}
	exited chan struct{}
	runErr error
}

func listenGnet(s *Server) (engine, error) {
	w, err := newDrainWatcher(s.log)
	if err != nil {
		return nil, err
	}
	g := &gnetEngine{s: s, watch: w, booted: make(chan struct{}), exited: make(chan struct{})}
	go g.run()
	select {
	case <-g.booted:
	case <-g.exited:
		w.close()
		return nil, fmt.Errorf("netpoll: gnet on %s: %w", s.cfg.Addr, g.runErr)
	}
	addr, err := g.boundAddr()
	if err != nil {
		g.shutdown()
		return nil, err
	}
	s.addr = addr
	warnDescriptorLimit(s)
	return g, nil
}

// warnDescriptorLimit warns when the process may run out of descriptors
// before MaxConns: gnet stops its whole engine when accept fails with
// EMFILE, where the portable path backs off and retries.
func warnDescriptorLimit(s *Server) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	if need := uint64(s.cfg.MaxConns) + 1024; uint64(lim.Cur) < need { // Cur is int64 on FreeBSD
		s.log.Warn("netpoll: descriptor limit below MaxConns plus headroom; gnet stops serving if accept fails with EMFILE",
			"rlimit_nofile", lim.Cur, "max_conns", s.cfg.MaxConns)
	}
}

func (g *gnetEngine) name() string { return "gnet" }

// run runs gnet until shutdown. gnet binds the listener before OnBoot, so
// once booted is closed the socket accepts (into its backlog until the
// loops start).
func (g *gnetEngine) run() {
	defer close(g.exited)
	g.runErr = gnet.Run(g, "tcp://"+g.s.cfg.Addr,
		gnet.WithMulticore(true),
		gnet.WithLockOSThread(true),
		gnet.WithNumEventLoop(g.s.cfg.Loops),
		gnet.WithReadBufferCap(loopReadBufferBytes),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		// SO_REUSEADDR, as Go's net.Listen sets: connections the server
		// closed sit in TIME_WAIT and would keep a restarted broker from
		// binding its port.
		gnet.WithReuseAddr(true),
		gnet.WithLogger(gnetLogger{g.s.log}))
	select {
	case <-g.booted:
		if g.runErr != nil {
			g.s.log.Error("netpoll: gnet engine stopped", "addr", g.s.cfg.Addr, "err", g.runErr)
		}
	default:
	}
}

// boundAddr asks the listening socket for its address: with port 0 only the
// kernel knows the port.
func (g *gnetEngine) boundAddr() (net.Addr, error) {
	fd, err := g.eng.Dup()
	if err != nil {
		return nil, fmt.Errorf("netpoll: gnet listener: %w", err)
	}
	defer func() { _ = unix.Close(fd) }()
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return nil, fmt.Errorf("netpoll: gnet listener: %w", os.NewSyscallError("getsockname", err))
	}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(append([]byte(nil), sa.Addr[:]...)), Port: sa.Port}, nil
	case *unix.SockaddrInet6:
		a := &net.TCPAddr{IP: net.IP(append([]byte(nil), sa.Addr[:]...)), Port: sa.Port}
		if sa.ZoneId != 0 {
			if ifi, err := net.InterfaceByIndex(int(sa.ZoneId)); err == nil {
				a.Zone = ifi.Name
			}
		}
		return a, nil
	}
	return nil, fmt.Errorf("netpoll: gnet listener: unexpected address %T", sa)
}

// stopAccepting: gnet cannot stop accepting without stopping everything, so
// while the server is closing OnOpen closes every new connection at once.
func (g *gnetEngine) stopAccepting() {}

func (g *gnetEngine) shutdown() {
	// Stop only signals the engine and then polls for it, twice a second;
	// with a context already done it returns right after signalling, and
	// exited tells us when gnet has closed every connection.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = g.eng.Stop(ctx)
	<-g.exited
	g.watch.close()
}

// OnBoot runs once gnet listens, before its loops start.
func (g *gnetEngine) OnBoot(eng gnet.Engine) gnet.Action {
	g.eng = eng
	close(g.booted)
	return gnet.None
}

// OnOpen runs on the connection's loop.
func (g *gnetEngine) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	if !g.s.admit() {
		return nil, gnet.Close
	}
	lc := &loopConn{g: g, gc: gc, fd: gc.Fd(), fr: newFramer(g.s.cfg.Splitter, g.s.cfg.MaxFrameBytes)}
	lc.c = newConn(g.s, lc, gc.RemoteAddr())
	gc.SetContext(lc)
	return nil, gnet.None
}

// OnTraffic runs on the connection's loop when the socket has bytes, and
// when something woke the connection (a reply, the drain watcher).
func (g *gnetEngine) OnTraffic(gc gnet.Conn) gnet.Action {
	lc, ok := gc.Context().(*loopConn)
	if !ok {
		return gnet.Close
	}
	return lc.serve()
}

// OnClose runs on the connection's loop, before gnet closes the socket; also
// for the connections OnOpen refused, which have no context.
func (g *gnetEngine) OnClose(gc gnet.Conn, err error) gnet.Action {
	if lc, ok := gc.Context().(*loopConn); ok {
		lc.closed(err)
	}
	return gnet.None
}

// gnetLogger sends gnet's logs to the server's slog.Logger. gnet's info
// messages (start-up banners) become debug: netpoll logs its own.
type gnetLogger struct{ l *slog.Logger }

func (g gnetLogger) logf(level slog.Level, format string, args ...any) {
	if g.l.Enabled(context.Background(), level) {
		g.l.Log(context.Background(), level, "gnet: "+fmt.Sprintf(format, args...))
	}
}

func (g gnetLogger) Debugf(format string, args ...any) { g.logf(slog.LevelDebug, format, args...) }
func (g gnetLogger) Infof(format string, args ...any)  { g.logf(slog.LevelDebug, format, args...) }
func (g gnetLogger) Warnf(format string, args ...any)  { g.logf(slog.LevelWarn, format, args...) }
func (g gnetLogger) Errorf(format string, args ...any) { g.logf(slog.LevelError, format, args...) }
func (g gnetLogger) Fatalf(format string, args ...any) { g.logf(slog.LevelError, format, args...) }
