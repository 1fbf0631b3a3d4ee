package netpoll

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// portableReadBufferBytes is the read buffer of a portable connection:
// small, because every idle connection keeps one (10000 connections hold
// 160 MiB); a body larger than it is read straight into the frame.
const portableReadBufferBytes = 16 << 10

// pconn is a connection of the portable path. The reader goroutine reads
// frames and calls Serve; the writer goroutine writes ready responses. They
// share only the Conn (under its mutex) and three channels.
type pconn struct {
	p  *portable
	c  *Conn
	nc net.Conn

	wake   chan struct{} // cap 1: the writer has work
	resume chan struct{} // cap 1: a paused reader should look again
	done   chan struct{} // closed when the connection is closing

	closeOnce sync.Once
	reason    error        // why it closed; written once under closeOnce
	exits     atomic.Int32 // goroutines finished; the last one unregisters
}

func newPconn(p *portable, nc net.Conn) *pconn {
	pc := &pconn{
		p:      p,
		nc:     nc,
		wake:   make(chan struct{}, 1),
		resume: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	pc.c = newConn(p.s, pc, nc.RemoteAddr())
	return pc
}

// notify implements transport: wake the writer, and the reader in case it
// waits for the window or the queue to shrink.
func (pc *pconn) notify() {
	select {
	case pc.wake <- struct{}{}:
	default:
	}
	pc.kickReader()
}

func (pc *pconn) kickReader() {
	select {
	case pc.resume <- struct{}{}:
	default:
	}
}

// close implements transport.
func (pc *pconn) close() { pc.closeWith(nil) }

// closeWith closes the socket, which ends both goroutines' blocking calls.
// The first reason wins.
func (pc *pconn) closeWith(err error) {
	pc.closeOnce.Do(func() {
		pc.reason = err
		close(pc.done)
		_ = pc.nc.Close()
	})
}

// exit runs when one of the two goroutines ends.
func (pc *pconn) exit() {
	if pc.exits.Add(1) == 2 {
		pc.p.forget(pc)
		pc.p.s.st.conns.Add(-1)
	}
	pc.p.wg.Done()
}

func (pc *pconn) readLoop() {
	s := pc.p.s
	br := bufio.NewReaderSize(pc.nc, portableReadBufferBytes)
	fr := newFramer(s.cfg.Splitter, s.cfg.MaxFrameBytes)
	var err error
	for err == nil {
		var n int
		var frame []byte
		var rerr error
		if fr.announced() && (br.Buffered() > 0 || fr.bodyRoom() != nil) {
			// The rest of a frame of known length, read into its body:
			// a read as large as bufio's buffer skips it and goes from
			// the socket straight into the frame.
			n, rerr = br.Read(fr.need())
			frame, err = fr.advance(n)
		} else {
			// The splitter looks at what bufio holds (waiting for a byte
			// if it holds none); what the frame used is discarded, what
			// follows it stays for the next.
			if br.Buffered() == 0 {
				_, rerr = br.Peek(1)
			}
			p, _ := br.Peek(br.Buffered())
			n, frame, err = fr.offer(p)
			_, _ = br.Discard(n)
		}
		s.st.bytesIn.Add(int64(n))
		if err == nil && frame != nil {
			err = pc.serve(frame, fr.takeDone())
		}
		if err == nil && rerr != nil {
			err = rerr
			if errors.Is(rerr, io.EOF) && fr.midFrame() {
				err = ErrFrameTruncated
			}
		}
	}
	pc.closeWith(err)
	pc.c.teardown()
	logClose(s, pc.c, pc.reason)
	s.h.Closed(pc.c)
	pc.exit()
}

// serve hands one frame to the handler, first waiting while the connection
// is paused. Not reading meanwhile is the back-pressure: the kernel buffers
// fill and TCP stops the client.
func (pc *pconn) serve(frame, buf []byte) error {
	s := pc.p.s
	if pc.c.paused(0) {
		s.st.pauses.Add(1)
		for pc.c.paused(0) {
			select {
			case <-pc.resume:
			case <-pc.done:
				return ErrClosed
			}
		}
	}
	seq, ok := pc.c.begin()
	if !ok {
		// The server is closing: serve nothing more, but keep the
		// connection until Close has let in-flight replies out.
		<-pc.done
		return ErrClosed
	}
	if buf != nil {
		pc.c.hold(seq, buf)
	}
	s.h.Serve(pc.c, seq, frame)
	return nil
}

func (pc *pconn) writeLoop() {
	var w cursor
	defer func() {
		w.drop(pc.c.dropped) // what the connection closed on
		pc.exit()
	}()
	for {
		select {
		case <-pc.wake:
		case <-pc.done:
			return
		}
		for pc.c.takeReady(&w) {
			for !w.empty() {
				if err := pc.writeSome(&w); err != nil {
					pc.closeWith(err)
					return
				}
				pc.kickReader() // the queue shrank
			}
		}
	}
}

// writeSome writes the byte segments at the cursor with one writev, or the
// file region at the cursor.
func (pc *pconn) writeSome(w *cursor) error {
	if iov, n := w.gather(); n > 0 {
		bufs := net.Buffers(iov)
		k, err := bufs.WriteTo(pc.nc)
		pc.c.wrote(k)
		w.advance(k, pc.c.done)
		return err
	}
	f, pos, n, ok := w.region()
	if !ok { // empty segments: nothing to write
		w.advance(0, pc.c.done)
		return nil
	}
	k, err := writeRegion(pc, f, pos, n)
	pc.c.wrote(k)
	w.advance(k, pc.c.done)
	return err
}

// logClose logs why a connection closed, at debug level: clients come and
// go, and a protocol violation is the client's problem, not the broker's.
// A connection closed by one of the broker's limits (a frame above
// MaxFrameBytes, a client sending while paused) is logged as a warning:
// the client sees only a dropped connection, and the operator may want to
// raise the limit.
func logClose(s *Server, c *Conn, reason error) {
	if reason == nil || errors.Is(reason, io.EOF) || errors.Is(reason, net.ErrClosed) || errors.Is(reason, ErrClosed) {
		s.log.Debug("netpoll: connection closed", "remote", c.remote)
		return
	}
	if errors.Is(reason, ErrSplitter) {
		// A bug in the Splitter, not the client's doing.
		s.log.Error("netpoll: connection closed", "remote", c.remote, "err", reason)
		return
	}
	if errors.Is(reason, ErrFrameTooLarge) || errors.Is(reason, ErrInboundOverflow) {
		s.log.Warn("netpoll: connection closed by a limit", "remote", c.remote, "err", reason,
			"max_frame_bytes", s.cfg.MaxFrameBytes, "max_in_flight", s.cfg.MaxInFlight, "max_queued_bytes", s.cfg.MaxQueuedBytes)
		return
	}
	s.log.Debug("netpoll: connection closed", "remote", c.remote, "err", reason)
}
