package netpoll

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"ringlog/internal/testkit"
)

func TestEcho(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{}, h)
		c := dial(t, s)
		for i := range 10 {
			msg := fmt.Sprintf("hello %d", i)
			c.send(echoReq(msg))
			if got := string(c.recv()); got != "e"+msg {
				t.Fatalf("got %q", got)
			}
		}
		c.send(nil) // an empty frame is a frame
		if got := c.recv(); len(got) != 0 {
			t.Fatalf("empty frame answered with %d bytes", len(got))
		}
		if st := s.Stats(); st.Frames != 11 || st.Conns != 1 || st.Accepted != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// A frame arriving one byte per TCP segment is reassembled.
func TestFrameAcrossPartialReads(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{}, h)
		c := dial(t, s)
		wire := append(frame(echoReq("byte by byte")), frame(echoReq("then whole"))...)
		for i, b := range wire[:len(wire)-15] {
			if _, err := c.nc.Write([]byte{b}); err != nil {
				t.Fatal(err)
			}
			if i%4 == 0 {
				time.Sleep(time.Millisecond) // let each byte be read on its own
			}
		}
		if _, err := c.nc.Write(wire[len(wire)-15:]); err != nil {
			t.Fatal(err)
		}
		if got := string(c.recv()); got != "ebyte by byte" {
			t.Fatalf("got %q", got)
		}
		if got := string(c.recv()); got != "ethen whole" {
			t.Fatalf("got %q", got)
		}
	})
}

// Many requests in flight, answered out of order from other goroutines,
// with NoReply among them: responses come back in request order.
func TestPipelinedOutOfOrder(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{MaxInFlight: 32}, h)
		c := dial(t, s)
		const n = 300
		rng := rand.New(rand.NewPCG(7, 7))
		var want []string
		var wire []byte
		for i := range n {
			payload := fmt.Sprintf("req-%03d", i)
			switch rng.IntN(4) {
			case 0:
				wire = append(wire, frame(echoReq(payload))...)
				want = append(want, "e"+payload)
			case 1:
				wire = append(wire, frame([]byte{cmdNone})...)
			default:
				wire = append(wire, frame(delayReq(rng.IntN(8), payload))...)
				want = append(want, payload)
			}
		}
		go func() { _, _ = c.nc.Write(wire) }()
		// Every expected response, however loaded the machine (a short
		// timeout here failed under a load of 15), then none more.
		for i := range want {
			b, err := c.tryRecv(10 * time.Second)
			if err != nil {
				t.Fatalf("got %d responses, want %d: %v", i, len(want), err)
			}
			if string(b) != want[i] {
				t.Fatalf("response %d: %q, want %q", i, b, want[i])
			}
		}
		if b, err := c.tryRecv(300 * time.Millisecond); err == nil {
			t.Fatalf("a response more than the %d expected: %q", len(want), b)
		}
		testkit.WaitFor(t, 5*time.Second, "in-flight to drain", func() bool { return s.Stats().InFlight == 0 })
	})
}

func TestNoReplyInTheMiddle(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{}, h)
		c := dial(t, s)
		c.send(delayReq(30, "first"))
		c.send([]byte{cmdNone})
		c.send(echoReq("third"))
		c.send([]byte{cmdNone})
		c.send(delayReq(5, "fifth"))
		for _, want := range []string{"first", "ethird", "fifth"} {
			if got := string(c.recv()); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		}
	})
}

// File regions arrive byte-exact, alone or mixed with bytes, and go by
// sendfile when the client reads promptly.
func TestFileRegions(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		f, data := testFile(t, 8<<20)
		h := newTestHandler(t, f)
		s := serve(t, via, Config{}, h)
		c := dial(t, s)
		rng := rand.New(rand.NewPCG(3, 4))
		var regionBytes int64
		for i := range 60 {
			n := rng.Int64N(2 << 20)
			if i%10 == 0 {
				n = rng.Int64N(100)
			}
			pos := rng.Int64N(int64(len(data)) - n)
			cmd := byte(cmdFile)
			want := append([]byte("F"), data[pos:pos+n]...)
			if i%3 == 0 {
				cmd = cmdMixed
				want = append(append(append([]byte("A"), data[pos:pos+n]...), 'B'), data[pos:pos+n]...)
				regionBytes += n
			}
			regionBytes += n
			c.send(fileReq(cmd, pos, n))
			if got := c.recv(); !bytes.Equal(got, want) {
				t.Fatalf("region %d (%d@%d): %d bytes, want %d, equal prefix %d", i, n, pos, len(got), len(want), commonPrefix(got, want))
			}
		}
		// The counters move just after the bytes leave: the client can be
		// faster than the loop's next instruction.
		testkit.WaitFor(t, 5*time.Second, "the region counters", func() bool {
			st := s.Stats()
			return st.SendfileBytes+st.CopiedBytes == regionBytes
		})
		st := s.Stats()
		if sendfileExpected(via) {
			if share := float64(st.SendfileBytes) / float64(regionBytes); share < 0.95 {
				t.Fatalf("sendfile share %.3f, want >= 0.95", share)
			}
		}
		t.Logf("%d region bytes: %d by sendfile, %d copied", regionBytes, st.SendfileBytes, st.CopiedBytes)
	})
}

func sendfileExpected(via string) bool {
	return runtime.GOOS == "linux" || (via != IOPortable && gnetSupported)
}

func commonPrefix(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// A region whose file is shorter than promised cannot be completed: the
// connection closes instead of sending a wrong frame.
func TestShortRegionClosesConnection(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		f, data := testFile(t, 1<<20)
		h := newTestHandler(t, f)
		s := serve(t, via, Config{}, h)
		c := dial(t, s)
		c.send(fileReq(cmdFile, int64(len(data))-1000, 5000))
		c.expectClosed(5 * time.Second)
		testkit.WaitFor(t, 5*time.Second, "Closed", func() bool { return h.closed.Load() == 1 })
		_ = s
	})
}

// A client that stops reading makes the server stop reading it once
// MaxQueuedBytes are queued; memory stays bounded, other clients are
// served, and once the client reads again everything arrives.
func TestSlowReaderIsBounded(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		f, data := testFile(t, 4<<20)
		h := newTestHandler(t, f)
		const queuedMax = 2 << 20
		const region = 1 << 20
		s := serve(t, via, Config{MaxQueuedBytes: queuedMax}, h)
		slow := dial(t, s)
		if err := slow.nc.SetReadBuffer(64 << 10); err != nil {
			t.Fatal(err)
		}
		const reqs = 64 // 64 MiB of responses asked for
		var wire []byte
		for i := range reqs {
			wire = append(wire, frame(fileReq(cmdFile, int64(i%3)*region, region))...)
		}
		if _, err := slow.nc.Write(wire); err != nil {
			t.Fatal(err)
		}

		var peak int64
		testkit.WaitFor(t, 5*time.Second, "a pause", func() bool { return s.Stats().Pauses > 0 })
		for range 100 {
			peak = max(peak, s.Stats().QueuedBytes)
			time.Sleep(2 * time.Millisecond)
		}
		// The limit is checked before each request is served; the one that
		// crosses it adds at most one response.
		if peak > queuedMax+region+4 {
			t.Fatalf("queued %d bytes, limit %d", peak, queuedMax)
		}
		if served := h.served.Load(); served >= reqs {
			t.Fatalf("all %d requests served to a client that reads nothing", served)
		}

		// Another client is served meanwhile.
		other := dial(t, s)
		other.send(echoReq("still here"))
		if got := string(other.recv()); got != "estill here" {
			t.Fatalf("got %q", got)
		}

		for i := range reqs {
			got := slow.recv()
			pos := int64(i%3) * region
			if !bytes.Equal(got[1:], data[pos:pos+region]) {
				t.Fatalf("response %d differs", i)
			}
		}
		t.Logf("peak queued %d bytes (limit %d), %d pauses", peak, queuedMax, s.Stats().Pauses)
	})
}

// A length prefix of 2^31-1 or a negative one closes the connection
// without allocating anything like it.
func TestBadLengthClosesWithoutAllocating(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{MaxFrameBytes: 1 << 20}, h)
		for _, length := range []uint32{1<<31 - 1, 1<<20 + 1, 0xffffffff, 1 << 31} {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			c := dial(t, s)
			if _, err := c.nc.Write(binary.BigEndian.AppendUint32(nil, length)); err != nil {
				t.Fatal(err)
			}
			c.expectClosed(5 * time.Second)
			runtime.ReadMemStats(&after)
			if grown := after.TotalAlloc - before.TotalAlloc; grown > 64<<20 {
				t.Fatalf("length %#x: %d bytes allocated", length, grown)
			}
		}
		if st := s.Stats(); st.Frames != 0 {
			t.Fatalf("%d frames served", st.Frames)
		}
	})
}

// A connection cut inside a frame serves nothing of it; one that announces
// a large frame and sends a little costs what arrived, not what was
// announced.
func TestTruncatedFrame(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{}, h)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		c := dial(t, s)
		wire := append(binary.BigEndian.AppendUint32(nil, 90<<20), "only a few bytes"...)
		if _, err := c.nc.Write(wire); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 5*time.Second, "the bytes to be read", func() bool { return s.Stats().BytesIn == int64(len(wire)) })
		runtime.ReadMemStats(&after)
		if grown := after.TotalAlloc - before.TotalAlloc; grown > 16<<20 {
			t.Fatalf("%d bytes allocated for a frame announced at 90 MiB", grown)
		}
		_ = c.nc.Close()
		testkit.WaitFor(t, 5*time.Second, "Closed", func() bool { return h.closed.Load() == 1 })
		if h.served.Load() != 0 {
			t.Fatal("a truncated frame was served")
		}
	})
}

func TestMaxConns(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{MaxConns: 2}, h)
		a, b := dial(t, s), dial(t, s)
		for _, c := range []*client{a, b} {
			c.send(echoReq("x"))
			c.recv()
		}
		over := dial(t, s)
		over.expectClosed(5 * time.Second)
		if st := s.Stats(); st.Rejected != 1 || st.Conns != 2 {
			t.Fatalf("stats %+v", st)
		}
		_ = a.nc.Close()
		testkit.WaitFor(t, 5*time.Second, "a to close", func() bool { return s.Stats().Conns == 1 })
		again := dial(t, s)
		again.send(echoReq("y"))
		if got := string(again.recv()); got != "ey" {
			t.Fatalf("got %q", got)
		}
	})
}

// MaxInFlight stops reading a connection until answers release the window.
func TestMaxInFlight(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{MaxInFlight: 4}, h)
		c := dial(t, s)
		var wire []byte
		for range 10 {
			wire = append(wire, frame([]byte{cmdHold})...)
		}
		if _, err := c.nc.Write(wire); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 5*time.Second, "4 served", func() bool { return h.served.Load() == 4 })
		time.Sleep(20 * time.Millisecond)
		if n := h.served.Load(); n != 4 {
			t.Fatalf("%d served with MaxInFlight 4", n)
		}
		for i := range 10 {
			hd := <-h.held
			if hd.seq != uint64(i) {
				t.Fatalf("held seq %d, want %d", hd.seq, i)
			}
			r := h.response()
			r.AppendBytes([]byte{byte(i)})
			hd.c.Reply(hd.seq, r)
		}
		for i := range 10 {
			if got := c.recv(); len(got) != 1 || got[0] != byte(i) {
				t.Fatalf("response %d: %v", i, got)
			}
		}
	})
}

// The handler may close its connection.
func TestHandlerCloses(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{}, h)
		c := dial(t, s)
		c.send([]byte{cmdClose})
		c.expectClosed(5 * time.Second)
		testkit.WaitFor(t, 5*time.Second, "Closed", func() bool { return h.closed.Load() == 1 && s.Stats().Conns == 0 })
	})
}

// Close waits for requests in flight to be answered and written.
func TestGracefulClose(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{}, h)
		c := dial(t, s)
		c.send(delayReq(150, "answered before close"))
		testkit.WaitFor(t, 5*time.Second, "serve", func() bool { return h.served.Load() == 1 })
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 100*time.Millisecond {
			t.Fatalf("Close returned after %v, before the reply", d)
		}
		if got := string(c.recv()); got != "answered before close" {
			t.Fatalf("got %q", got)
		}
		c.expectClosed(5 * time.Second)
		if h.closed.Load() != 1 {
			t.Fatal("Closed not called")
		}
		// New connections are refused.
		if nc, err := dialRaw(s); err == nil {
			_ = nc.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := nc.Read(make([]byte, 1)); err == nil {
				t.Fatal("a connection after Close was served")
			}
			_ = nc.Close()
		}
	})
}

// Close gives up when ctx ends, drops what is unanswered, and every
// response made is still released exactly once (checked by serve's
// cleanup): sent, dropped with the connection, dropped with the server.
func TestCloseTimeoutReleasesEverything(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		f, _ := testFile(t, 4<<20)
		h := newTestHandler(t, f)
		s := serve(t, via, Config{MaxQueuedBytes: 1 << 20}, h)

		// Sent.
		ok := dial(t, s)
		ok.send(echoReq("x"))
		ok.recv()

		// Dropped with its connection: the reply comes after the client left.
		gone := dial(t, s)
		gone.send(delayReq(50, "nobody reads this"))
		testkit.WaitFor(t, 5*time.Second, "serve", func() bool { return h.served.Load() == 2 })
		_ = gone.nc.Close()
		testkit.WaitFor(t, 5*time.Second, "the connection to close", func() bool { return h.closed.Load() == 1 })

		// Dropped with the server: a client that never reads holds queued
		// responses, and one request is never answered.
		stuck := dial(t, s)
		stuck.send([]byte{cmdHold})
		for range 8 {
			stuck.send(fileReq(cmdFile, 0, 1<<20))
		}
		testkit.WaitFor(t, 5*time.Second, "queued responses", func() bool { return s.Stats().QueuedBytes > 0 })

		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := s.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close: %v, want deadline exceeded", err)
		}
		h.wg.Wait()
		if st := s.Stats(); st.Conns != 0 || st.QueuedBytes != 0 || st.InFlight != 0 {
			t.Fatalf("after Close: %+v", st)
		}
		// A late answer to the held request is dropped, and released.
		select {
		case hd := <-h.held:
			r := h.response()
			r.AppendBytes([]byte("late"))
			hd.c.Reply(hd.seq, r)
		default:
		}
	})
}

// gnet cannot stop reading a socket: a paused connection whose client keeps
// sending is closed once it has buffered pausedInboundMax. The portable path
// simply does not read, and the uring path cancels its receive: TCP holds
// the client back.
func TestPausedClientKeepsSending(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{MaxInFlight: 1, MaxQueuedBytes: 1 << 20}, h)
		c := dial(t, s)
		c.send([]byte{cmdHold})
		hd := <-h.held
		flood := frame(echoReq(string(bytes.Repeat([]byte{'z'}, 64<<10))))
		errc := make(chan error, 1)
		_ = c.nc.SetWriteBuffer(32 << 10)
		go func() {
			_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
			for range 512 { // 32 MiB: more than the kernel buffers take
				if _, err := c.nc.Write(flood); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		if via == IOGnet {
			c.expectClosed(5 * time.Second)
			return
		}
		err := <-errc
		if ne, ok := err.(interface{ Timeout() bool }); !ok || !ne.Timeout() {
			t.Fatalf("flooding a paused %s connection: %v, want a write timeout", via, err)
		}
		if n := h.served.Load(); n != 1 {
			t.Fatalf("%d served while paused", n)
		}
		hd.c.NoReply(hd.seq)
		testkit.WaitFor(t, 5*time.Second, "reading to resume", func() bool { return h.served.Load() > 1 })
	})
}

func TestListenError(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{}, h)
		_, err := Listen(Config{Addr: s.Addr().String(), IO: via, Logger: testLogger}, h)
		if err == nil {
			t.Fatal("listening twice on one address succeeded")
		}
		if _, err := Listen(Config{Addr: "127.0.0.1:0", MaxInFlight: -1}, h); !errors.Is(err, ErrConfig) {
			t.Fatalf("negative limit: %v", err)
		}
	})
}

// A second answer for one request is a handler bug: it is ignored (and its
// response released), and the connection goes on.
func TestStrayAnswerIgnored(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{Logger: slog.New(slog.DiscardHandler)}, h)
		c := dial(t, s)
		c.send([]byte{cmdHold})
		hd := <-h.held
		hd.c.NoReply(hd.seq)
		r := h.response()
		r.AppendBytes([]byte("stray"))
		hd.c.Reply(hd.seq, r)    // answered already
		hd.c.NoReply(hd.seq + 7) // never handed out
		c.send(echoReq("fine"))
		if got := string(c.recv()); got != "efine" {
			t.Fatalf("got %q", got)
		}
	})
}

// Regression: gnet did not set SO_REUSEADDR, so a server restarted on its
// port failed to bind while the connections it closed sat in TIME_WAIT.
func TestRestartOnSamePort(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{}, h)
		c := dial(t, s)
		c.send(echoReq("x"))
		c.recv()
		if err := s.Close(context.Background()); err != nil { // the server closes first: TIME_WAIT is ours
			t.Fatal(err)
		}
		c.expectClosed(5 * time.Second)
		again, err := Listen(Config{Addr: s.Addr().String(), IO: via, Loops: 1, Logger: testLogger}, h)
		if err != nil {
			t.Fatalf("restart on %s: %v", s.Addr(), err)
		}
		defer func() { _ = again.Close(context.Background()) }()
		c2 := dial(t, again)
		c2.send(echoReq("y"))
		if got := string(c2.recv()); got != "ey" {
			t.Fatalf("got %q", got)
		}
	})
}

// syncBuffer collects output written and read at once.
type syncBuffer = testkit.Buffer

// A connection closed by a limit of the broker (here a frame above
// MaxFrameBytes) is logged as a warning naming the limits, so that an
// operator can tell it from a client that went away; a client that simply
// disconnects is not.
func TestLimitCloseIsLogged(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		var logs syncBuffer
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{MaxFrameBytes: 1 << 10, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, h)
		quiet := dial(t, s)
		quiet.nc.Close()
		c := dial(t, s)
		if _, err := c.nc.Write(binary.BigEndian.AppendUint32(nil, 1<<20)); err != nil {
			t.Fatal(err)
		}
		c.expectClosed(5 * time.Second)
		testkit.WaitFor(t, 5*time.Second, "the warning", func() bool { return strings.Contains(logs.String(), "closed by a limit") })
		if out := logs.String(); strings.Count(out, "closed by a limit") != 1 || !strings.Contains(out, "level=WARN msg=\"netpoll: connection closed by a limit\"") || !strings.Contains(out, "max_frame_bytes=1024") {
			t.Fatalf("want one warning naming max_frame_bytes=1024:\n%s", out)
		}
	})
}

// Large frames arriving in pieces, back to back, each recycled by the
// handler as soon as it has copied it: every frame comes back whole and
// unmixed with its neighbours, whichever pooled buffer, and whichever of
// gnet's reads or the direct socket reads, carried its bytes.
func TestLargeFramesRecycled(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{MaxFrameBytes: 8 << 20}, h)
		c := dial(t, s)
		rng := rand.New(rand.NewPCG(1, 2))
		var want [][]byte
		var wire []byte
		for _, size := range []int{70 << 10, 300 << 10, 5, 1<<20 + 3, 64 << 10, 3 << 20, 128 << 10, 2 << 20} {
			body := make([]byte, size)
			for i := range body {
				body[i] = byte(rng.Uint32())
			}
			body[0] = cmdCopy
			want = append(want, append([]byte{cmdCopy}, body[1:]...))
			wire = append(wire, frame(body)...)
		}
		go func() {
			// Uneven pieces with pauses, so that frames start and end
			// inside gnet's reads and inside direct ones.
			r := rand.New(rand.NewPCG(3, 4))
			for rest := wire; len(rest) > 0; {
				n := min(len(rest), 1+r.IntN(256<<10))
				if _, err := c.nc.Write(rest[:n]); err != nil {
					return
				}
				rest = rest[n:]
				if r.IntN(4) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
		for i, w := range want {
			if got := c.recv(); !bytes.Equal(got, w) {
				t.Fatalf("frame %d (%d bytes): echo differs (%d bytes)", i, len(w), len(got))
			}
		}
	})
}

// Done is closed when the client goes, so that a handler waiting with a
// request in hand (a long poll) stops waiting; it is open while the
// connection lives.
func TestDoneWhenClientGoes(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{}, h)
		c := dial(t, s)
		c.send([]byte{cmdHold})
		hd := <-h.held
		select {
		case <-hd.c.Done():
			t.Fatal("Done closed on a live connection")
		case <-time.After(50 * time.Millisecond):
		}
		c.nc.Close()
		select {
		case <-hd.c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done still open 5 s after the client closed")
		}
		hd.c.NoReply(hd.seq) // dropped: the connection is gone
		testkit.WaitFor(t, 5*time.Second, "Closed", func() bool { return h.closed.Load() == 1 })
	})
}

// openingHandler is a testHandler that records Opened calls.
type openingHandler struct {
	*testHandler
	opened chan *Conn
}

func (h *openingHandler) Opened(c *Conn) { h.opened <- c }

// TestOpenedBeforeAnyFrame: a handler that implements Opener learns of a
// connection that sends nothing, once, before its first Serve.
func TestOpenedBeforeAnyFrame(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := &openingHandler{testHandler: newTestHandler(t, nil), opened: make(chan *Conn, 4)}
		s := serveHandler(t, via, Config{}, h, nil)
		c := dial(t, s)
		var oc *Conn
		select {
		case oc = <-h.opened:
		case <-time.After(5 * time.Second):
			t.Fatal("Opened not called for a connection that sent nothing")
		}
		c.send(echoReq("x"))
		if got := string(c.recv()); got != string(echoReq("x")) {
			t.Fatalf("echo %q", got)
		}
		oc.Close()
		c.expectClosed(5 * time.Second)
		select {
		case <-h.opened:
			t.Fatal("Opened called twice")
		default:
		}
	})
}

// TestPausedConnectionResumesAfterItsLastWrite: a connection paused by
// MaxQueuedBytes, whose pending requests wait, resumes once its queued
// responses are written, even when the last of them leaves in one go (a
// reader that keeps up, regions that fit the socket's buffer) and no
// completion is left to wake the loop.
func TestPausedConnectionResumesAfterItsLastWrite(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		f, data := testFile(t, 1<<20)
		h := newTestHandler(t, f)
		const region = 64 << 10
		s := serve(t, via, Config{MaxQueuedBytes: 4 << 10}, h)
		c := dial(t, s)
		const reqs = 32
		var wire []byte
		for i := range reqs {
			wire = append(wire, frame(fileReq(cmdFile, int64(i%8)*region, region))...)
		}
		if _, err := c.nc.Write(wire); err != nil {
			t.Fatal(err)
		}
		for i := range reqs {
			got := c.recv()
			pos := int64(i%8) * region
			if !bytes.Equal(got[1:], data[pos:pos+region]) {
				t.Fatalf("response %d differs", i)
			}
		}
	})
}
