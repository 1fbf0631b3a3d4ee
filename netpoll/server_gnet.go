//go:build linux || freebsd || darwin

package netpoll

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
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
//
// gnet accepts nothing: the acceptor accepts (it survives EMFILE, which
// stops gnet's own acceptor and with it the whole engine) and hands each
// connection over with Engine.Register, which duplicates its descriptor
// into a gnet connection on the next loop and runs OnOpen there. gnet
// insists on a listener all the same (Register refuses an engine without
// one), so it gets a Unix socket whose path is unlinked as soon as it is
// bound: nothing can ever connect to it.
type gnetEngine struct {
	gnet.BuiltinEventEngine
	s       *Server
	eng     gnet.Engine
	watch   *drainWatcher
	sockDir string        // the private directory of gnet's unreachable listener
	started chan struct{} // closed by the first OnTick: the loops exist
	once    sync.Once
	exited  chan struct{}
	runErr  error
	// stopping is set before Stop: an engine that exits without it
	// stopped on its own.
	stopping atomic.Bool
	// handoffs counts connections given to Register whose OnOpen has not
	// run yet (or never will).
	handoffs sync.WaitGroup
}

// pendingConn is a connection on its way to a loop: the value Register
// attaches to the gnet connection, claimed by OnOpen, or by the waiter of
// the registration if OnOpen never runs, so that admission is given back
// exactly once.
type pendingConn struct {
	ip      netip.Addr
	claimed atomic.Bool
}

func (p *pendingConn) claim() bool { return p.claimed.CompareAndSwap(false, true) }

func startGnet(s *Server) (engine, error) {
	w, err := newDrainWatcher(s.log)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "netpoll-gnet-")
	if err != nil {
		w.close()
		return nil, fmt.Errorf("netpoll: gnet's listener: %w", err)
	}
	g := &gnetEngine{s: s, watch: w, sockDir: dir, started: make(chan struct{}), exited: make(chan struct{})}
	go g.run()
	select {
	case <-g.started:
	case <-g.exited:
		w.close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("netpoll: gnet on %s: %w", s.cfg.Addr, g.runErr)
	}
	return g, nil
}

func (g *gnetEngine) name() string { return "gnet" }

// run runs gnet until shutdown.
func (g *gnetEngine) run() {
	defer close(g.exited)
	g.runErr = gnet.Run(g, "unix://"+filepath.Join(g.sockDir, "unreachable"),
		gnet.WithMulticore(true),
		gnet.WithLockOSThread(true),
		gnet.WithNumEventLoop(g.s.cfg.Loops),
		gnet.WithReadBufferCap(loopReadBufferBytes),
		// The ticker's first OnTick is the only sign gnet gives that its
		// loops are registered, after which Register may be called.
		gnet.WithTicker(true),
		gnet.WithLogger(gnetLogger{g.s.log}))
	if !g.stopping.Load() {
		// gnet returns nil even when a loop failed: say it loudly, and
		// close Server.Done, the server no longer serves anything.
		cause := g.runErr
		if cause == nil {
			cause = errors.New("gnet returned no error; its own log line says why")
		}
		g.s.log.Error("netpoll: gnet engine stopped on its own", "addr", g.s.addr, "err", cause)
		g.s.stopped(fmt.Errorf("%w: %w", ErrEngineStopped, cause))
	}
}

// OnTick runs on gnet's ticker goroutine, first once the loops exist.
func (g *gnetEngine) OnTick() (time.Duration, gnet.Action) {
	g.once.Do(func() { close(g.started) })
	return 24 * time.Hour, gnet.None
}

// serve implements engine. Register returns at once; a goroutine waits for
// the registration to give back the admission if OnOpen never runs (the
// duplicate failed: out of descriptors; or the loop refused the socket).
func (g *gnetEngine) serve(nc net.Conn, ip netip.Addr) error {
	p := &pendingConn{ip: ip}
	ctx := gnet.NewNetConnContext(gnet.NewContext(context.Background(), p), nc)
	g.handoffs.Add(1)
	res, err := g.eng.Register(ctx)
	if err != nil {
		_ = nc.Close()
		g.registered(p, err)
		return nil
	}
	go func() {
		var err error
		select {
		case r := <-res: // sent after OnOpen, if it runs at all
			err = r.Err
		case <-g.exited:
			err = ErrClosed
		}
		g.registered(p, err)
	}()
	return nil
}

func (g *gnetEngine) registered(p *pendingConn, err error) {
	if p.claim() {
		g.s.log.Warn("netpoll: handing a connection to gnet failed", "err", err)
		g.s.acc.release(p.ip)
	}
	g.handoffs.Done()
}

// stopAccepting implements engine: wait for the connections on their way
// to a loop, so that none arrives after Stop.
func (g *gnetEngine) stopAccepting() { g.handoffs.Wait() }

func (g *gnetEngine) shutdown() {
	// Stop only signals the engine and then polls for it, twice a second;
	// with a context already done it returns right after signalling, and
	// exited tells us when gnet has closed every connection.
	g.stopping.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = g.eng.Stop(ctx)
	<-g.exited
	g.watch.close()
}

// OnBoot runs once gnet's listener is bound, before the loops start: its
// path goes at once, and with it any way to connect to it.
func (g *gnetEngine) OnBoot(eng gnet.Engine) gnet.Action {
	g.eng = eng
	if err := os.RemoveAll(g.sockDir); err != nil {
		g.s.log.Warn("netpoll: removing gnet's listener path", "err", err)
	}
	return gnet.None
}

// OnOpen runs on the connection's loop once Register has put it there.
func (g *gnetEngine) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	p, ok := gc.Context().(*pendingConn)
	if !ok || !p.claim() {
		return nil, gnet.Close
	}
	lc := &loopConn{g: g, gc: gc, fd: gc.Fd(), fr: newFramer(g.s.cfg.Splitter, g.s.cfg.MaxFrameBytes)}
	lc.c = newConn(g.s, lc, gc.RemoteAddr(), p.ip)
	lc.fr.maxp = &lc.c.frameMax
	gc.SetContext(lc)
	g.s.track(lc.c)
	if o, ok := g.s.h.(Opener); ok {
		o.Opened(lc.c)
	}
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

// OnClose runs on the connection's loop, before gnet closes the socket; not
// for connections OnOpen refused, which have no loopConn.
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
