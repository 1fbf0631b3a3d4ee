//go:build linux || freebsd || darwin

package netpoll

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// flushBudgetBytes is how much one connection may write in one turn of its
// loop before yielding to the loop's other connections (it queues a wake-up
// for itself and goes on in a later turn).
const flushBudgetBytes = 4 << 20

// errWouldBlock: the socket buffer is full; wait for the drain watcher.
var errWouldBlock = errors.New("netpoll: socket buffer full")

// errGone: gnet closed the connection inside a write call (and ran OnClose).
var errGone = errors.New("netpoll: connection closed by gnet during a write")

// loopConn is a connection of the gnet path. Fields without a comment saying
// otherwise belong to the connection's event loop.
type loopConn struct {
	g  *gnetEngine
	gc gnet.Conn
	c  *Conn
	fd int

	fr        framer
	w         cursor
	watched   bool  // registered with the drain watcher
	pausedNow bool  // reading stopped on a limit (counted once per pause)
	budget    int64 // bytes this turn of the loop may still write
	yielded   bool  // this turn ran out of budget and queued a wake-up
	reason    error // why netpoll closed it, for the log
	lastOut   int64 // gnet's outbound buffer as last published (Conn.outBuffered)

	// scheduled means the loop will look at the outbox after now: set while
	// the loop works on the connection and by whoever queued a wake-up, so
	// that a burst of replies queues one wake-up, not one each. Any
	// goroutine.
	scheduled atomic.Bool
	// closeReq: Conn.Close was called; stop serving. Any goroutine.
	closeReq atomic.Bool

	// trig guards gnet's Wake and Close against the connection closing:
	// after OnClose (dead), and once gnet stops, its poller's eventfd is
	// closed and a late Wake would write to whatever reused the number.
	trig sync.Mutex
	dead bool
	why  error // closeFor's reason, under trig
}

// notify implements transport: make sure the loop looks at the outbox.
func (lc *loopConn) notify() {
	if lc.scheduled.CompareAndSwap(false, true) {
		lc.wakeNow()
	}
}

// wakeNow queues an OnTraffic for the connection on its loop, whatever
// scheduled says. Any goroutine.
func (lc *loopConn) wakeNow() {
	lc.trig.Lock()
	if !lc.dead {
		_ = lc.gc.Wake(nil)
	}
	lc.trig.Unlock()
}

// closeFor implements transport. Any goroutine.
func (lc *loopConn) closeFor(err error) {
	lc.trig.Lock()
	if lc.why == nil {
		lc.why = err
	}
	lc.trig.Unlock()
	lc.close()
}

// close implements transport. Any goroutine.
func (lc *loopConn) close() {
	lc.closeReq.Store(true)
	lc.trig.Lock()
	if !lc.dead {
		_ = lc.gc.Close()
	}
	lc.trig.Unlock()
}

// serve is OnTraffic: a turn of the loop for the connection, then, when
// WriteTimeout is on, what gnet's outbound buffer holds is published for
// the sweeper.
func (lc *loopConn) serve() gnet.Action {
	a := lc.turn()
	if a == gnet.None && lc.g.s.cfg.WriteTimeout > 0 {
		if err := lc.publishOutbound(); err != nil {
			return lc.fail(err)
		}
	}
	return a
}

// publishOutbound tells the sweeper what gnet's outbound buffer holds:
// bytes the client has not taken yet, though netpoll counts them written.
// gnet drains that buffer on its own, without a word, so while it holds
// bytes the drain watcher is armed: the next room in the socket brings the
// loop back here, and a buffer that shrank is write progress.
func (lc *loopConn) publishOutbound() error {
	out := int64(lc.gc.OutboundBuffered())
	if out != lc.lastOut {
		if out < lc.lastOut {
			lc.c.markWrite()
		}
		lc.lastOut = out
		lc.c.outBuffered.Store(out)
	}
	if out > 0 {
		return lc.waitWritable()
	}
	return nil
}

// turn writes what is ready, reads and serves frames, and writes what that
// produced. Replies from other goroutines arriving meanwhile find
// scheduled set and queue nothing; the look after clearing it catches them.
func (lc *loopConn) turn() gnet.Action {
	lc.budget, lc.yielded = flushBudgetBytes, false
	for round := 0; ; round++ {
		lc.scheduled.Store(true)
		gen := lc.c.gen.Load()
		if err := lc.flush(); err != nil {
			return lc.fail(err)
		}
		if err := lc.readFrames(); err != nil {
			return lc.fail(err)
		}
		if err := lc.flush(); err != nil {
			return lc.fail(err)
		}
		if lc.closeReq.Load() {
			return gnet.Close
		}
		lc.scheduled.Store(false)
		if lc.c.gen.Load() == gen {
			return gnet.None
		}
		// The window moved while we worked: replies to write, or room to
		// read. Look again, a few times inline, then through a wake-up so a
		// busy connection cannot hold the loop.
		if round == 2 {
			lc.notify()
			return gnet.None
		}
	}
}

func (lc *loopConn) fail(err error) gnet.Action {
	if lc.reason == nil && err != errGone {
		lc.reason = err
	}
	return gnet.Close
}

// readFrames cuts frames out of gnet's inbound buffer and serves them, until
// the buffer is empty or a limit pauses the connection. While paused, the
// bytes stay in gnet's buffer (gnet keeps reading the socket; it has no way
// to stop), up to pausedInboundMax.
func (lc *loopConn) readFrames() error {
	s := lc.c.srv
	direct := 0 // bytes read from the socket directly in this call
	for {
		if lc.closeReq.Load() || s.closing.Load() {
			return lc.checkInbound()
		}
		if !lc.fr.midFrame() { // between frames: may the next one be served?
			if lc.c.paused(int64(lc.gc.OutboundBuffered())) {
				if !lc.pausedNow {
					lc.pausedNow = true
					s.st.pauses.Add(1)
				}
				if lc.gc.OutboundBuffered() > 0 {
					// gnet drains its buffer without telling anyone; have
					// the watcher wake us when the socket has room, or
					// the pause could outlive its cause.
					if err := lc.waitWritable(); err != nil {
						return err
					}
				}
				return lc.checkInbound()
			}
			lc.pausedNow = false
		}
		var n int
		var frame []byte
		var err error
		switch buffered := lc.gc.InboundBuffered(); {
		case buffered > 0 && lc.fr.announced():
			// The rest of a frame of known length: copied out of gnet's
			// buffer straight into the body, never past its end.
			n, _ = lc.gc.Read(lc.fr.need())
			frame, err = lc.fr.advance(n)
		case buffered > 0:
			// The splitter looks at what gnet holds; what the frame
			// used is discarded, what follows it stays for the next.
			p, _ := lc.gc.Peek(min(buffered, peekBytesMax))
			n, frame, err = lc.fr.offer(p)
			if n > 0 { // (gnet's Discard(0) discards everything)
				_, _ = lc.gc.Discard(n)
			}
		default:
			// gnet holds nothing more. The rest of a frame body already
			// under way is read from the socket straight into the body,
			// as bufio does for a large read: it skips the copy out of
			// gnet's buffer and the 64 KiB bound of gnet's reads. Only
			// what this frame still lacks is asked for, so the stream
			// after it stays in the socket for gnet, in order.
			room := lc.fr.bodyRoom()
			if len(room) < directReadMin || direct >= directReadBudget {
				return nil
			}
			k, rerr := readSocket(lc.fd, room)
			if rerr == errWouldBlock {
				return nil
			}
			if rerr != nil {
				return rerr
			}
			n = k
			direct += k
			frame, err = lc.fr.advance(n)
		}
		s.st.bytesIn.Add(int64(n))
		if n > 0 {
			lc.c.markRead()
		}
		if err != nil {
			return err
		}
		if frame == nil {
			continue
		}
		buf := lc.fr.takeDone()
		seq, ok := lc.c.begin(len(frame))
		if !ok {
			return nil
		}
		if buf != nil {
			lc.c.hold(seq, buf)
		}
		s.h.Serve(lc.c, seq, frame)
	}
}

// peekBytesMax bounds what readFrames shows the splitter of gnet's inbound
// buffer at once: gnet copies a peek that wraps around its ring buffer, and
// a frame longer than this is gathered in the framer's own buffer anyway.
const peekBytesMax = 64 << 10

// Direct reads into a frame body (readFrames): only for at least
// directReadMin bytes of room (for less, gnet's one 64 KiB read may bring
// several whole frames), and at most directReadBudget bytes per turn of
// the loop, so that one connection streaming a huge frame cannot hold the
// loop's others (gnet's epoll is level-triggered: what is left in the
// socket brings the connection back).
const (
	directReadMin    = 4 << 10
	directReadBudget = 4 << 20
)

// readSocket reads once from the socket into p. It returns errWouldBlock
// when the socket has nothing, and ErrFrameTruncated at end of stream (it
// is only called inside a frame).
func readSocket(fd int, p []byte) (int, error) {
	for {
		n, err := unix.Read(fd, p)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, errWouldBlock
		case err != nil:
			return 0, os.NewSyscallError("read", err)
		case n == 0:
			return 0, ErrFrameTruncated
		}
		return n, nil
	}
}

func (lc *loopConn) checkInbound() error {
	if n := lc.gc.InboundBuffered(); n > lc.c.srv.cfg.pausedInboundMax() {
		return fmt.Errorf("%w: %d bytes unread", ErrInboundOverflow, n)
	}
	return nil
}

// flush writes ready responses in order until the socket is full, the
// responses run out, or the budget of this turn of the loop is spent.
//
// Byte segments go through gnet's Writev: straight to the socket, with what
// the socket did not take copied into gnet's outbound buffer. File regions
// go with sendfile straight to the socket, which is only correct while
// gnet's outbound buffer is empty (its bytes come first); when it is not,
// or sendfile hits EAGAIN, the drain watcher wakes the loop once the socket
// has room, and flush picks up where it stopped.
func (lc *loopConn) flush() error {
	for {
		if lc.w.empty() && !lc.c.takeReady(&lc.w) {
			return nil
		}
		if lc.budget <= 0 {
			if !lc.yielded { // the loop serves the others, then us again
				lc.yielded = true
				lc.wakeNow()
			}
			return nil
		}
		buffered := lc.gc.OutboundBuffered() > 0
		if buffered && !lc.g.s.cfg.copyRemainder {
			return lc.waitWritable()
		}
		if iov, n := lc.w.gather(); n > 0 {
			if _, err := lc.gc.Writev(iov); err != nil {
				return errGone
			}
			lc.c.wrote(int64(n))
			lc.w.advance(int64(n), lc.c.done)
			lc.budget -= int64(n)
			continue
		}
		f, pos, n, ok := lc.w.region()
		if !ok { // empty segments: nothing to write
			lc.w.advance(0, lc.c.done)
			continue
		}
		var k int64
		var err error
		if buffered { // copyRemainder: gnet's buffer holds earlier bytes
			k, err = lc.copyRegion(f, pos, n, n)
		} else {
			k, err = lc.sendRegion(f, pos, n)
		}
		if err == errGone {
			return err // OnClose ran inside gnet's Write and dropped the cursor
		}
		lc.c.wrote(k)
		lc.w.advance(k, lc.c.done)
		lc.budget -= k
		switch {
		case err == errWouldBlock && lc.g.s.cfg.copyRemainder:
			// The simple scheme: the rest of the region by copy, now.
			k, err = lc.copyRegion(f, pos+k, n-k, n-k)
			if err == errGone {
				return err
			}
			lc.c.wrote(k)
			lc.w.advance(k, lc.c.done)
			lc.budget -= k
			if err != nil {
				return err
			}
		case err == errWouldBlock:
			return lc.waitWritable()
		case err != nil:
			return err
		}
	}
}

// waitWritable registers the socket with the drain watcher.
func (lc *loopConn) waitWritable() error {
	if err := lc.g.watch.arm(lc); err != nil {
		return fmt.Errorf("netpoll: waiting for %v to drain: %w", lc.c.remote, err)
	}
	return nil
}

// sendRegion sends the region with sendfile until it is done or the socket
// is full (errWouldBlock). A file sendfile refuses is copied, one chunk per
// call. It returns the bytes written.
func (lc *loopConn) sendRegion(f *os.File, pos, n int64) (int64, error) {
	sent, err := sendfileRegion(lc.fd, f, pos, n, &lc.c.srv.st)
	if err == errSendfileUnsupported {
		return lc.copyRegion(f, pos, n, copyChunkBytes)
	}
	return sent, err
}

// copyRegion copies up to limit bytes of the region into gnet (pread, then
// Write: gnet sends what the socket takes and copies the rest into its
// outbound buffer, so the chunk goes back to the pool at once).
func (lc *loopConn) copyRegion(f *os.File, pos, n, limit int64) (int64, error) {
	st := &lc.c.srv.st
	var done int64
	for done < min(n, limit) {
		bp, b, err := readChunk(f, pos+done, min(n, limit)-done)
		if err != nil {
			return done, err
		}
		_, err = lc.gc.Write(b)
		putChunk(bp)
		if err != nil {
			return done, errGone
		}
		done += int64(len(b))
		st.copiedBytes.Add(int64(len(b)))
	}
	return done, nil
}

// closed is OnClose: forget the connection everywhere, drop what it still
// holds, tell the handler.
func (lc *loopConn) closed(err error) {
	lc.trig.Lock()
	lc.dead = true
	why := lc.why
	lc.trig.Unlock()
	lc.g.watch.disarm(lc)
	lc.c.teardown()
	lc.w.drop(lc.c.dropped)
	reason := lc.reason
	if reason == nil {
		reason = why
	}
	if reason == nil {
		reason = err
		if lc.fr.midFrame() {
			reason = ErrFrameTruncated
		}
	}
	s := lc.c.srv
	logClose(s, lc.c, reason)
	s.h.Closed(lc.c)
	s.forget(lc.c)
}
