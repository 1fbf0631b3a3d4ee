//go:build linux

package netpoll

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ringlog/internal/testkit"
)

// A kernel without what the uring path needs (simulated by the probe)
// serves on gnet, and the log says why: a warning where the uring path
// was asked for, information where it was the default's choice (IO
// empty, "auto" here).
func TestUringFallsBackToGnet(t *testing.T) {
	if !gnetSupported {
		t.Skip("gnet is not supported here")
	}
	for _, via := range []string{IOUring, IOUringShards, ""} {
		name := via
		if via == "" {
			name = "auto"
		}
		t.Run(name, func(t *testing.T) { testFallsBackToGnet(t, via) })
	}
}

func testFallsBackToGnet(t *testing.T, via string) {
	var logs syncBuffer
	h := newTestHandler(t, nil)
	cfg := Config{
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		uring:  &uringKnobs{probe: func() string { return "kernel lacks io_uring opcodes RECV (simulated)" }},
	}
	cfg.Addr, cfg.IO, cfg.Loops = "127.0.0.1:0", via, 1
	if via == IOUringShards {
		cfg.Owners = testOwners(t, 1)
	}
	s, err := Listen(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(ctx)
		h.checkDone(t)
	})
	if s.IO() != IOGnet {
		t.Fatalf("serving on %s, want the fallback gnet", s.IO())
	}
	want := `level=WARN msg="netpoll: io_uring network path unavailable; falling back to gnet"`
	if via == "" {
		want = `level=INFO msg="netpoll: io_uring network path unavailable; epoll loops (gnet)"`
	}
	if out := logs.String(); !strings.Contains(out, want) || !strings.Contains(out, "lacks io_uring opcodes RECV (simulated)") {
		t.Fatalf("log does not say %s and why: %q", want, out)
	}
	c := dial(t, s)
	c.send(echoReq("still served"))
	if got := string(c.recv()); got != "estill served" {
		t.Fatalf("got %q", got)
	}
}

// keeper keeps every frame it is served, unanswered until the end, and
// checks them all then: a frame that aliased a provided buffer, or bytes
// framed after their buffer went back to the ring, read the poison
// (0xEE) that the loop writes over every buffer it recycles, or the
// bytes of a later receive.
type keeper struct {
	mu     sync.Mutex
	frames [][]byte
	held   []held
	closed chan struct{}
}

func (k *keeper) Serve(c *Conn, seq uint64, frame []byte) {
	k.mu.Lock()
	k.frames = append(k.frames, frame)
	k.held = append(k.held, held{c, seq})
	k.mu.Unlock()
	c.NoReply(seq)
}

func (k *keeper) Closed(*Conn) { close(k.closed) }

func (k *keeper) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.frames)
}

// keepFrames sends n frames of varied sizes through a uring server with
// tiny poisoned provided buffers, and returns how many of the frames the
// handler kept differ from what was sent (or never came).
func keepFrames(t *testing.T, via string, knobs *uringKnobs, n int) int {
	t.Helper()
	k := &keeper{closed: make(chan struct{})}
	s := serveHandler(t, via, Config{uring: knobs, Loops: 1, MaxInFlight: 1024}, k, nil)
	c := dial(t, s)
	var want [][]byte
	var wire []byte
	for i := range n {
		body := []byte(fmt.Sprintf("frame %d ", i) + strings.Repeat(string(rune('a'+i%26)), i*7%300))
		want = append(want, body)
		wire = append(wire, frame(body)...)
	}
	if _, err := c.nc.Write(wire); err != nil {
		t.Fatal(err)
	}
	// Poison in a length prefix closes the connection: the frames never
	// served count as corrupted.
	testkit.WaitFor(t, 10*time.Second, "every frame served, or the connection closed", func() bool {
		select {
		case <-k.closed:
			return true
		default:
			return k.count() == n
		}
	})
	k.mu.Lock()
	bad := n - len(k.frames)
	defer k.mu.Unlock()
	for i, got := range k.frames {
		if !bytes.Equal(got, want[i]) {
			bad++
		}
	}
	return bad
}

// Buffer ownership: frames outlive the provided buffers they arrived in.
// With 64-byte buffers most frames span several; every buffer is poisoned
// as it goes back to the ring. The same run with the buffer handed back
// before its bytes are framed must see the poison, or the check proves
// nothing.
func TestUringProvidedBufferOwnership(t *testing.T) {
	urings(t, func(t *testing.T, via string) {
		t.Run("recycled after framing", func(t *testing.T) {
			if bad := keepFrames(t, via, &uringKnobs{bufBytes: 64, bufCount: 64, poison: true}, 500); bad != 0 {
				t.Fatalf("%d of 500 frames corrupted", bad)
			}
		})
		t.Run("recycled early is caught", func(t *testing.T) {
			k := &uringKnobs{bufBytes: 64, bufCount: 64, poison: true, recycleEarly: true}
			if bad := keepFrames(t, via, k, 500); bad == 0 {
				t.Fatal("buffers handed back before framing went unnoticed")
			}
		})
	})
}

// urings runs fn on both uring modes: loops of netpoll's own, and
// connections on given ring owners.
func urings(t *testing.T, fn func(t *testing.T, via string)) {
	for _, via := range []string{IOUring, IOUringShards} {
		t.Run(via, func(t *testing.T) {
			skipUnless(t, via)
			fn(t, via)
		})
	}
}

// Frames cut across provided buffers of 1, 7 and 64 bytes (1-byte buffers
// put every byte in a buffer of its own), echoed in order. 16 buffers a
// loop run out under a 60 KB write: the receive ends with ENOBUFS and is
// re-armed once the loop has handed them back.
func TestUringFramesAcrossBuffers(t *testing.T) {
	urings(t, testFramesAcrossBuffers)
}

func testFramesAcrossBuffers(t *testing.T, via string) {
	for _, size := range []int{1, 7, 64} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			h := newTestHandler(t, nil)
			s := serve(t, via, Config{uring: &uringKnobs{bufBytes: size, bufCount: 16, poison: true}}, h)
			c := dial(t, s)
			var wire []byte
			var want []string
			for i := range 200 {
				p := fmt.Sprintf("%d:%s", i, strings.Repeat("x", i*13%500))
				want = append(want, "e"+p)
				wire = append(wire, frame(echoReq(p))...)
			}
			go func() { _, _ = c.nc.Write(wire) }()
			for i, w := range want {
				if got := string(c.recv()); got != w {
					t.Fatalf("reply %d: %d bytes %.20q, want %d bytes %.20q", i, len(got), got, len(w), w)
				}
			}
			t.Logf("%d-byte buffers: %d receives ended for want of buffers", size, s.Stats().UringNoBuffers)
		})
	}
}

// Many connections on one loop share its provided buffers: 200 clients
// each pipelining 20 echoes through 16 buffers of 256 bytes (receives end
// with ENOBUFS and are re-armed), then close; another 200 connect after
// them and reuse the loop's connection ids. Every reply comes back in
// order, and every connection is torn down.
func TestUringManyConnections(t *testing.T) {
	urings(t, testManyConnections)
}

func testManyConnections(t *testing.T, via string) {
	h := newTestHandler(t, nil)
	s := serve(t, via, Config{Loops: 1, uring: &uringKnobs{bufBytes: 256, bufCount: 16, poison: true}}, h)
	for round := range 2 {
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := dial(t, s)
				defer c.nc.Close()
				var wire []byte
				for j := range 20 {
					wire = append(wire, frame(echoReq(fmt.Sprintf("%d/%d/%d %s", round, i, j, strings.Repeat("y", j*31))))...)
				}
				if _, err := c.nc.Write(wire); err != nil {
					errs <- err
					return
				}
				for j := range 20 {
					got, err := c.tryRecv(10 * time.Second)
					want := fmt.Sprintf("e%d/%d/%d %s", round, i, j, strings.Repeat("y", j*31))
					if err != nil || string(got) != want {
						errs <- fmt.Errorf("conn %d reply %d: %.30q, %v", i, j, got, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, 5*time.Second, "every connection torn down", func() bool { return h.closed.Load() == 400 })
	t.Logf("receives ended for want of buffers: %d", s.Stats().UringNoBuffers)
}

// Each uring loop adds a P for its life (internal/procs), so that goroutines a
// loop's turn makes runnable are not left in the run queue of the P its
// thread keeps while it waits in io_uring_enter. Two servers in one
// process add up; the default Loops stays the base count; closing gives
// the Ps back.
func TestUringLoopsAddProcs(t *testing.T) {
	skipUnless(t, IOUring)
	base := runtime.GOMAXPROCS(0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a := serve(t, IOUring, Config{Loops: 2}, newTestHandler(t, nil))
	if got := runtime.GOMAXPROCS(0); got != base+2 {
		t.Fatalf("GOMAXPROCS %d with 2 uring loops serving, want %d+2", got, base)
	}
	cfg, err := Config{Addr: "127.0.0.1:0"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Loops != base {
		t.Fatalf("default Loops %d while loops hold extra Ps, want the base %d", cfg.Loops, base)
	}
	b := serve(t, IOUring, Config{Loops: 1}, newTestHandler(t, nil))
	if got := runtime.GOMAXPROCS(0); got != base+3 {
		t.Fatalf("GOMAXPROCS %d with 3 uring loops serving, want %d+3", got, base)
	}
	c := dial(t, b)
	c.send(echoReq("served"))
	if got := string(c.recv()); got != "eserved" {
		t.Fatalf("got %q", got)
	}
	_ = a.Close(ctx)
	if got := runtime.GOMAXPROCS(0); got != base+1 {
		t.Fatalf("GOMAXPROCS %d after closing 2 of 3 loops, want %d+1", got, base)
	}
	_ = b.Close(ctx)
	if got := runtime.GOMAXPROCS(0); got != base {
		t.Fatalf("GOMAXPROCS %d after every loop ended, want the base %d", got, base)
	}
}

// A ring owner that ends under a server still registered on it (a shard
// stopped before the broker's network closed) stops the server with
// ErrEngineStopped and closes its connections, and Close returns rather
// than wait for a loop that nothing will turn again.
func TestUringShardsOwnerClosedFirst(t *testing.T) {
	skipUnless(t, IOUringShards)
	owners, end := testOwnersStop(t, 2)
	h := newTestHandler(t, nil)
	s := serve(t, IOUringShards, Config{Owners: owners}, h)
	c := dial(t, s)
	c.send(echoReq("before"))
	if got := string(c.recv()); got != "ebefore" {
		t.Fatalf("got %q", got)
	}
	end()
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the server still looks alive after its ring owners ended")
	}
	if err := s.Err(); !errors.Is(err, ErrEngineStopped) {
		t.Fatalf("Err %v, want ErrEngineStopped", err)
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the owners ended: %v, want the connection closed", err)
	}
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		closed <- s.Close(ctx)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waits for loops whose owner ended")
	}
}

// On the shards' rings a busy connection goes to the loop whose
// connections received the fewest bytes since the previous accept: with
// clients that each open an idle connection and then a busy one, round
// robin put both busy connections on one of two loops; every loop must
// receive a busy connection's bytes here.
func TestUringShardsSpreadBusyConnections(t *testing.T) {
	skipUnless(t, IOUringShards)
	h := newTestHandler(t, nil)
	// The placement alone: the balancer could mend a wrong one.
	s := serve(t, IOUringShards, Config{Loops: 2, uring: &uringKnobs{balanceEvery: -1}}, h)
	e := s.eng.(*uringEngine)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	busy := func(c *client) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				c.send(echoReq(strings.Repeat("b", 4096)))
				c.recv()
			}
		}()
	}
	rx := func() (n int64) {
		for _, l := range e.loops {
			n += l.rxBytes.Load()
		}
		return n
	}
	for round := range 2 {
		idle := dial(t, s)
		idle.send(echoReq("metadata"))
		idle.recv()
		if round > 0 {
			// The first busy connection's bytes counted since the idle
			// one's accept, before the next: a sleep of 20 ms was not
			// always enough on a loaded machine, and with nothing
			// received on its loop the second went beside it.
			from := rx()
			deadline := time.Now().Add(10 * time.Second)
			for rx()-from < 2*4096 {
				if time.Now().After(deadline) {
					t.Fatal("the busy connection sent nothing for 10 s")
				}
				time.Sleep(time.Millisecond)
			}
		}
		b := dial(t, s)
		b.send(echoReq("first"))
		b.recv()
		busy(b)
	}
	var before [2]int64
	for i, l := range e.loops {
		before[i] = l.rxBytes.Load()
	}
	time.Sleep(100 * time.Millisecond)
	for i, l := range e.loops {
		if d := l.rxBytes.Load() - before[i]; d == 0 {
			t.Fatalf("loop %d received nothing while two busy connections sent: both are on the other loop", i)
		}
	}
}

// pipelined keeps depth requests in flight on c until stop closes: echoes
// and delayed echoes (answered from a timer goroutine, so that some
// answers are in flight whenever the connection is looked at), each
// carrying its number, and checks that every answer comes back whole and
// in order. It returns the number of answers checked once stopped.
func pipelined(t *testing.T, c *client, depth, size int, stop <-chan struct{}) <-chan int {
	n := make(chan int, 1)
	slots := make(chan struct{}, depth)
	sent := make(chan string, depth)
	go func() {
		defer close(sent)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case slots <- struct{}{}:
			}
			p := fmt.Sprintf("%d:%s", i, strings.Repeat("p", size))
			body := echoReq(p)
			if i%3 == 2 {
				body = delayReq(1, p)
			}
			if _, err := c.nc.Write(frame(body)); err != nil {
				t.Errorf("send %d: %v", i, err)
				return
			}
			sent <- p
		}
	}()
	go func() {
		got := 0
		defer func() { n <- got }()
		for want := range sent {
			b, err := c.tryRecv(10 * time.Second)
			if err != nil {
				t.Errorf("answer %d: %v", got, err)
				return
			}
			if b[0] == cmdEcho {
				b = b[1:]
			}
			if string(b) != want {
				t.Errorf("answer %d: %.20q..., want %.20q...", got, b, want)
				return
			}
			got++
			<-slots
		}
	}()
	return n
}

// On the shards' rings the balancer moves a connection from a loop that
// receives much more than another to that one: two busy clients placed
// on the first of two loops (a test knob; in production a client whose
// load started after it connected), each with eight requests in flight
// (some answered late, from another goroutine), end up one on each loop,
// every answer whole and in order across the move. Without the balancer
// the second loop receives nothing.
func TestUringShardsMoveBusyConnection(t *testing.T) {
	skipUnless(t, IOUringShards)
	h := newTestHandler(t, nil)
	s := serve(t, IOUringShards, Config{Loops: 2, uring: &uringKnobs{onePlace: true,
		balanceEvery: 20 * time.Millisecond, balanceMinGap: 64 << 10, balanceSettle: time.Second}}, h)
	e := s.eng.(*uringEngine)
	stop := make(chan struct{})
	var answers []<-chan int
	for range 2 {
		c := dial(t, s)
		c.send(echoReq("first"))
		c.recv()
		answers = append(answers, pipelined(t, c, 8, 4096, stop))
	}
	deadline := time.Now().Add(10 * time.Second)
	var both bool
	for !t.Failed() && time.Now().Before(deadline) {
		var before [2]int64
		for i, l := range e.loops {
			before[i] = l.rxBytes.Load()
		}
		time.Sleep(100 * time.Millisecond)
		both = true
		for i, l := range e.loops {
			if l.rxBytes.Load() == before[i] {
				both = false
			}
		}
		if both && s.Stats().UringMoves > 0 {
			break
		}
	}
	close(stop)
	for i, a := range answers {
		if n := <-a; n == 0 {
			t.Errorf("client %d: no answer checked", i)
		}
	}
	if moves := s.Stats().UringMoves; !both || moves == 0 {
		t.Fatalf("%d moves; both loops receiving: %v", moves, both)
	}
	t.Logf("%d moves", s.Stats().UringMoves)
}

// A move waits for the connection's answers with its receive stopped; a
// request the handler holds (a long poll, a join) would stop it reading
// for as long: the move is given up after balanceGiveUp and the
// connection reads again where it is. Here a move is started on a
// connection whose request is held; its next request is served (framed
// and handed to the handler) while the first is still held, and both
// answers come back in order once it is released. Without the give-up
// the second request stays in the socket until the hold ends.
func TestUringShardsMoveGivenUp(t *testing.T) {
	skipUnless(t, IOUringShards)
	h := newTestHandler(t, nil)
	s := serve(t, IOUringShards, Config{Loops: 2, uring: &uringKnobs{onePlace: true,
		balanceEvery: 10 * time.Millisecond, balanceMinGap: 1 << 40, balanceGiveUp: 100 * time.Millisecond}}, h)
	e := s.eng.(*uringEngine)
	c := dial(t, s)
	c.send(echoReq("first"))
	c.recv()
	c.send([]byte{cmdHold})
	var hd held
	select {
	case hd = <-h.held:
	case <-time.After(5 * time.Second):
		t.Fatal("the held request was not served")
	}
	from, to := e.loops[0], e.loops[1]
	started := make(chan bool, 1)
	if err := from.o.Post(func() {
		for _, uc := range from.conns {
			if uc != nil && uc.c == hd.c {
				from.startMove(uc, to, Now())
				started <- true
				return
			}
		}
		started <- false
	}); err != nil {
		t.Fatal(err)
	}
	if !<-started {
		t.Fatal("the connection is not on the first loop")
	}
	served := h.served.Load()
	c.send(echoReq("second"))
	deadline := time.Now().Add(5 * time.Second)
	for h.served.Load() == served {
		if time.Now().After(deadline) {
			hd.c.Reply(hd.seq, h.response())
			t.Fatal("the request after the held one was not served in 5 s: the move was not given up")
		}
		time.Sleep(time.Millisecond)
	}
	hd.c.Reply(hd.seq, h.response())
	if b := c.recv(); len(b) != 0 {
		t.Fatalf("the held request's answer is %q, want empty", b)
	}
	if b := c.recv(); string(b) != string(echoReq("second")) {
		t.Fatalf("answer %q, want the second echo", b)
	}
	if n := s.Stats().UringMoves; n != 0 {
		t.Fatalf("%d moves, want the one given up", n)
	}
}

// A connection that moves while idle, with its client's next requests
// arriving only after the move, and one that closes as it moves, are
// served or closed as on any loop: here every connection is moved by
// the balancer (a gap of one byte suffices) back and forth between the
// two loops while its client sends small bursts, closes or disconnects.
func TestUringShardsMovesUnderChurn(t *testing.T) {
	skipUnless(t, IOUringShards)
	h := newTestHandler(t, nil)
	s := serve(t, IOUringShards, Config{Loops: 2, uring: &uringKnobs{onePlace: true,
		balanceEvery: time.Millisecond, balanceMinGap: 1, balanceSettle: time.Millisecond}}, h)
	var wg sync.WaitGroup
	for k := range 4 {
		wg.Go(func() {
			for round := range 30 {
				c := dial(t, s)
				for i := range 1 + round%5 {
					p := fmt.Sprintf("%d/%d/%d", k, round, i)
					c.send(echoReq(p))
					if b := c.recv(); string(b[1:]) != p {
						t.Errorf("answer %q, want %q", b[1:], p)
						return
					}
					if i%2 == 1 {
						time.Sleep(time.Millisecond)
					}
				}
				if round%3 == 0 {
					c.send([]byte{cmdClose})
					if _, err := c.tryRecv(5 * time.Second); err == nil {
						t.Errorf("an answer after cmdClose")
					}
				}
				_ = c.nc.Close()
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Conns != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := s.Stats().Conns; n != 0 {
		t.Fatalf("%d connections left open", n)
	}
	if s.Stats().UringMoves == 0 {
		t.Fatal("no connection moved")
	}
	t.Logf("%d moves", s.Stats().UringMoves)
}

// Large frames are read straight into their bodies (Stats.UringDirectBytes)
// as their bytes arrive, in pieces, between small frames that still come
// through the provided buffers (poisoned as they go back), and every echo
// comes back whole and in order. A client that closes in the middle of a
// directly read body closes its connection, as a truncated frame does on
// the other paths, and serves nothing of it.
func TestUringDirectReadsLargeFrames(t *testing.T) {
	urings(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{uring: &uringKnobs{bufBytes: 4096, bufCount: 64, poison: true}}, h)
		c := dial(t, s)
		rng := rand.New(rand.NewPCG(1, 2))
		var wire []byte
		var want []string
		for _, size := range []int{100, 70 << 10, 10, 1 << 20, 3<<20 + 7, 5, 200 << 10, 64<<10 - 1} {
			p := make([]byte, size)
			for j := range p {
				p[j] = 'a' + byte(rng.UintN(26))
			}
			want = append(want, "e"+string(p))
			wire = append(wire, frame(echoReq(string(p)))...)
		}
		go func() {
			// Pieces of up to 300 KiB with pauses between them: reads
			// find part of a body, and bodies start mid-piece.
			pieces := rand.New(rand.NewPCG(3, 4))
			for len(wire) > 0 {
				n := min(len(wire), 1+pieces.IntN(300<<10))
				if _, err := c.nc.Write(wire[:n]); err != nil {
					return
				}
				wire = wire[n:]
				time.Sleep(time.Millisecond)
			}
		}()
		for i, w := range want {
			if got := c.recv(); string(got) != w {
				t.Fatalf("reply %d: %d bytes, want %d (equal: %v)", i, len(got), len(w), string(got) == w)
			}
		}
		if d := s.Stats().UringDirectBytes; d < 3<<20 {
			t.Fatalf("%d bytes read straight into frames, want the large bodies' (over 3 MiB)", d)
		}

		served, direct, in := s.Stats().Frames, s.Stats().UringDirectBytes, s.Stats().BytesIn
		cut := dial(t, s)
		// The body's first bytes come through the buffers; those after
		// them, once its read is in the ring, straight into the frame.
		if _, err := cut.nc.Write(append(binary.BigEndian.AppendUint32(nil, 1<<20), cmdEcho, 'x')); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 5*time.Second, "the frame's first bytes", func() bool { return s.Stats().BytesIn >= in+6 })
		time.Sleep(20 * time.Millisecond)
		if _, err := cut.nc.Write(make([]byte, 300<<10)); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 5*time.Second, "the body read straight into its frame", func() bool {
			return s.Stats().UringDirectBytes == direct+300<<10
		})
		_ = cut.nc.Close()
		testkit.WaitFor(t, 5*time.Second, "the truncated connection closed", func() bool { return s.Stats().Conns == 1 })
		if got := s.Stats().Frames; got != served {
			t.Fatalf("%d frames served after the truncated one, want none", got-served)
		}
	})
}

// A region's header goes out with the region's first bytes (MSG_MORE on
// its sendmsg): sent alone it is a TCP segment of its own, one packet more
// for the kernel to carry through loopback and for the client to be woken
// for. Counted at the client (TCP_INFO's segments received) over
// request-response exchanges of a 5-byte head and a 4 KiB region.
func TestRegionHeaderGoesWithItsRegion(t *testing.T) {
	for _, via := range []string{IOUring, IOUringShards} {
		t.Run(via, func(t *testing.T) {
			f, data := testFile(t, 1<<20)
			h := newTestHandler(t, f)
			s := serve(t, via, Config{}, h)
			c := dial(t, s)
			exchange := func(i int) {
				pos := int64(i) * 4096
				c.send(fileReq(cmdFile, pos, 4096))
				if got := c.recv(); !bytes.Equal(got, append([]byte("F"), data[pos:pos+4096]...)) {
					t.Fatalf("response %d: %d bytes, not the region", i, len(got))
				}
			}
			for i := range 10 { // past the connection's first exchanges (quick ACKs)
				exchange(i)
			}
			const n = 100
			before := segsIn(t, c.nc)
			for i := range n {
				exchange(10 + i)
			}
			segs := segsIn(t, c.nc) - before
			t.Logf("%d segments for %d responses", segs, n)
			if segs > n*3/2 {
				t.Fatalf("%d segments received for %d responses of a head and a region: the heads went alone", segs, n)
			}
		})
	}
}

// segsIn is the number of TCP segments nc received so far.
func segsIn(t *testing.T, nc *net.TCPConn) uint32 {
	t.Helper()
	rc, err := nc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) { info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return info.Segs_in
}
