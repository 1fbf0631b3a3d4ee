package fetcher

import (
	"sync/atomic"

	"ringlog/internal/framepool"
)

// frame is one response's bytes, given back to internal/framepool when
// nothing refers to them any more: the stream applying the response holds
// one reference, and every Records call another until its done (the
// records handed over point into the frame; the engine is done with them
// when it answers, its write complete). A done with an error keeps the
// bytes from the pool for good: a shard whose ring broke answers before
// the kernel may be done with its writes, so they are left to the
// collector, as netpoll's produce frames are.
type frame struct {
	buf  []byte
	refs atomic.Int32
	kept atomic.Bool
}

func newFrame(buf []byte) *frame {
	f := &frame{buf: buf}
	f.refs.Store(1)
	return f
}

// release drops a reference; err != nil keeps the bytes from the pool.
func (f *frame) release(err error) {
	if f == nil {
		return
	}
	if err != nil {
		f.kept.Store(true)
	}
	if f.refs.Add(-1) == 0 && !f.kept.Load() {
		framepool.Put(f.buf)
	}
}

// holdFor takes a reference on f for a handler call and returns done
// wrapped to release it, once (nil: a frame not pooled, nothing to count).
func (f *frame) holdFor(done func(int64, error)) func(int64, error) {
	if f == nil {
		return done
	}
	f.refs.Add(1)
	var once atomic.Bool
	return func(next int64, err error) {
		done(next, err)
		if once.CompareAndSwap(false, true) {
			f.release(err)
		}
	}
}
