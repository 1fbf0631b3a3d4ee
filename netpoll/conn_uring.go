//go:build linux

package netpoll

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"ringlog/ioring"
)

// uconn is a connection of the uring path. Fields without a comment
// saying otherwise belong to the connection's loop.
//
// At most one receive (multishot, re-armed when it ends), one send and one
// poll are in the ring for a connection at a time: one send in flight is
// what keeps the responses in order, and it carries every ready response
// the cursor can gather (up to 1024 iovecs, 256 KiB).
type uconn struct {
	l      *uloop                // the loop that holds it; changes only on that loop's goroutine (move)
	home   atomic.Pointer[uloop] // l, for other goroutines (notify, close)
	id     uint32
	fd     int
	remote net.Addr
	ip     netip.Addr
	c      *Conn
	in     bufFeed
	w      cursor

	recvOn     bool // the multishot receive is in the ring
	recvCancel bool // its cancellation is in the ring
	reading    bool // a read into a large frame's body is in the ring (direct)
	noDirect   bool // a direct read met EAGAIN: the connection receives through buffers only
	starved    bool // its receive ended with ENOBUFS: on the loop's starved list
	sending    bool // a sendmsg is in the ring
	polling    bool // a POLLOUT is in the ring: sendfile met a full socket
	ops        int  // requests of this connection in the ring
	closing    bool // beginClose ran: cancelled, waiting for ops to finish
	gone       bool // finish ran
	dirty      bool // on the loop's dirty list
	pausedNow  bool // reading stopped on a limit (counted once per pause)
	reason     error

	// Balancing (shed, move): bytes received, and their count at the
	// last window's end; the loop the connection is leaving for, and when
	// it last started to move (Now's clock).
	rx, rxPrev int64
	moveTo     *uloop
	movedAt    int64

	// The sendmsg in the ring: its header and iovecs live here, on the
	// heap, until its completion; chunk is a copied piece of a region
	// (sendfile refused the file) that the send reads from.
	msg   unix.Msghdr
	iov   []unix.Iovec
	chunk *[]byte

	// scheduled: the connection is on its loop's woken list, or being
	// served; a burst of replies queues it once. Any goroutine.
	scheduled atomic.Bool
	// closeReq: Conn.Close was called. Any goroutine.
	closeReq atomic.Bool
	whyMu    sync.Mutex
	why      error // closeFor's reason
}

// notify implements transport.
func (uc *uconn) notify() {
	if uc.scheduled.CompareAndSwap(false, true) {
		uc.home.Load().wakeConn(uc)
	}
}

// close implements transport.
func (uc *uconn) close() {
	uc.closeReq.Store(true)
	uc.home.Load().wakeConn(uc) // whatever scheduled says: it may have just been cleared
}

// closeFor implements transport.
func (uc *uconn) closeFor(err error) {
	uc.whyMu.Lock()
	if uc.why == nil {
		uc.why = err
	}
	uc.whyMu.Unlock()
	uc.close()
}

func (uc *uconn) ud(kind uint64) uint64 { return ioring.UserData(uc.l.tag, userData(uc.id, kind)) }

// serve is a turn of the loop for the connection: frames from what is
// pending, the receive re-armed (or cancelled while paused), ready
// responses written.
func (uc *uconn) serve() {
	for {
		if uc.gone || uc.closing {
			return
		}
		if uc.closeReq.Load() {
			uc.beginClose(nil)
			return
		}
		if err := uc.in.drain(uc.ready, uc.emit); err != nil {
			uc.fail(err)
			return
		}
		// Frames wait because the connection is paused (its window, or
		// MaxQueuedBytes): they are served at the turn that finds it
		// ready again.
		held := uc.in.paused() && !uc.ready()
		if err := uc.arm(); err != nil {
			uc.fail(err)
			return
		}
		if err := uc.flush(); err != nil {
			uc.fail(err)
			return
		}
		if uc.moveTo != nil && uc.still() {
			uc.move()
			return
		}
		// A write's completion brings the next turn; when flush wrote
		// what was queued at once (sendfile takes a region whole) and
		// that ended the pause, no completion may be left to bring it:
		// the held frames are served now, or the connection would wait
		// for a request of the client's that never comes.
		if !held || !uc.ready() {
			return
		}
	}
}

// arm keeps the multishot receive in the ring while the connection may
// read, and cancels it while bytes wait in pending (paused): the socket's
// buffer and TCP's window then hold the client back, as on the portable
// path, instead of the loop buffering what it sends.
func (uc *uconn) arm() error {
	if uc.reading {
		return nil // the frame's body first; armed again at the read's completion
	}
	if uc.in.paused() || uc.moveTo != nil {
		if uc.recvOn && !uc.recvCancel {
			if err := uc.l.ring.Cancel(uc.ud(udRecv), uc.ud(udCancel)); err != nil {
				return err
			}
			uc.recvCancel = true
			uc.ops++
		}
		return nil
	}
	if room := uc.directRoom(); room != nil && !uc.l.s.closing.Load() {
		if uc.recvOn {
			// The multishot receive ends first, so that no byte can
			// overtake those it already holds; the read is queued when
			// its last completion has been taken.
			if !uc.recvCancel {
				if err := uc.l.ring.Cancel(uc.ud(udRecv), uc.ud(udCancel)); err != nil {
					return err
				}
				uc.recvCancel = true
				uc.ops++
			}
			return nil
		}
		if err := uc.l.ring.Read(uc.fd, room, uc.ud(udRead)); err != nil {
			return err
		}
		uc.reading = true
		uc.ops++
		return nil
	}
	if uc.recvOn || uc.starved || uc.l.s.closing.Load() {
		return nil
	}
	if err := uc.l.ring.RecvMultishot(uc.fd, uc.l.bufs.Group(), uc.ud(udRecv)); err != nil {
		return err
	}
	uc.recvOn = true
	uc.ops++
	return nil
}

// uringDirectMin is what must be left of a frame's body for the rest to
// be read straight into it rather than through the loop's provided
// buffers: a produce request of kgo's (up to 1 MiB per partition batch)
// arrives in 16 KiB buffers, each copied into the frame; read into the
// frame, its bytes are copied once, by the kernel, as on the portable
// path and gnet's (readFrames). Below it a frame fits in a few buffers,
// and the multishot receive, which a direct read must cancel first, is
// worth keeping.
const uringDirectMin = 64 << 10

// directRoom returns where a direct read would put the next bytes of the
// frame under way, or nil when less than uringDirectMin of its body is
// still to come (or none is announced, or its body has not started: its
// first bytes come through the buffers, as on the other paths). Nothing
// may be pending: those bytes come first.
func (uc *uconn) directRoom() []byte {
	if uc.noDirect || uc.closing || uc.in.paused() || uc.in.fr.bodyLeft() < uringDirectMin {
		return nil
	}
	return uc.in.fr.bodyRoom()
}

// onRead takes the completion of a direct read into the frame's body.
func (uc *uconn) onRead(c ioring.NetCQE) {
	uc.reading = false
	uc.ops--
	switch {
	case c.Res < 0:
		switch e := unix.Errno(-c.Res); e {
		case unix.ECANCELED: // closing
		case unix.EAGAIN:
			// The ring did not wait for the socket (it does for
			// sockets since io_uring's poll retry; never seen here):
			// the multishot receive waits instead, from now on.
			uc.noDirect = true
		default:
			uc.fail(os.NewSyscallError("read", e))
		}
		return
	case c.Res == 0:
		uc.fail(ErrFrameTruncated)
		return
	}
	n := int(c.Res)
	uc.l.rxBytes.Add(int64(n))
	uc.rx += int64(n)
	s := uc.l.s
	s.st.bytesIn.Add(int64(n))
	s.st.uringDirectBytes.Add(int64(n))
	uc.c.markRead()
	if uc.closing {
		return
	}
	frame, err := uc.in.fr.advance(n)
	if err != nil {
		uc.fail(err)
		return
	}
	if frame != nil {
		uc.emit(frame, uc.in.fr.takeDone())
	}
}

// ready says, between frames, whether another frame may be served.
func (uc *uconn) ready() bool {
	if uc.closeReq.Load() || uc.l.s.closing.Load() {
		return false
	}
	if uc.c.paused(0) {
		if !uc.pausedNow {
			uc.pausedNow = true
			uc.l.s.st.pauses.Add(1)
		}
		return false
	}
	uc.pausedNow = false
	return true
}

// emit serves one frame.
func (uc *uconn) emit(frame, pooled []byte) bool {
	seq, ok := uc.c.begin(len(frame))
	if !ok {
		return false
	}
	if pooled != nil {
		uc.c.hold(seq, pooled)
	}
	uc.l.s.h.Serve(uc.c, seq, frame)
	return true
}

// onRecv takes a receive completion: bytes in a provided buffer, the end
// of the stream, or the end of the multishot receive.
func (uc *uconn) onRecv(c ioring.NetCQE) {
	if !c.More() {
		uc.recvOn, uc.recvCancel = false, false
		uc.ops--
	}
	id, hasBuf := c.Buffer()
	switch {
	case c.Res < 0:
		switch e := unix.Errno(-c.Res); e {
		case unix.ECANCELED: // paused, or closing
		case unix.ENOBUFS: // the loop's buffers ran out: armed again in turn (rearmStarved)
			uc.l.s.st.uringNoBufs.Add(1)
			if !uc.starved {
				uc.starved = true
				uc.l.starved = append(uc.l.starved, uc)
			}
		default:
			uc.fail(os.NewSyscallError("recv", e))
		}
		return
	case c.Res == 0:
		if hasBuf {
			uc.l.recycle(id)
		}
		if uc.in.fr.midFrame() {
			uc.fail(ErrFrameTruncated)
		} else {
			uc.fail(io.EOF)
		}
		return
	case !hasBuf:
		uc.fail(fmt.Errorf("netpoll: receive of %d bytes without a provided buffer", c.Res))
		return
	}
	n := int(c.Res)
	uc.l.rxBytes.Add(int64(n))
	uc.rx += int64(n)
	p := uc.l.bufs.Bytes(id, n)
	if k := uc.l.s.cfg.uring; k != nil && k.recycleEarly {
		uc.l.recycle(id) // the bug a test must catch: the bytes are not framed yet
		hasBuf = false
	}
	s := uc.l.s
	s.st.bytesIn.Add(int64(n))
	uc.c.markRead()
	var err error
	if !uc.closing {
		err = uc.in.push(p, uc.ready, uc.emit)
	}
	if hasBuf {
		uc.l.recycle(id)
	}
	if err != nil {
		uc.fail(err)
	}
}

// flush writes ready responses in order: bytes with one sendmsg (whose
// completion calls flush again), file regions with sendfile straight on
// the non-blocking socket until it is full, then a POLLOUT in the ring.
func (uc *uconn) flush() error {
	for !uc.sending && !uc.polling && !uc.closing {
		if uc.w.empty() && !uc.c.takeReady(&uc.w) {
			return nil
		}
		if iov, n := uc.w.gather(); n > 0 {
			return uc.send(iov, uc.w.toFile)
		}
		f, pos, n, ok := uc.w.region()
		if !ok { // empty segments: nothing to write
			uc.w.advance(0, uc.c.done)
			continue
		}
		k, err := uc.sendRegion(f, pos, n)
		uc.c.wrote(k)
		uc.w.advance(k, uc.c.done)
		switch {
		case err == errWouldBlock:
			if err := uc.l.ring.PollAdd(uc.fd, unix.POLLOUT, uc.ud(udPoll)); err != nil {
				return err
			}
			uc.polling = true
			uc.ops++
			return nil
		case err == errSendfileUnsupported:
			return uc.sendCopy(f, pos, n)
		case err != nil:
			return err
		}
	}
	return nil
}

// send queues one sendmsg of iov. more says a file region's sendfile
// follows (MSG_MORE): TCP holds the bytes back to go out with the
// region's first bytes, in one segment, where a header sent alone is a
// packet of its own for the peer to be woken for.
func (uc *uconn) send(iov [][]byte, more bool) error {
	uc.iov = uc.iov[:0]
	for _, b := range iov {
		v := unix.Iovec{Base: &b[0]}
		v.SetLen(len(b))
		uc.iov = append(uc.iov, v)
	}
	uc.msg = unix.Msghdr{Iov: &uc.iov[0]}
	uc.msg.SetIovlen(len(uc.iov))
	flags := uint32(unix.MSG_NOSIGNAL)
	if more {
		flags |= unix.MSG_MORE
	}
	if err := uc.l.ring.Sendmsg(uc.fd, &uc.msg, flags, uc.ud(udSend)); err != nil {
		return err
	}
	uc.sending = true
	uc.ops++
	return nil
}

// sendCopy sends a piece of a region that sendfile refuses, read into a
// pooled chunk that the send holds until its completion.
func (uc *uconn) sendCopy(f *os.File, pos, n int64) error {
	bp, b, err := readChunk(f, pos, n)
	if err != nil {
		return err
	}
	uc.chunk = bp
	uc.l.s.st.copiedBytes.Add(int64(len(b)))
	return uc.send([][]byte{b}, false)
}

// onSend takes a sendmsg completion: the bytes it wrote leave the cursor
// (a short send is resumed by the next flush).
func (uc *uconn) onSend(c ioring.NetCQE) {
	uc.sending = false
	uc.ops--
	if uc.chunk != nil {
		putChunk(uc.chunk)
		uc.chunk = nil
	}
	clear(uc.iov) // the responses' memory is no longer the kernel's
	if c.Res < 0 {
		if e := unix.Errno(-c.Res); e != unix.ECANCELED {
			uc.fail(os.NewSyscallError("sendmsg", e))
		}
		return
	}
	if uc.gone || uc.closing {
		return
	}
	uc.c.wrote(int64(c.Res))
	uc.w.advance(int64(c.Res), uc.c.done)
}

// onPoll takes the POLLOUT completion: the socket has room again.
func (uc *uconn) onPoll(c ioring.NetCQE) {
	uc.polling = false
	uc.ops--
	if c.Res < 0 {
		if e := unix.Errno(-c.Res); e != unix.ECANCELED {
			uc.fail(os.NewSyscallError("poll", e))
		}
	}
}

// sendRegion sends the region with sendfile until it is done or the socket
// is full (errWouldBlock). It returns the bytes written.
func (uc *uconn) sendRegion(f *os.File, pos, n int64) (int64, error) {
	return sendfileRegion(uc.fd, f, pos, n, &uc.l.s.st)
}

// fail closes the connection for err.
func (uc *uconn) fail(err error) {
	if uc.reason == nil {
		uc.reason = err
	}
	uc.beginClose(err)
}

// beginClose stops serving the connection: its requests in the ring are
// cancelled, and finish runs once the last of them has completed (the
// kernel may be reading a response's memory until then).
func (uc *uconn) beginClose(err error) {
	if uc.closing || uc.gone {
		return
	}
	uc.closing = true
	if uc.reason == nil && err != nil {
		uc.reason = err
	}
	if uc.ops == 0 {
		uc.finish(nil)
		return
	}
	if cerr := uc.l.ring.CancelFD(uc.fd, uc.ud(udCancel)); cerr != nil {
		uc.l.s.log.Error("netpoll: cancelling a uring connection's requests", "remote", uc.remote, "err", cerr)
		return
	}
	uc.ops++
}

// finish forgets the connection everywhere, drops what it still holds and
// tells the handler. Its requests have all completed (or the ring is
// abandoned).
func (uc *uconn) finish(err error) {
	if uc.gone {
		return
	}
	uc.gone = true
	uc.endMove()
	_ = unix.Close(uc.fd)
	uc.l.forget(uc)
	uc.c.teardown()
	uc.w.drop(uc.c.dropped)
	if uc.chunk != nil {
		putChunk(uc.chunk)
		uc.chunk = nil
	}
	uc.in.pending, uc.in.head = nil, 0
	reason := uc.reason
	if reason == nil {
		uc.whyMu.Lock()
		reason = uc.why
		uc.whyMu.Unlock()
	}
	if reason == nil {
		reason = err
	}
	s := uc.l.s
	logClose(s, uc.c, reason)
	s.h.Closed(uc.c)
	s.forget(uc.c)
}
