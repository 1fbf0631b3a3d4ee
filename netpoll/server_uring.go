//go:build linux

package netpoll

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

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
// << 8 | what the request is.
const (
	udWake   = iota // the eventfd read that wakes the loop (id 0)
	udRecv          // a connection's multishot receive
	udSend          // a connection's sendmsg
	udPoll          // a connection's POLLOUT, after sendfile met a full socket
	udCancel        // a cancellation of a connection's requests
	udLoop          // the loop's own cancellation of its wake read (id 0)
)

func userData(id uint32, kind uint64) uint64 { return uint64(id)<<8 | kind }

// probeUring checks the kernel for what the uring path needs.
func probeUring() string { return ioring.ProbeNet() }

// uringEngine serves connections on io_uring event loops: Config.Loops
// goroutines, each locked to its OS thread with a ring of its own
// (SINGLE_ISSUER, DEFER_TASKRUN), each owning its connections' sockets.
// A loop's turn is one io_uring_enter: it submits the turn's sends and
// re-armed receives and waits for completions in the same call.
//
// Like gnet, the loops accept nothing: the acceptor hands each admitted
// connection to a loop, round robin, as a duplicate of its descriptor.
// Other goroutines reach a connection through its loop's inbox (Reply's
// notify, Close), and wake a sleeping loop through an eventfd that the
// loop always has a read of in its ring.
type uringEngine struct {
	s     *Server
	loops []*uloop
	next  atomic.Uint32
	wg    sync.WaitGroup // loop goroutines
}

func startUring(s *Server) (engine, error) {
	e := &uringEngine{s: s}
	for i := range s.cfg.Loops {
		l := &uloop{e: e, s: s, efd: -1}
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

func (e *uringEngine) name() string { return IOUring }

// serve implements engine: the connection's descriptor is duplicated (the
// loop owns the duplicate; the net.Conn and its descriptor are closed
// here) and queued on the next loop.
func (e *uringEngine) serve(nc net.Conn, ip netip.Addr) {
	remote := nc.RemoteAddr()
	fd, err := dupConn(nc)
	_ = nc.Close()
	if err != nil {
		e.s.log.Warn("netpoll: handing a connection to a uring loop failed", "remote", remote, "err", err)
		e.s.acc.release(ip)
		return
	}
	l := e.loops[e.next.Add(1)%uint32(len(e.loops))]
	l.hand(&uconn{l: l, fd: fd, remote: remote, ip: ip})
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
// for their requests to finish in the kernel, and exits.
func (e *uringEngine) shutdown() {
	for _, l := range e.loops {
		l.stop()
	}
	e.wg.Wait()
}

// uloop is one io_uring event loop. Fields without a comment saying
// otherwise belong to the loop's goroutine.
type uloop struct {
	e    *uringEngine
	s    *Server
	ring *ioring.NetRing
	bufs *ioring.BufRing
	efd  int    // the wake eventfd
	efdb []byte // the wake read's 8 bytes
	wake bool   // the wake read is in the ring

	conns []*uconn // by id; nil: free
	free  []uint32
	live  int
	dirty []*uconn // connections to serve again at the end of the turn
	// starved holds, in order, the connections whose receive ended for
	// want of buffers: they are armed again a few at a time (rearmStarved).
	starved []*uconn

	stopping bool

	// sleeping is set while the loop may block in the ring: whoever
	// queues work then writes the eventfd. Any goroutine.
	sleeping atomic.Bool

	// The inbox, from any goroutine.
	mu       sync.Mutex
	incoming []*uconn // handed over by the acceptor, not yet adopted
	woken    []*uconn // notified: replies to write, room to read, Close
	stopReq  bool
	exited   bool // the loop is gone: hand nothing more

	// Swapped with the inbox each turn.
	spareIn, spareWoken []*uconn
}

// run is the loop's goroutine. errc gets nil once the ring is up, or why
// it could not be set up.
func (l *uloop) run(errc chan<- error) {
	defer l.e.wg.Done()
	// The ring is SINGLE_ISSUER: only this thread may ever submit. The
	// goroutine stays locked until it ends, and the thread ends with it.
	runtime.LockOSThread()
	if err := l.setup(); err != nil {
		l.teardownRing()
		l.mu.Lock()
		l.exited = true
		l.mu.Unlock()
		errc <- err
		return
	}
	// The loop's P (internal/procs), counted before Listen returns.
	procs.Add()
	defer procs.Release()
	errc <- nil
	for {
		l.takeInbox()
		if l.stopping && l.live == 0 {
			break
		}
		l.sleeping.Store(true)
		wait := !l.inboxBusy()
		if !wait {
			l.sleeping.Store(false)
		}
		// One io_uring_enter submits the turn's sends and re-armed
		// receives and waits for the next completion. A send to a socket
		// with room completes during the submission, so a turn that sent
		// usually returns at once with that completion and waits in a
		// second call (see ARCHITECTURE.md on the batch wait tried).
		err := l.ring.Enter(wait)
		l.sleeping.Store(false)
		if err != nil {
			// The ring broke: nothing on this loop can be served. Close
			// the server rather than look alive.
			l.s.log.Error("netpoll: uring loop failed", "err", err)
			l.s.stopped(fmt.Errorf("%w: %w", ErrEngineStopped, err))
			l.abandon()
			return
		}
		l.ring.Reap(l.complete)
		l.serveDirty()
		l.rearmStarved()
	}
	l.exit()
	l.teardownRing()
}

func (l *uloop) setup() error {
	var err error
	l.ring, err = ioring.NewNetRing(uringEntries, uringCQEntries)
	if err != nil {
		return err
	}
	size, count := uringBufBytes, uringBufCount
	if k := l.s.cfg.uring; k != nil {
		size, count = cmp0(k.bufBytes, size), cmp0(k.bufCount, count)
	}
	l.bufs, err = l.ring.RegisterBufRing(uringBufGroup, count, size)
	if err != nil {
		return err
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	l.mu.Lock()
	l.efd = efd
	l.mu.Unlock()
	l.efdb = make([]byte, 8)
	return l.armWake()
}

func cmp0(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// armWake queues the read of the wake eventfd. eventfd reads can be
// attempted without blocking, so the ring polls it rather than handing
// the read to a worker thread.
func (l *uloop) armWake() error {
	if err := l.ring.Read(l.efd, l.efdb, userData(0, udWake)); err != nil {
		return err
	}
	l.wake = true
	return nil
}

// teardownRing cancels the wake read, waits for it, and releases the
// ring, the buffers and the eventfd. Every connection is gone.
func (l *uloop) teardownRing() {
	if l.ring != nil && l.wake {
		if err := l.ring.CancelFD(l.efd, userData(0, udLoop)); err == nil {
			for l.wake {
				if err := l.ring.Enter(true); err != nil {
					break
				}
				l.ring.Reap(func(c ioring.NetCQE) {
					if c.UserData == userData(0, udWake) {
						l.wake = false
					}
				})
			}
		}
	}
	if l.bufs != nil {
		_ = l.bufs.Close()
	}
	if l.ring != nil {
		_ = l.ring.Close()
	}
	l.mu.Lock()
	if l.efd >= 0 {
		_ = unix.Close(l.efd)
		l.efd = -1
	}
	l.mu.Unlock()
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

// exit marks the loop gone, so that hand refuses new connections, and
// refuses those handed over and not taken yet.
func (l *uloop) exit() {
	l.mu.Lock()
	l.exited = true
	refused := l.incoming
	l.incoming = nil
	l.mu.Unlock()
	for _, uc := range refused {
		l.refuse(uc)
	}
}

// hand queues a new connection for the loop. Acceptor goroutine.
func (l *uloop) hand(uc *uconn) {
	l.mu.Lock()
	if l.exited || l.stopReq {
		l.mu.Unlock()
		l.refuse(uc)
		return
	}
	l.incoming = append(l.incoming, uc)
	l.mu.Unlock()
	l.poke()
}

// refuse closes a connection that was handed over and never adopted.
func (l *uloop) refuse(uc *uconn) {
	_ = unix.Close(uc.fd)
	l.s.acc.release(uc.ip)
}

// wakeConn queues uc to be served on the loop. Any goroutine.
func (l *uloop) wakeConn(uc *uconn) {
	l.mu.Lock()
	if l.exited {
		l.mu.Unlock()
		return
	}
	l.woken = append(l.woken, uc)
	l.mu.Unlock()
	l.poke()
}

// stop asks the loop to close every connection and exit. Any goroutine.
func (l *uloop) stop() {
	l.mu.Lock()
	l.stopReq = true
	l.mu.Unlock()
	l.sleeping.Store(true) // force the write: the loop may be anywhere
	l.poke()
}

// poke wakes the loop if it sleeps (or is about to). The loop clears
// sleeping before it looks at the inbox and after every wait, so a write
// is made only when the loop may block with work queued. The write is
// made under the inbox's lock, which the loop takes to close the eventfd:
// a late poke must never write 8 bytes into whatever file reused the
// descriptor's number.
func (l *uloop) poke() {
	if l.sleeping.Load() && l.sleeping.CompareAndSwap(true, false) {
		var one = [8]byte{1}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.efd < 0 {
			return
		}
		for {
			_, err := unix.Write(l.efd, one[:])
			if err != unix.EINTR {
				break
			}
		}
	}
}

// inboxBusy reports whether work was queued since the last takeInbox.
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
		if l.stopping {
			l.refuse(uc)
			continue
		}
		l.adopt(uc)
	}
	for _, uc := range woken {
		uc.scheduled.Store(false)
		uc.serve()
	}
	clear(in)
	clear(woken)
	l.spareIn, l.spareWoken = in[:0], woken[:0]
}

// adopt makes uc one of the loop's connections and starts receiving.
func (l *uloop) adopt(uc *uconn) {
	if n := len(l.free); n > 0 {
		uc.id = l.free[n-1]
		l.free = l.free[:n-1]
	} else {
		uc.id = uint32(len(l.conns))
		l.conns = append(l.conns, nil)
	}
	l.conns[uc.id] = uc
	l.live++
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

// forget frees uc's id once it is gone.
func (l *uloop) forget(uc *uconn) {
	l.conns[uc.id] = nil
	l.free = append(l.free, uc.id)
	l.live--
}

// complete dispatches one completion.
func (l *uloop) complete(c ioring.NetCQE) {
	kind, id := c.UserData&0xff, uint32(c.UserData>>8)
	if kind == udWake {
		l.wake = false
		if !l.stopping || l.live > 0 {
			if err := l.armWake(); err != nil {
				l.s.log.Error("netpoll: uring loop cannot re-arm its wake-up", "err", err)
			}
		}
		return
	}
	if kind == udLoop {
		return // teardownRing's cancellation
	}
	uc := l.conns[id]
	if uc == nil {
		l.s.log.Error("netpoll: uring completion for no connection", "user_data", c.UserData, "res", c.Res)
		return
	}
	switch kind {
	case udRecv:
		uc.onRecv(c)
	case udSend:
		uc.onSend(c)
	case udPoll:
		uc.onPoll(c)
	case udCancel:
		uc.ops--
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
