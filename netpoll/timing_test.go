package netpoll

import (
	"os"
	"sync"
	"testing"
	"time"
)

// timingHandler answers 'e' at once with the frame, 'd' with the frame
// 80 ms later from another goroutine, and 'f' with its whole file as a
// region; it observes every response's Timing.
type timingHandler struct {
	file    *os.File
	wg      sync.WaitGroup
	timings chan timed
}

// timed is one response's Timing, with what FrameTime said in Serve.
type timed struct {
	seq     uint64
	frameAt int64
	t       Timing
}

// timingObs is a request's Observer.
type timingObs struct {
	h       *timingHandler
	seq     uint64
	frameAt int64
}

func (o *timingObs) Written(_ *Response, t Timing) {
	o.h.timings <- timed{seq: o.seq, frameAt: o.frameAt, t: t}
}

const timingDelay = 80 * time.Millisecond

func (h *timingHandler) Serve(c *Conn, seq uint64, frame []byte) {
	if _, ok := ours.Load(c.RemoteAddr().String()); !ok {
		c.Close()
		return
	}
	r := &Response{}
	r.Observe(&timingObs{h: h, seq: seq, frameAt: c.FrameTime()})
	switch frame[0] {
	case 'e':
		r.AppendBytes(frame)
		c.Reply(seq, r)
	case 'd':
		r.AppendBytes(frame)
		h.wg.Add(1)
		time.AfterFunc(timingDelay, func() {
			defer h.wg.Done()
			c.Reply(seq, r)
		})
	case 'f':
		st, _ := h.file.Stat()
		r.AppendRegion(h.file, 0, st.Size())
		c.Reply(seq, r)
	default:
		c.Close()
	}
}

func (h *timingHandler) Closed(*Conn) {}

// next returns the next observed Timing.
func (h *timingHandler) next(t *testing.T) timed {
	t.Helper()
	select {
	case x := <-h.timings:
		return x
	case <-time.After(5 * time.Second):
		t.Fatal("no response observed")
		return timed{}
	}
}

// ordered checks that a Timing's moments are all set and in order, and
// that FrameTime said Received.
func ordered(t *testing.T, x timed) {
	t.Helper()
	tt := x.t
	if tt.Received == 0 || tt.Received != x.frameAt || tt.Replied < tt.Received || tt.WriteStart < tt.Replied || tt.Written < tt.WriteStart {
		t.Fatalf("request %d: FrameTime %d, %+v: want 0 < Received = FrameTime <= Replied <= WriteStart <= Written", x.seq, x.frameAt, tt)
	}
}

// TestTimingQueues: a response answered late is Replied late; the one
// after it, answered at once, waits behind it (WriteStart - Replied), as
// responses go in request order.
func TestTimingQueues(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := &timingHandler{timings: make(chan timed, 16)}
		s := serveHandler(t, via, Config{}, h, h.wg.Wait)
		c := dial(t, s)
		both := append(frame([]byte("d-slow")), frame([]byte("e-fast"))...)
		if _, err := c.nc.Write(both); err != nil {
			t.Fatal(err)
		}
		if got := string(c.recv()); got != "d-slow" {
			t.Fatalf("first response %q", got)
		}
		if got := string(c.recv()); got != "e-fast" {
			t.Fatalf("second response %q", got)
		}
		slow, fast := h.next(t), h.next(t)
		if slow.seq != 0 || fast.seq != 1 {
			t.Fatalf("observed requests %d then %d, want 0 then 1", slow.seq, fast.seq)
		}
		ordered(t, slow)
		ordered(t, fast)
		least := int64(timingDelay * 9 / 10)
		if d := slow.t.Replied - slow.t.Received; d < least {
			t.Errorf("delayed answer: Replied - Received %v, want >= %v", time.Duration(d), timingDelay)
		}
		if d := fast.t.Replied - fast.t.Received; d >= least {
			t.Errorf("prompt answer: Replied - Received %v", time.Duration(d))
		}
		if fast.t.WriteStart < slow.t.Replied {
			t.Errorf("the prompt answer's write began %v before the delayed one was answered",
				time.Duration(slow.t.Replied-fast.t.WriteStart))
		}
		t.Logf("slow %+v, fast %+v", slow.t, fast.t)
	})
}

// TestTimingSend: a response larger than the socket buffers, to a client
// that reads only after a pause, is Written only once the client took its
// last bytes (sendfile waits for room on every path).
func TestTimingSend(t *testing.T) {
	const size = 32 << 20
	const pause = 150 * time.Millisecond
	f, _ := testFile(t, size)
	ios(t, func(t *testing.T, via string) {
		h := &timingHandler{file: f, timings: make(chan timed, 16)}
		s := serveHandler(t, via, Config{}, h, h.wg.Wait)
		c := dial(t, s)
		c.send([]byte("f"))
		time.Sleep(pause)
		b, err := c.tryRecv(10 * time.Second)
		if err != nil || len(b) != size {
			t.Fatalf("region response: %d bytes, %v", len(b), err)
		}
		x := h.next(t)
		ordered(t, x)
		if d := x.t.Written - x.t.WriteStart; d < int64(pause*9/10) {
			t.Errorf("Written - WriteStart %v, want at least the client's pause %v", time.Duration(d), pause)
		}
		if d := x.t.WriteStart - x.t.Replied; d > int64(pause/2) {
			t.Errorf("WriteStart - Replied %v: nothing was ahead of it", time.Duration(d))
		}
		t.Logf("%+v: send %v", x.t, time.Duration(x.t.Written-x.t.WriteStart))
	})
}
