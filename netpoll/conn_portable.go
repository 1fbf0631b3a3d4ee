package netpoll

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// portableReadBufferBytes is the read buffer of a portable connection:
// small, because every idle connection keeps one (10000 connections hold
// 160 MiB); a body larger than it is read straight into the frame.
const portableReadBufferBytes = 16 << 10

// pconn is a connection of the portable path. The reader goroutine reads
// frames and calls Serve; the writer goroutine writes ready responses. They
// share only the Conn (under its mutex) and three channels.
type pconn struct {
	p   *portable
	c   *Conn
	nc  net.Conn  // what is read and written: raw, or tc
	raw net.Conn  // the TCP connection, closed to close
	tc  *tls.Conn // the TLS connection over raw, or nil

	wake   chan struct{} // cap 1: the writer has work
	resume chan struct{} // cap 1: a paused reader should look again
	done   chan struct{} // closed when the connection is closing

	closeOnce sync.Once
	reason    error        // why it closed; written once under closeOnce
	exits     atomic.Int32 // goroutines finished; the last one unregisters
}

func newPconn(p *portable, nc net.Conn, ip netip.Addr) *pconn {
	pc := &pconn{
		p:      p,
		nc:     nc,
		raw:    nc,
		wake:   make(chan struct{}, 1),
		resume: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	pc.c = newConn(p.s, pc, nc.RemoteAddr(), ip)
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

// closeFor implements transport.
func (pc *pconn) closeFor(err error) { pc.closeWith(err) }

// closeWith closes the socket, which ends both goroutines' blocking calls.
// The first reason wins. A TLS connection is closed under its TLS layer,
// without a close_notify alert: sending one may block for seconds on a
// full socket, and no Kafka client waits for it.
func (pc *pconn) closeWith(err error) {
	pc.closeOnce.Do(func() {
		pc.reason = err
		close(pc.done)
		_ = pc.raw.Close()
	})
}

// exit runs when one of the two goroutines ends.
func (pc *pconn) exit() {
	if pc.exits.Add(1) == 2 {
		pc.p.forget(pc)
		pc.p.s.forget(pc.c)
	}
	pc.p.wg.Done()
}

// handshake runs the TLS handshake within HandshakeTimeout, on the reader
// goroutine: a client that connects and says nothing holds only its own
// goroutines, never the accept loop.
func (pc *pconn) handshake() error {
	s := pc.p.s
	_ = pc.raw.SetDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
	if err := pc.tc.Handshake(); err != nil {
		s.st.handshakeFailures.Add(1)
		return fmt.Errorf("%w: %w", ErrHandshake, err)
	}
	_ = pc.raw.SetDeadline(time.Time{})
	st := pc.tc.ConnectionState()
	pc.c.tls.Store(&st)
	pc.c.markRead()
	return nil
}

func (pc *pconn) readLoop() {
	s := pc.p.s
	br := bufio.NewReaderSize(pc.nc, portableReadBufferBytes)
	fr := newFramer(s.cfg.Splitter, s.cfg.MaxFrameBytes)
	fr.maxp = &pc.c.frameMax
	var err error
	if pc.tc != nil {
		err = pc.handshake()
	}
	if o, ok := s.h.(Opener); ok && err == nil {
		o.Opened(pc.c)
	}
	for err == nil {
		if !fr.midFrame() {
			// Between frames: wait here, before reading the next one,
			// while the connection is paused. Not reading is the
			// back-pressure: the kernel buffers fill and TCP stops the
			// client, and no frame is read into memory meanwhile.
			if err = pc.waitUnpaused(); err != nil {
				break
			}
		}
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
		if n > 0 {
			pc.c.markRead()
		}
		if err == nil && frame != nil {
			// A mute (Conn.Mute) that began while this reader was
			// already blocked in the read holds the frame here.
			if err = pc.waitUnpaused(); err == nil {
				err = pc.serve(frame, fr.takeDone())
			}
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

// waitUnpaused returns once the connection may take another request, or
// ErrClosed if it closed meanwhile.
func (pc *pconn) waitUnpaused() error {
	if !pc.c.paused(0) {
		return nil
	}
	pc.p.s.st.pauses.Add(1)
	for pc.c.paused(0) {
		select {
		case <-pc.resume:
		case <-pc.done:
			return ErrClosed
		}
	}
	return nil
}

// serve hands one frame to the handler. The reader checked that the
// connection is not paused before the frame's first byte, and only it
// hands out requests, so the window has room.
func (pc *pconn) serve(frame, buf []byte) error {
	s := pc.p.s
	seq, ok := pc.c.begin(len(frame))
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
		var k int64
		var err error
		if pc.tc != nil {
			k, err = pc.writeTLS(iov)
		} else {
			bufs := net.Buffers(iov)
			k, err = bufs.WriteTo(pc.nc)
		}
		pc.c.wrote(k)
		w.advance(k, pc.c.done)
		return err
	}
	f, pos, n, ok := w.region()
	if !ok { // empty segments: nothing to write
		w.advance(0, pc.c.done)
		return nil
	}
	var k int64
	var err error
	if pc.tc != nil {
		// sendfile would put the file's plaintext on the wire: TLS
		// encrypts in user space, so the region is read and written.
		k, err = copyRegion(pc.nc, f, pos, n, pc.c)
	} else {
		k, err = writeRegion(pc, f, pos, n)
	}
	pc.c.wrote(k)
	w.advance(k, pc.c.done)
	return err
}

// writeTLS writes byte segments through the TLS connection, gathered into
// one chunk (up to copyChunkBytes) per Write: written one by one, every
// 4-byte size prefix would become a TLS record of its own.
func (pc *pconn) writeTLS(iov [][]byte) (int64, error) {
	bp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(bp)
	var done int64
	for len(iov) > 0 {
		b := (*bp)[:0]
		for len(iov) > 0 && len(b) < cap(b) {
			k := min(len(iov[0]), cap(b)-len(b))
			b = append(b, iov[0][:k]...)
			if iov[0] = iov[0][k:]; len(iov[0]) == 0 {
				iov = iov[1:]
			}
		}
		k, err := pc.nc.Write(b)
		done += int64(k)
		if k > 0 {
			pc.c.markWrite()
		}
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// logClose logs why a connection closed, at debug level: clients come and
// go, and a protocol violation is the client's problem, not the broker's.
// A connection closed by one of the broker's limits (a frame above
// MaxFrameBytes, a client sending while paused) is logged as a warning:
// the client sees only a dropped connection, and the operator may want to
// raise the limit.
func logClose(s *Server, c *Conn, reason error) {
	if reason == nil || errors.Is(reason, io.EOF) || errors.Is(reason, net.ErrClosed) || errors.Is(reason, ErrClosed) || errors.Is(reason, ErrIdle) {
		s.log.Debug("netpoll: connection closed", "remote", c.remote)
		return
	}
	if errors.Is(reason, ErrHandshake) {
		// Kafka logs a failed SSL handshake at info: a client with the
		// wrong certificate or trust store, worth seeing, not an alarm.
		s.log.Info("netpoll: TLS handshake failed", "remote", c.remote, "err", reason)
		return
	}
	if errors.Is(reason, ErrSplitter) {
		// A bug in the Splitter, not the client's doing.
		s.log.Error("netpoll: connection closed", "remote", c.remote, "err", reason)
		return
	}
	if errors.Is(reason, ErrFrameTooLarge) || errors.Is(reason, ErrInboundOverflow) || errors.Is(reason, ErrWriteTimeout) {
		s.log.Warn("netpoll: connection closed by a limit", "remote", c.remote, "err", reason,
			"max_frame_bytes", c.frameMax.Load(), "max_in_flight", s.cfg.MaxInFlight, "max_queued_bytes", s.cfg.MaxQueuedBytes,
			"write_timeout", s.cfg.WriteTimeout)
		return
	}
	s.log.Debug("netpoll: connection closed", "remote", c.remote, "err", reason)
}
