package netpoll

import (
	"fmt"
	"sync/atomic"

	"ringlog/internal/framepool"
)

// frameChunkMin is the first allocation for the body of a frame whose
// length a Splitter announced (LengthPrefixed). A body grows from there to
// at most four times what has arrived, so that a client announcing a large
// frame and sending nothing more costs this much, not the announced size;
// or, at once, to the largest body the connection has sent whole before
// (framer.earned): a producer's next request of the size of its last one
// is read into one buffer, without the growth's copies.
const frameChunkMin = 64 << 10

// scanChunkMin is the first allocation for a frame whose end the Splitter
// has not found yet (Lines, RESP). Such a buffer grows by powers of two,
// to at most four times what has arrived.
const scanChunkMin = 512

// framer cuts a connection's byte stream into frames with a Splitter. It
// is a pure state machine: the connection offers it the bytes its inbound
// buffer holds (gnet's, a bufio.Reader's) without consuming them, and
// discards from that buffer what offer says it used. Where a Splitter
// announced a frame's length, bytes may also be read straight into the
// frame (need, then advance), never past its end. The caller decides where
// the bytes come from (gnet, a bufio.Reader, a fuzzer). Every frame is
// handed out in memory of its own, which the handler owns from then on.
//
// A frame comes out one of three ways:
//
//   - whole in one offer: its body is copied once, from the inbound buffer
//     into an allocation of exactly its size (pooled from frameChunkMin);
//   - announced (LengthPrefixed's prefix read, the body not all here): the
//     body, without the head, goes into a buffer that grows with what
//     arrives (frameChunkMin, then up to 4x the bytes received, or at once
//     up to the largest body the connection completed before), never to
//     the announced length ahead of the bytes otherwise;
//   - scanned (no end found yet): the frame's bytes so far are kept and
//     shown to the Splitter again, with its Resume, as more arrive; the
//     buffer grows by powers of two from scanChunkMin, to at most 4x what
//     was received, and never beyond MaxFrameBytes + MaxFramingBytes.
//
// Buffers of frameChunkMin bytes and more come from internal/framepool,
// whose capacities are powers of two; the frame handed out is cut to its
// exact length and capacity all the same, and the whole buffer is kept in
// done until the caller takes it (to be recycled once the handler has
// finished with the frame).
type framer struct {
	sp  Splitter
	max int // the bound on the frame under way (MaxFrameBytes, or maxp's)
	// maxp, if set, is the connection's bound (Conn.SetMaxFrameBytes),
	// read into max before each frame's first bytes are looked at.
	maxp *atomic.Int32
	// buf is the frame under way, nil between frames: announced, its body
	// bytes from Head on; scanned, all its bytes. len: bytes received,
	// cap: bytes allocated.
	buf    []byte
	want   int   // announced: len(buf) once the frame is whole (Len - Head); else 0
	tail   int   // announced: the frame's Tail
	resume int64 // scanned: the Splitter's Resume
	err    error // sticky: once the stream is bad it stays bad
	// earned is the largest body of a frame the connection completed: a
	// body announced later may be allocated up to it before its bytes
	// arrive. The connection sent that many bytes once; a client that
	// stalls inside a frame of that size holds as much either way.
	earned int
	// done is the pooled buffer under the frame returned last, or nil when
	// that frame was allocated exactly (small frames).
	done []byte
}

func newFramer(sp Splitter, maxFrameBytes int32) framer {
	return framer{sp: sp, max: int(maxFrameBytes)}
}

// limit is the most a frame may occupy in the stream.
func (f *framer) limit() int { return f.max + MaxFramingBytes }

// offer looks at p, the bytes at the head of the connection's inbound
// buffer, and uses what belongs to the frame under way, at most up to its
// end. It returns how many bytes of p it used (the caller discards them
// from its buffer), the frame if one is complete (owned by the caller from
// then on; takeDone hands over the pooled buffer under it), or the error
// that closes the connection, which is sticky.
func (f *framer) offer(p []byte) (int, []byte, error) {
	f.done = nil
	switch {
	case f.err != nil:
		return 0, nil, f.err
	case len(p) == 0:
		return 0, nil, nil
	case f.want > 0:
		n := copy(f.need(), p)
		frame, err := f.advance(n)
		return n, frame, err
	case f.buf == nil:
		if f.maxp != nil {
			f.max = int(f.maxp.Load())
		}
		return f.start(p)
	default:
		return f.scan(p)
	}
}

// start asks the Splitter about p, the first bytes of a frame.
func (f *framer) start(p []byte) (int, []byte, error) {
	fr, err := f.split(p, 0)
	switch {
	case err != nil:
		return 0, nil, err
	case fr.Len == 0: // end not found: keep the bytes and scan on
		f.buf = f.grow(len(p))
		f.buf = append(f.buf, p...)
		f.resume = fr.Resume
		return len(p), nil, nil
	case fr.Len <= len(p): // whole: copy the body out of the inbound buffer
		body := p[fr.Head : fr.Len-fr.Tail]
		frame := framepool.Get(len(body))[:len(body)]
		copy(frame, body)
		if framepool.Pooled(cap(frame)) {
			f.done = frame
		}
		return fr.Len, frame[:len(body):len(body)], nil
	default: // announced: the body grows as it arrives
		f.want, f.tail = fr.Len-fr.Head, fr.Tail
		n := 0
		if body := p[fr.Head:]; len(body) > 0 {
			n = copy(f.need(), body)
			f.buf = f.buf[:len(f.buf)+n]
		}
		return fr.Head + n, nil, nil
	}
}

// scan adds p's bytes to a frame whose end was not found yet and asks the
// Splitter again. Bytes past the end it then finds are not used: they stay
// in the inbound buffer, the start of the next frame.
func (f *framer) scan(p []byte) (int, []byte, error) {
	old := len(f.buf)
	if old == cap(f.buf) {
		f.buf = f.grow(old + 1)
	}
	n := copy(f.buf[old:min(cap(f.buf), f.limit())], p)
	data := f.buf[:old+n]
	fr, err := f.split(data, f.resume)
	switch {
	case err != nil:
		return 0, nil, err
	case fr.Len == 0:
		f.buf, f.resume = data, fr.Resume
		return n, nil, nil
	case fr.Len <= old:
		// Complete in bytes it said were not enough: not a pure function
		// of the bytes, and the frame's end already went by.
		return 0, nil, f.fail(fmt.Errorf("%w: a frame of %d bytes found in %d bytes that needed more", ErrSplitter, fr.Len, old))
	case fr.Len <= len(data):
		end := fr.Len - fr.Tail
		frame := data[fr.Head:end:end]
		if framepool.Pooled(cap(f.buf)) {
			f.done = f.buf
		}
		f.reset()
		return fr.Len - old, frame, nil
	default: // announced: keep the body only, and read up to the end
		f.buf = f.buf[:copy(f.buf[:cap(f.buf)], data[fr.Head:])]
		f.want, f.tail, f.resume = fr.Len-fr.Head, fr.Tail, 0
		return n, nil, nil
	}
}

// split calls the Splitter and checks its answer: a splitter's bug must
// not make netpoll misframe, loop or hold more than a frame may take.
func (f *framer) split(data []byte, resume int64) (Frame, error) {
	fr, err := f.sp.Split(data, resume, f.max)
	if err != nil {
		return fr, f.fail(err)
	}
	switch {
	case fr.Len < 0 || fr.Head < 0 || fr.Tail < 0:
		err = fmt.Errorf("%w: negative length in %+v", ErrSplitter, fr)
	case fr.Len == 0 && len(data) >= f.limit():
		err = fmt.Errorf("%w: %d bytes without a frame end", ErrFrameTooLarge, len(data))
	case fr.Len == 0:
	case fr.Head+fr.Tail > min(fr.Len, MaxFramingBytes):
		err = fmt.Errorf("%w: framing of %d+%d bytes in a frame of %d", ErrSplitter, fr.Head, fr.Tail, fr.Len)
	case fr.Len-fr.Head-fr.Tail > f.max:
		err = fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, fr.Len-fr.Head-fr.Tail, f.max)
	case fr.Len > len(data) && fr.Head > len(data):
		err = fmt.Errorf("%w: a frame announced before its head of %d bytes arrived", ErrSplitter, fr.Head)
	}
	if err != nil {
		return fr, f.fail(err)
	}
	return fr, nil
}

func (f *framer) fail(err error) error {
	f.err = err
	return err
}

func (f *framer) reset() { f.buf, f.want, f.tail, f.resume = nil, 0, 0, 0 }

// grow returns the scanned frame's buffer with room for at least n bytes:
// a power of two from scanChunkMin, at least 4x the bytes it holds, at
// most limit.
func (f *framer) grow(n int) []byte {
	size := scanChunkMin
	for size < max(n, 4*len(f.buf)) {
		size *= 2
	}
	grown := framepool.Get(min(size, f.limit()))[:len(f.buf)]
	copy(grown, f.buf)
	framepool.Put(f.buf)
	return grown
}

// need returns where the next bytes of an announced frame go: free room in
// its body, growing it if it is full, never past the frame's end. It is nil
// unless a frame is announced.
func (f *framer) need() []byte {
	if f.err != nil || f.want == 0 {
		return nil
	}
	if len(f.buf) == cap(f.buf) {
		// Grow geometrically so a large frame is copied a bounded number of
		// times (a 1 MiB frame: 64 KiB -> 256 KiB -> 1 MiB), and cap at the
		// announced size so the final body is exactly the frame.
		// A pooled buffer rounds the size up to a power of two; that stays
		// within 4x the bytes received, since 4x a previous class size is
		// itself a class size.
		grown := framepool.Get(min(f.want, max(frameChunkMin, 4*len(f.buf), f.earned)))[:len(f.buf)]
		copy(grown, f.buf)
		framepool.Put(f.buf)
		f.buf = grown
	}
	// A pooled buffer may be larger than the frame: the bytes after the
	// frame are the next frame's.
	return f.buf[len(f.buf):min(cap(f.buf), f.want)]
}

// bodyRoom returns need's slice when an announced frame's body has started
// arriving and is not complete, and nil otherwise: between frames, while
// scanning, or before the first byte of a body, whose chunk only arriving
// bytes justify.
func (f *framer) bodyRoom() []byte {
	if len(f.buf) == 0 {
		return nil
	}
	return f.need()
}

// bodyLeft returns how many bytes of an announced frame's body are still
// to come (0 unless a frame is announced).
func (f *framer) bodyLeft() int {
	if !f.announced() {
		return 0
	}
	return f.want - len(f.buf)
}

// advance records that n bytes were copied into the slice need (or
// bodyRoom) returned, and returns the frame once it is whole.
func (f *framer) advance(n int) ([]byte, error) {
	f.done = nil
	if f.err != nil {
		return nil, f.err
	}
	f.buf = f.buf[:len(f.buf)+n]
	if len(f.buf) < f.want {
		return nil, nil
	}
	f.earned = max(f.earned, f.want)
	end := f.want - f.tail
	frame := f.buf[:end:end]
	if framepool.Pooled(cap(f.buf)) {
		f.done = f.buf
	}
	f.reset()
	return frame, nil
}

// announced reports whether the frame under way has a known length: its
// bytes may be read straight into need's slice.
func (f *framer) announced() bool { return f.err == nil && f.want > 0 }

// takeDone returns the pooled buffer under the frame returned last (nil if
// it had none) and forgets it.
func (f *framer) takeDone() []byte {
	b := f.done
	f.done = nil
	return b
}

// midFrame reports whether part of a frame has been received: a connection
// that ends now was cut inside a frame.
func (f *framer) midFrame() bool { return f.err == nil && (f.want > 0 || f.buf != nil) }
