package kafka

import (
	"sync"
	"time"

	"ringlog/engine"
	"ringlog/netpoll"
)

// Long polling. A fetch that finds fewer than min_bytes waits up to
// max_wait_ms for appends. It waits on its own goroutine, blocked on an
// engine.Waiter (signalled when the high watermark of a requested partition
// moves), a timer and a cancel channel: nothing spins, and an idle consumer
// costs one parked goroutine. Their number is bounded by the connections
// times netpoll's in-flight limit per connection, and the registry below
// ends them early when their connection closes or the broker stops, so
// neither a vanished client nor a shutdown waits out max_wait_ms.

// Why a long poll was cancelled.
const (
	cancelConnClosed int32 = 1 + iota // the answer has nowhere to go
	cancelStop                        // the broker is stopping: answer now
)

// fetchWaits is the registry of long-polling fetches, by connection.
type fetchWaits struct {
	mu      sync.Mutex
	byConn  map[*netpoll.Conn]map[*fetch]struct{}
	stopped bool // StopLongPolls ran: every fetch answers at once
}

// start makes f wait for data. f holds no read (its last pass was
// released). Called on the connection's network goroutine, so it cannot
// race with the connection's Closed.
func (w *fetchWaits) start(f *fetch) {
	f.cancel = make(chan struct{})
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		f.read()
		f.respond()
		return
	}
	if w.byConn == nil {
		w.byConn = map[*netpoll.Conn]map[*fetch]struct{}{}
	}
	fs := w.byConn[f.cx.c]
	if fs == nil {
		fs = map[*fetch]struct{}{}
		w.byConn[f.cx.c] = fs
	}
	fs[f] = struct{}{}
	w.mu.Unlock()

	var tps []engine.TP
	for i := range f.topics {
		for j := range f.topics[i].parts {
			tps = append(tps, f.topics[i].parts[j].tp)
		}
	}
	// The waiter is registered before the goroutine's first look at the
	// partitions, so an append landing in between is seen by that look or
	// signals the waiter: no wake-up is lost.
	wt := f.s.eng.NewWaiter(tps)
	// On its own goroutine, a panic would take the process down: run
	// closes the connection instead, as for any handler.
	f.cx.park() // RemoteTime: the wait and the read that ends it
	go f.s.run(f.cx, func() { f.longPoll(wt) })
}

// longPoll waits until a read pass has min_bytes (or an error), max_wait_ms
// has passed since the request arrived, or the wait is cancelled.
func (f *fetch) longPoll(wt *engine.Waiter) {
	defer f.s.waits.remove(f)
	defer wt.Stop()
	// max_wait_ms counts from the request's arrival (its frame whole).
	timer := time.NewTimer(f.maxWait - time.Duration(now()-f.cx.times.received))
	defer timer.Stop()
	if f.ready() {
		f.respond()
		return
	}
	for {
		select {
		case <-wt.C:
			if f.ready() {
				f.respond()
				return
			}
		case <-timer.C:
			f.read()
			f.respond()
			return
		case <-f.cancel:
			if f.cancelWhy.Load() == cancelConnClosed {
				f.cx.noReply() // dropped by netpoll: the connection is gone
				return
			}
			f.read()
			f.respond()
			return
		}
	}
}

// ready does a read pass and reports whether it ends the wait; if not, it
// releases the reads.
func (f *fetch) ready() bool {
	bytes, done := f.read()
	if done || bytes >= f.minBytes {
		return true
	}
	f.release()
	return false
}

func (w *fetchWaits) remove(f *fetch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if fs := w.byConn[f.cx.c]; fs != nil {
		delete(fs, f)
		if len(fs) == 0 {
			delete(w.byConn, f.cx.c)
		}
	}
}

// connClosed ends the long polls of a closed connection.
func (w *fetchWaits) connClosed(c *netpoll.Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for f := range w.byConn[c] {
		f.cancelWhy.Store(cancelConnClosed)
		close(f.cancel)
	}
	delete(w.byConn, c)
}

// StopLongPolls answers every long-polling fetch now with what it has, and
// makes every later fetch answer without waiting. Call it when shutting
// down, before netpoll's Server.Close: that Close waits for the requests in
// flight, and a consumer's fetch would otherwise hold it for max_wait_ms.
func (s *Server) StopLongPolls() {
	w := &s.waits
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	for _, fs := range w.byConn {
		for f := range fs {
			f.cancelWhy.Store(cancelStop)
			close(f.cancel)
		}
	}
	w.byConn = nil
}

// longPolls counts the fetches waiting now (tests).
func (w *fetchWaits) longPolls() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, fs := range w.byConn {
		n += len(fs)
	}
	return n
}
