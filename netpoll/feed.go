package netpoll

import "fmt"

// bufFeed is the receiving half of a connection on the uring path, kept
// apart from the ring so that it can be fuzzed as a function of the bytes
// and of where the buffers cut them.
//
// The kernel fills provided buffers (a ring of them per loop, shared by
// the loop's connections) and reports each with a completion. push offers
// one buffer's bytes to the framer, which copies every frame body out into
// memory of its own (the handler owns a frame after Serve, for as long as
// it likes: Kafka's produce keeps slices of it until the append is done,
// and a provided buffer held that long would starve the ring). A frame cut
// across buffers is gathered by the framer as the buffers come, exactly as
// it gathers one across gnet's reads. What the framer does not take (the
// connection paused between frames) is copied into pending. Either way,
// once push returns no byte of the buffer is referenced any more, and the
// buffer goes back to the ring at once.
type bufFeed struct {
	fr framer
	// pending holds bytes received and not yet offered: the connection
	// was paused when they came. They are offered, ahead of any new
	// buffer, once it may read again.
	pending []byte
	// head is where the bytes of pending not yet offered start: a drain
	// that takes a frame moves it instead of moving what follows, so that
	// a connection paused over many small buffers costs linear time.
	head int
	// pendingMax bounds what pending holds; above it the connection is
	// closed.
	pendingMax int
}

// pendingKeepBytes is the capacity of an emptied pending buffer that is
// kept for the next pause; a larger one is dropped.
const pendingKeepBytes = 64 << 10

// emitFunc takes a frame the framer cut, and pooled, the buffer under it
// (nil if the frame was allocated exactly). It reports false when no more
// frames may be served (the connection or the server is closing): the
// rest of the bytes is left pending.
type emitFunc func(frame, pooled []byte) bool

// push offers p, the bytes of one provided buffer, after what is pending.
// ready says, between frames, whether the connection may take another
// one. After push returns, nothing refers to p. The error closes the
// connection.
func (b *bufFeed) push(p []byte, ready func() bool, emit emitFunc) error {
	if b.paused() {
		if b.head > 0 && b.head >= len(b.pending)/2 { // compact: each byte moves at most once per halving
			b.pending = b.pending[:copy(b.pending, b.pending[b.head:])]
			b.head = 0
		}
		b.pending = append(b.pending, p...)
		if err := b.checkPending(); err != nil {
			return err
		}
		return b.drain(ready, emit)
	}
	n, err := b.offer(p, ready, emit)
	if err != nil {
		return err
	}
	if n < len(p) {
		b.pending = append(b.pending, p[n:]...)
	}
	return b.checkPending()
}

// drain offers what is pending, as far as ready allows.
func (b *bufFeed) drain(ready func() bool, emit emitFunc) error {
	if !b.paused() {
		return nil
	}
	n, err := b.offer(b.pending[b.head:], ready, emit)
	if err != nil {
		return err
	}
	b.head += n
	if b.head == len(b.pending) {
		b.pending, b.head = b.pending[:0], 0
		if cap(b.pending) > pendingKeepBytes {
			b.pending = nil
		}
	}
	return nil
}

// paused reports whether bytes wait in pending.
func (b *bufFeed) paused() bool { return len(b.pending) > b.head }

func (b *bufFeed) checkPending() error {
	if n := len(b.pending) - b.head; b.pendingMax > 0 && n > b.pendingMax {
		return fmt.Errorf("%w: %d bytes unread", ErrInboundOverflow, n)
	}
	return nil
}

// offer hands p to the framer frame by frame and returns how much of p it
// used.
func (b *bufFeed) offer(p []byte, ready func() bool, emit emitFunc) (int, error) {
	used := 0
	for used < len(p) {
		if !b.fr.midFrame() && !ready() {
			return used, nil
		}
		n, frame, err := b.fr.offer(p[used:])
		used += n
		if err != nil {
			return used, err
		}
		if frame == nil {
			if n == 0 { // cannot happen with a sane framer; never loop on it
				return used, fmt.Errorf("%w: framer took no byte of %d", ErrSplitter, len(p)-used)
			}
			continue
		}
		if !emit(frame, b.fr.takeDone()) {
			return used, nil
		}
	}
	return used, nil
}
