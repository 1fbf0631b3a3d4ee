package netpoll

import "os"

// Limits of one gather: at most iovMax slices (Linux's UIO_MAXIOV) and
// about gatherBytesMax bytes. The byte bound matters on the gnet path, where
// whatever the socket does not take at once is copied into gnet's outbound
// buffer.
const (
	iovMax         = 1024
	gatherBytesMax = 256 << 10
)

// cursor walks the responses of one connection in the order they go on the
// wire. Segment 0 of a response is its prefix (empty for some Splitters),
// segment i+1 its part i.
// It belongs to the connection's writer (the event loop for gnet, the writer
// goroutine for the portable path), never shared.
type cursor struct {
	q   []*Response // q[head] is being written; the backing array is reused
	hd  int         // head: index of the response being written
	seg int         // current segment of q[hd]
	off int64       // bytes of that segment already written
	iov [][]byte    // scratch for gather
	// toFile says the last gather stopped at a file region: its bytes
	// end with that region's header, and the region's sendfile follows
	// them.
	toFile bool
}

// empty reports whether nothing is left to write.
func (w *cursor) empty() bool { return w.hd == len(w.q) }

// push appends responses to write after the ones queued.
func (w *cursor) push(rs []*Response) {
	if w.empty() {
		clear(w.q)
		w.q, w.hd = w.q[:0], 0
	}
	w.q = append(w.q, rs...)
}

// segment returns segment i of r.
func segment(r *Response, i int) (b []byte, f *os.File, pos, n int64) {
	if i == 0 {
		return r.head, nil, 0, int64(len(r.head))
	}
	p := &r.parts[i-1]
	if p.f == nil {
		return p.b, nil, 0, int64(len(p.b))
	}
	return nil, p.f, p.pos, p.n
}

// gather returns the byte segments from the cursor on, across responses, up
// to the next file region or the gather limits. It returns nil when the
// cursor is at a file region (or at the end). The slices alias the
// responses' memory and stay valid until advance moves past them.
//
// The writer calls it right before a write (of its bytes, or of the
// region at the cursor when it finds none), so it stamps the responses the
// write reaches with Timing.WriteStart.
func (w *cursor) gather() (iov [][]byte, n int) {
	iov = w.iov[:0]
	w.toFile = false
	ri, seg, off := w.hd, w.seg, w.off
	var now int64
	for ri < len(w.q) && len(iov) < iovMax && n < gatherBytesMax {
		r := w.q[ri]
		if r.obs != nil && r.timing.WriteStart == 0 {
			if now == 0 {
				now = Now()
			}
			r.timing.WriteStart = now
		}
		if seg > len(r.parts) {
			ri, seg, off = ri+1, 0, 0
			continue
		}
		b, f, _, _ := segment(r, seg)
		if f != nil {
			w.toFile = true
			break
		}
		b = b[off:]
		if room := gatherBytesMax - n; len(b) > room {
			b = b[:room]
		}
		if len(b) > 0 {
			iov = append(iov, b)
			n += len(b)
		}
		seg, off = seg+1, 0
	}
	w.iov = iov
	return iov, n
}

// region returns the rest of the file region at the cursor, if the cursor is
// at one. When neither gather nor region finds anything to write, the
// cursor is at empty segments (a response without prefix or parts):
// advance(0) moves past them.
func (w *cursor) region() (f *os.File, pos, n int64, ok bool) {
	if w.empty() {
		return nil, 0, 0, false
	}
	_, f, pos, n = segment(w.q[w.hd], w.seg)
	if f == nil {
		return nil, 0, 0, false
	}
	return f, pos + w.off, n - w.off, true
}

// advance moves the cursor n bytes forward and calls done for every
// response it finishes, in order (done runs the response's accounting and
// OnDone). Empty trailing segments are skipped, so a response is done as
// soon as its last byte is written.
func (w *cursor) advance(n int64, done func(*Response)) {
	for !w.empty() {
		r := w.q[w.hd]
		for w.seg <= len(r.parts) {
			_, _, _, l := segment(r, w.seg)
			rest := l - w.off
			if n < rest {
				w.off += n
				return
			}
			n -= rest
			w.seg, w.off = w.seg+1, 0
		}
		w.q[w.hd] = nil
		w.hd++
		w.seg, w.off = 0, 0
		done(r)
	}
	if n > 0 {
		panic("netpoll: cursor advanced past the responses queued") // a writer counted bytes it did not take from us
	}
}

// drop empties the cursor, handing every response to fn with the number of
// its bytes never written (the connection closed first).
func (w *cursor) drop(fn func(r *Response, unsent int64)) {
	q := w.q[w.hd:]
	seg, off := w.seg, w.off
	w.q, w.hd, w.seg, w.off = nil, 0, 0, 0
	for i, r := range q {
		unsent := r.wireLen()
		if i == 0 {
			for s := range seg {
				_, _, _, l := segment(r, s)
				unsent -= l
			}
			unsent -= off
		}
		fn(r, unsent)
	}
}
