//go:build linux

package netpoll

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"ringlog/internal/procs"
	"ringlog/ioring"
)

// Sizes of a uring loop. The SQ takes a turn's sends, receives and polls
// (more are submitted early if a turn fills it); the CQ is larger because
// a multishot receive posts a completion per arrival without a new SQE.
// Each loop has its own provided buffers, uringBufCount x uringBufBytes
// (4 MiB): 16 KiB holds a typical Kafka request whole, and 256 of them
// let 256 connections each have a buffer filled before the loop reaps.
const (
	uringEntries   = 1024
	uringCQEntries = 8192
	uringBufBytes  = 16 << 10
	uringBufCount  = 256
	uringBufGroup  = 0
)

// User data of a uring loop's requests: the connection's id in the loop
// << 8 | what the request is, under the loop's tag on its owner
// (ioring.UserData).
const (
	udRecv   = iota + 1 // a connection's multishot receive
	udSend              // a connection's sendmsg
	udPoll              // a connection's POLLOUT, after sendfile met a full socket
	udCancel            // a cancellation of a connection's requests
	udRead              // a read straight into the body of a large frame
)

func userData(id uint32, kind uint64) uint64 { return uint64(id)<<8 | kind }

// probeUring checks the kernel for what the uring path needs.
func probeUring() string { return ioring.ProbeNet() }

// uringEngine serves connections on io_uring rings, each a loop of
// connections registered on an ioring.Owner: a goroutine locked to its OS
// thread with a ring of its own (SINGLE_ISSUER, DEFER_TASKRUN), whose turn
// is one io_uring_enter that submits the turn's sends and re-armed
// receives and waits for completions in the same call.
//
// The owners are netpoll's own (Config.Loops goroutines, one loop each),
// or, when Config.Owners has some (and IO is not IOUringLoops), those: the engine's
// shards, whose rings then carry the connections beside the shards' own
// work, and whose threads cut the frames and run the handler.
//
// Like gnet, the loops accept nothing: the acceptor hands each admitted
// connection to a loop, round robin, as a duplicate of its descriptor.
// Other goroutines reach a connection through its loop's inbox (Reply's
// notify, Close) and wake a sleeping owner through its doorbell
// (ioring.Owner.Wake).
type uringEngine struct {
	s      *Server
	loops  []*uloop
	next   atomic.Uint32
	wg     sync.WaitGroup     // loops not yet detached
	group  *ioring.OwnerGroup // netpoll's own owners; nil on given ones
	shards bool               // on Config.Owners
	// The balancer (shards only): its settings, set before its goroutine
	// and the loops' turns read them; balStop ends the goroutine, balDone
	// says it ended.
	bal              balancing
	balStop, balDone chan struct{}
}

func startUring(s *Server) (engine, error) {
	e := &uringEngine{s: s}
	if s.cfg.IO != IOUringLoops && len(s.cfg.Owners) > 0 {
		e.shards = true
		for i, o := range s.cfg.Owners {
			l := &uloop{e: e, s: s, o: o}
			e.wg.Add(1)
			errc := make(chan error, 1)
			if err := o.Post(func() { errc <- l.attach() }); err != nil {
				errc <- err
			}
			if err := <-errc; err != nil {
				l.markExited()
				e.wg.Done()
				e.shutdown()
				return nil, fmt.Errorf("netpoll: connections on ring owner %d: %w", i, err)
			}
			e.loops = append(e.loops, l)
		}
		e.startBalancer()
		return e, nil
	}
	e.group = ioring.NewOwnerGroup()
	for i := range s.cfg.Loops {
		l := &uloop{e: e, s: s}
		errc := make(chan error, 1)
		e.wg.Add(1)
		go l.run(errc)
		if err := <-errc; err != nil {
			e.shutdown()
			return nil, fmt.Errorf("netpoll: uring loop %d: %w", i, err)
		}
		e.loops = append(e.loops, l)
	}
	return e, nil
}

func (e *uringEngine) name() string {
	if e.shards {
		return IOUringShards
	}
	return IOUring
}

// serve implements engine: the connection's descriptor is duplicated (the
// loop owns the duplicate; the net.Conn and its descriptor are closed
// here) and queued on the next loop.
func (e *uringEngine) serve(nc net.Conn, ip netip.Addr) error {
	remote := nc.RemoteAddr()
	fd, err := dupConn(nc)
	_ = nc.Close()
	if err != nil {
		e.s.acc.release(ip)
		if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
			return err // out of descriptors: the acceptor backs off
		}
		e.s.log.Warn("netpoll: handing a connection to a uring loop failed", "remote", remote, "err", err)
		return nil
	}
	l := e.pick()
	l.hand(&uconn{l: l, fd: fd, remote: remote, ip: ip})
	return nil
}

// pick chooses the loop of a new connection. netpoll's own loops take
// them round robin. On the shards' rings a connection's frames are cut,
// decoded and CRC-checked on its shard's thread beside the shard's
// appends, so where a busy producer lands matters: the loop whose
// connections received the fewest bytes since the last pick takes it
// (ties: the fewest connections, then round robin). Clients open an idle
// metadata connection beside their produce connection, and round robin
// alone put two producers' produce connections on one shard of two in
// every other run (ARCHITECTURE.md, "Connections on the shards' rings").
// Acceptor goroutine.
func (e *uringEngine) pick() *uloop {
	start := e.next.Add(1)
	n := uint32(len(e.loops))
	if !e.shards {
		return e.loops[start%n]
	}
	if k := e.s.cfg.uring; k != nil && k.onePlace {
		return e.loops[0]
	}
	var best *uloop
	var bestRx, bestConns int64
	for i := range n {
		l := e.loops[(start+i)%n]
		rx := l.rxBytes.Load()
		d := rx - l.rxSeen
		l.rxSeen = rx
		conns := l.handed.Load()
		if best == nil || d < bestRx || (d == bestRx && conns < bestConns) {
			best, bestRx, bestConns = l, d, conns
		}
	}
	return best
}

// dupConn duplicates nc's descriptor (close-on-exec, and non-blocking as
// the description is shared with Go's poller, which set it so: sendfile on
// the loop must never block).
func dupConn(nc net.Conn) (int, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1, fmt.Errorf("%T has no descriptor", nc)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) {
		fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, fmt.Errorf("dup: %w", derr)
	}
	return fd, nil
}

// stopAccepting implements engine: serve hands over synchronously; a loop
// adopts or refuses what is in its inbox.
func (e *uringEngine) stopAccepting() {}

// shutdown implements engine: every loop closes its connections, waits
// for their requests to finish in the kernel, and detaches from its owner
// (netpoll's own owners then end, and their rings are released).
func (e *uringEngine) shutdown() {
	if e.balStop != nil {
		close(e.balStop)
		<-e.balDone
	}
	for _, l := range e.loops {
		l.stop()
	}
	e.wg.Wait()
	if e.group != nil {
		if err := e.group.Close(); err != nil {
			e.s.log.Error("netpoll: releasing the uring loops' rings", "err", err)
		}
	}
}

// uloop is the connections of one ring owner. Fields without a comment
// saying otherwise belong to the owner's goroutine.
type uloop struct {
	e    *uringEngine
	s    *Server
	o    *ioring.Owner
	tag  uint8 // the loop's handler on the owner
	ring *ioring.NetRing
	bufs *ioring.BufRing
	// unhook removes the loop's hook from the owner (detach), unclose its
	// reaction to the owner closing first (ownerClosed).
	unhook   func()
	unclose  func()
	attached bool
	detached bool

	conns []*uconn // by id; nil: free
	free  []uint32
	live  int
	dirty []*uconn // connections to serve again at the next turn
	// starved holds, in order, the connections whose receive ended for
	// want of buffers: they are armed again a few at a time (rearmStarved).
	starved []*uconn

	stopping bool

	// rxBytes counts the bytes the loop's connections received (owner's
	// goroutine adds, the acceptor reads); rxSeen is its value at the
	// acceptor's last pick; handed the connections handed over and not yet
	// forgotten (pick).
	rxBytes atomic.Int64
	rxSeen  int64
	handed  atomic.Int64
	// balSeen is rxBytes at the balancer's last look (its goroutine's);
	// moving counts the loop's connections marked to move (owner's
	// goroutine adds, the balancer reads: it visits such a loop even when
	// it received nothing, to give a move up).
	balSeen int64
	moving  atomic.Int32

	// The inbox, from any goroutine.
	mu       sync.Mutex
	incoming []*uconn // handed over by the acceptor, not yet adopted
	woken    []*uconn // notified: replies to write, room to read, Close
	stopReq  bool
	exited   bool // the loop is gone: hand nothing more

	// Swapped with the inbox each turn.
	spareIn, spareWoken []*uconn
}

// run is the goroutine of a loop on an owner of netpoll's own. errc gets
// nil once the ring is up, or why it could not be set up.
func (l *uloop) run(errc chan<- error) {
	defer l.e.wg.Done()
	// The ring is SINGLE_ISSUER: only this thread may ever submit. The
	// goroutine stays locked until it ends, and the thread ends with it.
	runtime.LockOSThread()
	o, err := l.e.group.NewOwner()
	if err != nil {
		l.markExited()
		errc <- err
		return
	}
	l.o = o
	if err := l.attach(); err != nil {
		o.Close()
		l.markExited()
		errc <- err
		return
	}
	// The loop's P (internal/procs), counted before Listen returns.
	procs.Add()
	defer procs.Release()
	o.KeepP()
	errc <- nil
	for !l.detached {
		// One io_uring_enter submits the turn's sends and re-armed
		// receives and waits for the next completion. A send to a socket
		// with room completes during the submission, so a turn that sent
		// usually returns at once with that completion and waits in a
		// second call (see ARCHITECTURE.md on the batch wait tried).
		if err := o.Turn(-1); err != nil {
			// The ring broke: nothing on this loop can be served. Close
			// the server rather than look alive.
			l.s.log.Error("netpoll: uring loop failed", "err", err)
			l.s.stopped(fmt.Errorf("%w: %w", ErrEngineStopped, err))
			l.abandon()
			return
		}
	}
	o.Close()
}

// attach registers the loop on its owner: its handler, its provided
// buffers, its hook. Owner's goroutine.
func (l *uloop) attach() error {
	l.ring = l.o.Ring()
	tag, err := l.o.Register(l.complete)
	if err != nil {
		return err
	}
	size, count := uringBufBytes, uringBufCount
	if k := l.s.cfg.uring; k != nil {
		size, count = cmp.Or(k.bufBytes, size), cmp.Or(k.bufCount, count)
	}
	l.bufs, err = l.ring.RegisterBufRing(l.o.BufferGroup(), count, size)
	if err != nil {
		l.o.Unregister(tag)
		return err
	}
	l.tag = tag
	l.unhook = l.o.AddHook(l.turn, l.inboxBusy)
	l.unclose = l.o.OnClose(l.ownerClosed)
	l.attached = true
	return nil
}

// turn is the loop's part of its owner's turn, before the wait: serve the
// connections whose completions the last turn reaped, arm starved
// receives, adopt and serve what the inbox holds, and detach once stopped
// with no connection left.
func (l *uloop) turn() {
	if l.detached {
		return
	}
	l.serveDirty()
	l.rearmStarved()
	l.takeInbox()
	if l.stopping && l.live == 0 {
		l.detach()
	}
}

// detach unregisters the loop from its owner once every connection is
// gone (their requests all completed): the provided buffers go back and
// the loop's handler and hook are removed. Owner's goroutine.
func (l *uloop) detach() {
	l.detached = true
	l.unhook()
	l.unclose()
	l.o.Unregister(l.tag)
	if l.bufs != nil {
		if err := l.bufs.Close(); err != nil {
			l.s.log.Error("netpoll: releasing a uring loop's buffers", "err", err)
		}
	}
	l.exit()
	if l.e.shards {
		l.e.wg.Done()
	} else {
		l.o.SkipWait() // run ends the owner
	}
}

// ownerClosed runs when the loop's owner closes with the loop still on it
// (a shard that stopped before the server closed): nothing will serve the
// loop's connections again, so they are given up as after a ring failure,
// the server stops (Done, Err), and the loop detaches, so that Close does
// not wait for it forever. Owner's goroutine.
func (l *uloop) ownerClosed() {
	if l.detached {
		return
	}
	err := fmt.Errorf("%w: the ring owner of a loop of connections closed", ErrEngineStopped)
	failed := l.o.Err()
	if failed != nil {
		err = fmt.Errorf("%w: the ring of a loop of connections failed: %w", ErrEngineStopped, failed)
	}
	l.s.log.Error("netpoll: a uring loop's ring owner closed under it", "err", err)
	l.s.stopped(err)
	l.mu.Lock()
	l.stopReq = true
	l.mu.Unlock()
	if failed != nil {
		// A broken ring submits and reaps nothing: the connections are
		// given up at once, with the ring's failure as their reason, as
		// a netpoll loop whose ring fails does (run).
		for _, uc := range l.conns {
			if uc != nil && uc.reason == nil {
				uc.reason = err
			}
		}
		l.abandon()
		l.detached = true
		l.unhook()
		l.o.Unregister(l.tag)
		if l.e.shards {
			l.e.wg.Done()
		}
		return
	}
	// Close the connections as Close would, turning the ring here (still
	// on the owner's thread) until their requests completed: a receive
	// in the ring holds its socket open.
	l.takeInbox()
	for deadline := time.Now().Add(time.Second); l.live > 0 && time.Now().Before(deadline); {
		if l.o.Poll(10*time.Millisecond) != nil {
			break
		}
		l.serveDirty()
	}
	if l.live > 0 {
		l.abandon() // their buffers stay the ring's, which its group releases
	} else if l.bufs != nil {
		if err := l.bufs.Close(); err != nil {
			l.s.log.Error("netpoll: releasing a uring loop's buffers", "err", err)
		}
	}
	l.exit()
	l.detached = true
	l.unhook()
	l.o.Unregister(l.tag)
	if l.e.shards {
		l.e.wg.Done()
	}
}

// abandon gives up every connection after the ring failed: their
// descriptors are closed and the handler told, but their buffers may
// still be the kernel's, so the ring and its memory are left as they are
// (leaked) rather than reused.
func (l *uloop) abandon() {
	for _, uc := range l.conns {
		if uc != nil {
			uc.ops = 0
			uc.finish(ErrEngineStopped)
		}
	}
	l.exit()
}

// markExited refuses every hand-over: the loop never started.
func (l *uloop) markExited() {
	l.mu.Lock()
	l.exited = true
	l.mu.Unlock()
}

// exit marks the loop gone, so that hand refuses new connections, and
// refuses those handed over and not taken yet.
func (l *uloop) exit() {
	l.mu.Lock()
	l.exited = true
	refused := l.incoming
	l.incoming = nil
	l.mu.Unlock()
	for _, uc := range refused {
		if uc.c != nil {
			// A connection moving here when the loop ended: it has a
			// Conn and a handler that knows it, so it is closed as
			// every other of the loop's (nothing of it is in a ring).
			uc.l = l
			l.adoptID(uc)
			uc.fail(ErrEngineStopped)
			continue
		}
		l.refuse(uc)
	}
}

// hand queues a new connection for the loop, or closes it when the loop
// is stopping. Acceptor goroutine.
func (l *uloop) hand(uc *uconn) {
	if !l.take(uc) {
		l.refuse(uc)
	}
}

// take queues a connection for the loop (a new one, or one moving from
// another loop: its old loop's goroutine) and reports true, or false when
// the loop is stopping. Any goroutine.
func (l *uloop) take(uc *uconn) bool {
	l.mu.Lock()
	if l.exited || l.stopReq {
		l.mu.Unlock()
		return false
	}
	l.incoming = append(l.incoming, uc)
	// Set under the lock that queues it: a wake that finds the new home
	// queues the connection behind its adoption (takeInbox adopts first).
	uc.home.Store(l)
	l.mu.Unlock()
	l.o.Wake()
	return true
}

// refuse closes a connection that was handed over and never adopted.
func (l *uloop) refuse(uc *uconn) {
	_ = unix.Close(uc.fd)
	l.s.acc.release(uc.ip)
}

// wakeConn queues uc to be served on the loop. Any goroutine: on the
// owner's own thread (a shard answering a produce it appended), the
// owner is not waiting and Wake costs nothing.
func (l *uloop) wakeConn(uc *uconn) {
	l.mu.Lock()
	if l.exited {
		l.mu.Unlock()
		return
	}
	l.woken = append(l.woken, uc)
	l.mu.Unlock()
	l.o.Wake()
}

// stop asks the loop to close every connection and detach. Any goroutine.
func (l *uloop) stop() {
	l.mu.Lock()
	exited := l.exited
	l.stopReq = true
	l.mu.Unlock()
	if !exited {
		l.o.Wake()
	}
}

// inboxBusy reports whether work was queued since the last takeInbox (the
// owner does not wait then).
func (l *uloop) inboxBusy() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.incoming) > 0 || len(l.woken) > 0 || (l.stopReq && !l.stopping)
}

// takeInbox adopts new connections and serves notified ones.
func (l *uloop) takeInbox() {
	l.mu.Lock()
	in, woken, stop := l.incoming, l.woken, l.stopReq
	l.incoming, l.woken = l.spareIn[:0], l.spareWoken[:0]
	l.mu.Unlock()
	if stop && !l.stopping {
		l.stopping = true
		for _, uc := range l.conns {
			if uc != nil {
				uc.beginClose(ErrClosed)
			}
		}
	}
	for _, uc := range in {
		if l.stopping && uc.c == nil {
			l.refuse(uc)
			continue
		}
		l.adopt(uc) // a moved connection is closed at once by adopt when stopping
	}
	for _, uc := range woken {
		uc.scheduled.Store(false)
		if uc.home.Load() != l {
			// Woken here as it moved to another loop: wake it there.
			uc.notify()
			continue
		}
		uc.serve()
	}
	clear(in)
	clear(woken)
	l.spareIn, l.spareWoken = in[:0], woken[:0]
}

// adopt makes uc one of the loop's connections and starts receiving: a
// new one (its Conn made, the handler told), or one moved from another
// loop (moveTo), which brings its Conn and its unframed bytes along.
func (l *uloop) adopt(uc *uconn) {
	uc.l = l
	l.adoptID(uc)
	if uc.c != nil {
		if l.stopping {
			uc.beginClose(ErrClosed)
			return
		}
		uc.serve()
		return
	}
	s := l.s
	uc.in = bufFeed{fr: newFramer(s.cfg.Splitter, s.cfg.MaxFrameBytes), pendingMax: s.cfg.pausedInboundMax()}
	uc.c = newConn(s, uc, uc.remote, uc.ip)
	uc.in.fr.maxp = &uc.c.frameMax
	s.track(uc.c)
	if o, ok := s.h.(Opener); ok {
		o.Opened(uc.c)
	}
	uc.serve()
}

// adoptID gives uc an id on the loop.
func (l *uloop) adoptID(uc *uconn) {
	if n := len(l.free); n > 0 {
		uc.id = l.free[n-1]
		l.free = l.free[:n-1]
	} else {
		uc.id = uint32(len(l.conns))
		l.conns = append(l.conns, nil)
	}
	l.conns[uc.id] = uc
	l.live++
	l.handed.Add(1)
}

// forget frees uc's id once it is gone.
func (l *uloop) forget(uc *uconn) {
	l.conns[uc.id] = nil
	l.free = append(l.free, uc.id)
	l.live--
	l.handed.Add(-1)
}

// complete dispatches one completion of the loop's (its owner strips the
// tag).
func (l *uloop) complete(c ioring.NetCQE) {
	kind, id := c.UserData&0xff, uint32(c.UserData>>8)
	if int(id) >= len(l.conns) || l.conns[id] == nil {
		l.s.log.Error("netpoll: uring completion for no connection", "user_data", c.UserData, "res", c.Res)
		return
	}
	uc := l.conns[id]
	switch kind {
	case udRecv:
		uc.onRecv(c)
	case udSend:
		uc.onSend(c)
	case udPoll:
		uc.onPoll(c)
	case udCancel:
		uc.ops--
	case udRead:
		uc.onRead(c)
	}
	if uc.closing && uc.ops == 0 {
		uc.finish(nil)
		return
	}
	if !uc.dirty {
		uc.dirty = true
		l.dirty = append(l.dirty, uc)
	}
}

// serveDirty serves the connections whose completions arrived this turn:
// writes that can go on, receives to re-arm.
func (l *uloop) serveDirty() {
	for i := 0; i < len(l.dirty); i++ {
		uc := l.dirty[i]
		if uc == nil {
			continue // moved to another loop (move)
		}
		uc.dirty = false
		if !uc.gone {
			uc.serve()
		}
	}
	clear(l.dirty)
	l.dirty = l.dirty[:0]
}

// rearmStarved arms the receives of connections that ran out of buffers,
// at most half as many as the loop has buffers per turn, oldest first.
// Every buffer is back in the ring at this point of the turn; arming every
// starved connection at once would have most of them fail again at once
// (a receive that finds data takes a buffer per completion), a turn of
// requests and completions that moves no byte, again and again, while
// connections compete for buffers.
func (l *uloop) rearmStarved() {
	if len(l.starved) == 0 {
		return
	}
	n := min(len(l.starved), max(1, l.bufs.Count()/2))
	for _, uc := range l.starved[:n] {
		uc.starved = false
		if !uc.gone && !uc.closing {
			if err := uc.arm(); err != nil {
				uc.fail(err)
			}
		}
	}
	rest := copy(l.starved, l.starved[n:])
	clear(l.starved[rest:])
	l.starved = l.starved[:rest]
}

// recycle hands a provided buffer back to the ring (poisoned first when a
// test asks).
func (l *uloop) recycle(id uint16) {
	if k := l.s.cfg.uring; k != nil && k.poison {
		b := l.bufs.Bytes(id, l.bufs.Size())
		for i := range b {
			b[i] = 0xEE
		}
	}
	l.bufs.Recycle(id)
}
