package netpoll

import "os"

// Response is one reply frame, built by the handler from byte slices and
// file regions and handed to Conn.Reply. netpoll writes the prefix the
// Splitter asks for (LengthPrefixed: the 4-byte size, the sum of the parts'
// lengths; Lines and RESP: none), then the parts in order; file regions go
// out with sendfile where the platform allows.
//
// A Response belongs to the handler until Reply, and to netpoll afterwards:
// the handler must not touch it, nor change the bytes or file regions it
// points at, until its OnDone function runs. The zero value is an empty
// response, ready to use.
type Response struct {
	parts  []part
	size   int64 // sum of the parts' lengths, without the prefix
	bad    bool  // a region had a negative position or length
	onDone []func()
	head   []byte  // the prefix, filled in by seal (usually in prefix)
	prefix [8]byte // room for head without an allocation
	// timing is stamped by netpoll (Received and Replied in Reply,
	// WriteStart by the cursor, Written by Conn.done) and handed to obs.
	timing Timing
	obs    Observer
}

// part is a byte slice (f == nil) or a file region [pos, pos+n) of f.
type part struct {
	b   []byte
	f   *os.File
	pos int64
	n   int64
}

func (p *part) len() int64 {
	if p.f == nil {
		return int64(len(p.b))
	}
	return p.n
}

// AppendBytes appends b to the response. The response keeps b, without
// copying it, until OnDone.
func (r *Response) AppendBytes(b []byte) {
	if len(b) == 0 {
		return
	}
	r.parts = append(r.parts, part{b: b})
	r.size += int64(len(b))
}

// AppendRegion appends n bytes of f starting at pos. They are sent with
// sendfile when possible, read and copied otherwise. f must stay open until
// OnDone (segment readers pin their files until then). If f turns out to
// hold fewer bytes than promised when the region is sent, the frame can no
// longer be completed and the connection is closed.
func (r *Response) AppendRegion(f *os.File, pos, n int64) {
	if pos < 0 || n < 0 || f == nil {
		r.bad = true
		return
	}
	if n == 0 {
		return
	}
	r.parts = append(r.parts, part{f: f, pos: pos, n: n})
	r.size += n
}

// OnDone registers fn to be called exactly once, after the response has
// been fully written to the socket or dropped because its connection
// closed. Several functions run in registration order. fn runs on a
// netpoll goroutine (an event loop or a connection's writer) and must not
// block.
func (r *Response) OnDone(fn func()) {
	if fn != nil {
		r.onDone = append(r.onDone, fn)
	}
}

// Observe asks for the response's Timing: o.Written is called once the
// response is written (see Observer). At most one observer; a later call
// replaces it. Storing a pointer in o allocates nothing, so a handler can
// pass its per-request state.
func (r *Response) Observe(o Observer) { r.obs = o }

// Len reports the response's size without its prefix.
func (r *Response) Len() int64 { return r.size }

// seal fills in the prefix sp asks for. A response with a bad region, or
// one the prefix cannot describe (too large for LengthPrefixed's 4 bytes),
// cannot be framed.
func (r *Response) seal(sp Splitter) error {
	if r.bad {
		return ErrBadRegion
	}
	head, err := sp.AppendResponsePrefix(r.prefix[:0], r.size)
	if err != nil {
		return err
	}
	r.head = head
	return nil
}

// wireLen is the number of bytes the response occupies on the wire.
func (r *Response) wireLen() int64 { return int64(len(r.head)) + r.size }

// release runs the OnDone functions. It is called exactly once per replied
// response, by whoever owns it at that moment (see Conn).
func (r *Response) release() {
	fns := r.onDone
	r.onDone = nil
	for _, fn := range fns {
		fn()
	}
}
