package netpoll

import (
	"crypto/tls"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"ringlog/internal/framepool"
)

// transport is what a Conn needs from its implementation (gnet or portable).
type transport interface {
	// notify tells the connection's writer (and its reader, if it is paused)
	// that the outbox changed: responses became ready to write or the
	// in-flight window shrank. Called with Conn.mu not held, from any
	// goroutine, possibly after the connection closed.
	notify()
	// close closes the connection asynchronously. Any goroutine.
	close()
	// closeFor is close with the reason to log (a limit that closed it).
	closeFor(err error)
}

// slot states of the in-flight window.
const (
	slotEmpty   uint8 = iota // handed to the handler, not answered
	slotReply                // answered with a response
	slotNoReply              // answered with NoReply
)

type slot struct {
	state uint8
	r     *Response
	// bytes is the request frame's length while it counts against
	// MaxQueuedRequestBytes (handed out, not answered); 0 otherwise.
	bytes int32
	// recv is when the request's frame was whole (Timing.Received).
	recv int64
}

// Conn is one client connection as the handler sees it.
//
// Requests get consecutive sequence numbers from 0. Replies may arrive in any
// order from any goroutine; they wait in a window of MaxInFlight slots until
// every earlier sequence number is answered, then move, in order, to the
// ready list that the connection's writer drains.
type Conn struct {
	srv    *Server
	t      transport
	remote net.Addr
	ip     netip.Addr // the remote address's IP, for MaxConnsPerIP
	ctx    atomic.Pointer[any]
	tls    atomic.Pointer[tls.ConnectionState]

	// frameMax is the bound on the next request frames (SetMaxFrameBytes);
	// the reader reads it between frames.
	frameMax atomic.Int32

	// readMark and writeMark are raised when bytes are read from or
	// written to the socket, and lowered by the sweeper, which turns them
	// into times (IdleTimeout, WriteTimeout). outBuffered is what gnet's
	// outbound buffer held at the end of the loop's last turn for the
	// connection (always 0 on the portable path).
	readMark, writeMark atomic.Bool
	outBuffered         atomic.Int64
	sweep               sweepState // the sweeper's only

	// queued counts this connection's response bytes replied and not yet
	// written (Stats.QueuedBytes is the sum): answers add, the writer
	// subtracts, the reader compares it with MaxQueuedBytes.
	queued atomic.Int64
	// mutedUntil (Now's clock; 0: never muted) holds the reader back
	// until then (Mute).
	mutedUntil atomic.Int64
	// gen moves whenever the window releases a sequence number (and at
	// teardown): the gnet loop compares it before and after a turn to learn
	// that answers arrived meanwhile, to write or to read again.
	gen atomic.Uint64

	mu       sync.Mutex
	window   []slot        // MaxInFlight slots, sequence number seq at seq % len
	next     uint64        // oldest sequence number not yet released to ready
	assigned uint64        // next sequence number to hand out
	ready    []*Response   // released in order, waiting for the writer
	closed   bool          // the connection is gone: replies are dropped
	gone     chan struct{} // closed by teardown (Done)
	// held keeps the pooled buffer under request seq's frame at
	// seq % len, until the handler recycles it or a later request takes
	// the entry (the buffer is then left to the collector).
	held []heldFrame

	spare []*Response // writer only: the previous ready slice, reused

	// frameAt is when the frame being served was whole (FrameTime);
	// reader side only.
	frameAt int64
}

func newConn(s *Server, t transport, remote net.Addr, ip netip.Addr) *Conn {
	c := &Conn{
		srv:    s,
		t:      t,
		remote: remote,
		ip:     ip,
		window: make([]slot, s.cfg.MaxInFlight),
		held:   make([]heldFrame, s.cfg.MaxInFlight),
		gone:   make(chan struct{}),
	}
	c.frameMax.Store(s.cfg.InitialMaxFrameBytes)
	return c
}

// heldFrame is the pooled buffer under a request's frame.
type heldFrame struct {
	seq uint64
	buf []byte
}

// hold remembers buf, the pooled buffer under request seq's frame, for
// Recycle. Reader side only, after begin.
func (c *Conn) hold(seq uint64, buf []byte) {
	c.mu.Lock()
	c.held[seq%uint64(len(c.held))] = heldFrame{seq: seq, buf: buf}
	c.mu.Unlock()
}

// Recycle tells netpoll that the handler, and everything it handed slices
// of request seq's frame to, is finished with that frame: its memory may
// hold a later frame. Optional, at most once per seq, from any goroutine;
// after it, no slice of the frame may be read or written. A handler that
// never calls it loses nothing but the reuse (the frame is collected).
func (c *Conn) Recycle(seq uint64) {
	c.mu.Lock()
	h := &c.held[seq%uint64(len(c.held))]
	var buf []byte
	if h.buf != nil && h.seq == seq {
		buf = h.buf
		*h = heldFrame{}
	}
	c.mu.Unlock()
	if buf != nil {
		framepool.Put(buf)
	}
}

// RemoteAddr returns the client's address. Any goroutine.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetContext stores the handler's per-connection state. Any goroutine.
func (c *Conn) SetContext(v any) { c.ctx.Store(&v) }

// Context returns what SetContext stored, or nil. Any goroutine.
func (c *Conn) Context() any {
	if p := c.ctx.Load(); p != nil {
		return *p
	}
	return nil
}

// SetMaxFrameBytes bounds the request frames of this connection that
// follow; n <= 0, or n above Config.MaxFrameBytes, means MaxFrameBytes.
// A new connection starts at Config.InitialMaxFrameBytes. Called from
// Handler.Serve (the usual case: Kafka lifts sasl.server.max.receive.size
// once a client has authenticated), it applies to the very next frame;
// from another goroutine, to the frames whose first bytes are looked at
// after it. A frame above the bound closes the connection, with
// LengthPrefixed before any of its body is allocated.
func (c *Conn) SetMaxFrameBytes(n int32) {
	if n <= 0 || n > c.srv.cfg.MaxFrameBytes {
		n = c.srv.cfg.MaxFrameBytes
	}
	c.frameMax.Store(n)
}

// TLS returns the state of the connection's TLS session once its
// handshake has completed (the handler reads the client's certificate
// from it), and nil on a plaintext connection. Any goroutine; Serve is
// never called before the handshake has completed.
func (c *Conn) TLS() *tls.ConnectionState { return c.tls.Load() }

// FrameTime returns when the frame being served was whole in netpoll (its
// last byte read and the frame cut), in Now's clock: Timing.Received of
// its response. Only on Serve's goroutine, during Serve.
func (c *Conn) FrameTime() int64 { return c.frameAt }

// Done returns a channel closed when the connection is gone, before
// Handler.Closed: a handler that waits for something (a long poll, a
// blocking read) selects on it to stop waiting for no one. Any goroutine.
func (c *Conn) Done() <-chan struct{} { return c.gone }

// Close closes the connection: requests not yet answered get no response,
// responses not yet written are dropped (their OnDone runs), and
// Handler.Closed follows. Any goroutine; it does not wait.
func (c *Conn) Close() { c.t.close() }

// Reply answers request seq with r. Any goroutine, exactly once per seq
// (or NoReply instead). Responses are written in seq order whatever the
// order of the Reply calls; r belongs to netpoll from now on. A nil r is
// NoReply. After the connection closed, r is released (OnDone) and dropped.
//
// A response that cannot be framed (with a bad region, or one the
// Splitter's prefix cannot describe: larger than 2 GiB - 1 with
// LengthPrefixed) closes the connection: the client would wait for it
// forever.
func (c *Conn) Reply(seq uint64, r *Response) {
	if r == nil {
		c.NoReply(seq)
		return
	}
	if err := r.seal(c.srv.cfg.Splitter); err != nil {
		c.srv.log.Error("netpoll: handler reply cannot be framed; closing the connection",
			"remote", c.remote, "seq", seq, "err", err)
		r.release()
		c.t.close()
		return
	}
	if r.obs != nil {
		r.timing.Replied = Now()
	}
	c.answer(seq, slotReply, r)
}

// NoReply tells netpoll that request seq produces no response (Kafka's
// produce with acks=0). Any goroutine, exactly once per seq (or Reply
// instead). Later responses are not held back by it.
func (c *Conn) NoReply(seq uint64) { c.answer(seq, slotNoReply, nil) }

func (c *Conn) answer(seq uint64, state uint8, r *Response) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		if r != nil {
			r.release()
		}
		return
	}
	if seq < c.next || seq >= c.assigned || c.window[seq%uint64(len(c.window))].state != slotEmpty {
		c.mu.Unlock()
		// A handler bug, not client input: say so loudly, keep the
		// connection's framing intact by ignoring the stray answer.
		c.srv.log.Error("netpoll: answer for a request that is not in flight; ignored",
			"remote", c.remote, "seq", seq)
		if r != nil {
			r.release()
		}
		return
	}
	sl := &c.window[seq%uint64(len(c.window))]
	freed := sl.bytes
	if r != nil {
		r.timing.Received = sl.recv
	}
	*sl = slot{state: state, r: r}
	if r != nil {
		c.queued.Add(r.wireLen())
		c.srv.st.queuedBytes.Add(r.wireLen())
	}
	released := c.releaseLocked()
	c.mu.Unlock()
	if freed > 0 {
		c.srv.unqueueRequest(int64(freed))
	}
	if released {
		c.t.notify()
	}
}

// releaseLocked moves the answered prefix of the window to ready. It reports
// whether anything moved.
func (c *Conn) releaseLocked() bool {
	moved := false
	for c.next < c.assigned {
		sl := &c.window[c.next%uint64(len(c.window))]
		if sl.state == slotEmpty {
			break
		}
		if sl.state == slotReply {
			c.ready = append(c.ready, sl.r)
		} else {
			c.srv.st.inFlight.Add(-1) // a NoReply is finished here
		}
		*sl = slot{}
		c.next++
		moved = true
	}
	if moved {
		c.gen.Add(1)
	}
	return moved
}

// begin hands out the sequence number of a request of n bytes about to be
// served, or reports false when the server is closing (the request is not
// served). Reader side only (the event loop or the reader goroutine),
// after checking that the window has room (paused).
func (c *Conn) begin(n int) (uint64, bool) {
	// In-flight first, closing second; Server.Close does the reverse. With
	// both sequentially consistent, either Close sees this request or this
	// request sees the server closing: none is served unseen.
	c.srv.st.inFlight.Add(1)
	if c.srv.closing.Load() {
		c.srv.st.inFlight.Add(-1)
		return 0, false
	}
	now := Now() // the frame is whole: Timing.Received
	c.mu.Lock()
	if c.assigned-c.next >= uint64(len(c.window)) {
		panic("netpoll: request served with the in-flight window full") // callers check paused first
	}
	seq := c.assigned
	c.assigned++
	sl := &c.window[seq%uint64(len(c.window))]
	sl.recv = now
	budgeted := c.srv.cfg.MaxQueuedRequestBytes > 0 && n > 0
	if budgeted {
		sl.bytes = int32(n)
	}
	c.mu.Unlock()
	c.frameAt = now
	if budgeted {
		c.srv.reqBytes.Add(int64(n))
	}
	c.srv.st.frames.Add(1)
	return seq, true
}

// paused reports whether the reader must stop: the window is full, more
// than MaxQueuedBytes are waiting to be written (extra counts bytes queued
// outside netpoll, in gnet's outbound buffer), or the server's request
// budget is spent while this connection has a request in flight. Reader
// side only.
func (c *Conn) paused(extra int64) bool {
	if m := c.mutedUntil.Load(); m != 0 && Now() < m {
		return true
	}
	c.mu.Lock()
	own := c.assigned - c.next
	c.mu.Unlock()
	if own >= uint64(len(c.window)) || c.queued.Load()+extra > c.srv.cfg.MaxQueuedBytes {
		return true
	}
	// A connection with nothing in flight is always served one request:
	// the budget may not starve it (a frame larger than the budget still
	// passes once the others are answered), nor deadlock a handler whose
	// requests wait on this connection's next one.
	return own > 0 && c.srv.overBudget(c)
}

// Mute stops the reading of the connection's next requests for d (Kafka's
// channel muting of a throttled client, KIP-219): the requests already
// read are served and answered in order; the next ones wait in the socket
// (gnet's inbound buffer on the gnet path) until the mute ends. A longer
// mute extends a shorter one. Any goroutine.
func (c *Conn) Mute(d time.Duration) {
	if d <= 0 {
		return
	}
	until := Now() + int64(d)
	for {
		old := c.mutedUntil.Load()
		if until <= old {
			return
		}
		if c.mutedUntil.CompareAndSwap(old, until) {
			break
		}
	}
	c.srv.st.mutes.Add(1)
	// The reader looks at paused again when woken: wake it at the end.
	time.AfterFunc(d, c.t.notify)
}

// busy reports whether the connection has a request in flight or a
// response not yet written: it is not idle, however long that takes.
func (c *Conn) busy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.assigned != c.next || len(c.ready) > 0
}

// markRead and markWrite tell the sweeper that bytes moved. Reader and
// writer side; a store only when the sweeper has lowered the flag since.
func (c *Conn) markRead() {
	if !c.readMark.Load() {
		c.readMark.Store(true)
	}
}

func (c *Conn) markWrite() {
	if !c.writeMark.Load() {
		c.writeMark.Store(true)
	}
}

// takeReady moves the ready responses to the writer's cursor. Writer side
// only. It reports whether there were any.
func (c *Conn) takeReady(w *cursor) bool {
	c.mu.Lock()
	rs := c.ready
	c.ready = c.spare[:0]
	c.mu.Unlock()
	if len(rs) == 0 {
		c.spare = rs
		return false
	}
	w.push(rs)
	clear(rs)
	c.spare = rs[:0]
	return true
}

// wrote accounts for n response bytes written to the socket (or handed to
// gnet). Writer side only.
func (c *Conn) wrote(n int64) {
	if n <= 0 {
		return
	}
	c.markWrite()
	c.queued.Add(-n)
	c.srv.st.queuedBytes.Add(-n)
	c.srv.st.bytesOut.Add(n)
}

// done finishes a response that was written completely. Writer side only.
func (c *Conn) done(r *Response) {
	c.srv.st.inFlight.Add(-1)
	if r.obs != nil {
		r.timing.Written = Now()
		if r.timing.WriteStart == 0 { // an empty response: no write carried it
			r.timing.WriteStart = r.timing.Written
		}
		r.obs.Written(r, r.timing)
	}
	r.release()
}

// dropped finishes a response whose connection closed with unsent bytes left:
// the bytes leave the queue unwritten. Writer side or teardown.
func (c *Conn) dropped(r *Response, unsent int64) {
	c.queued.Add(-unsent)
	c.srv.st.queuedBytes.Add(-unsent)
	c.srv.st.inFlight.Add(-1)
	r.release()
}

// teardown marks the connection closed and drops everything the window and
// the ready list hold; later answers are dropped on arrival. It runs once,
// when the connection is gone, before Handler.Closed.
func (c *Conn) teardown() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	close(c.gone)
	var drop []*Response
	unanswered, freed := int64(0), int64(0)
	for seq := c.next; seq < c.assigned; seq++ {
		sl := &c.window[seq%uint64(len(c.window))]
		freed += int64(sl.bytes)
		if sl.state == slotReply {
			drop = append(drop, sl.r)
		} else {
			unanswered++ // never answered, or a NoReply behind one
		}
		*sl = slot{}
	}
	c.next = c.assigned
	drop = append(drop, c.ready...)
	c.ready = nil
	c.mu.Unlock()

	c.srv.st.inFlight.Add(-unanswered)
	if freed > 0 {
		c.srv.unqueueRequest(freed)
	}
	c.srv.budgetForget(c)
	for _, r := range drop {
		c.dropped(r, r.wireLen())
	}
	c.gen.Add(1)
}
