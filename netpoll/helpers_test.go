package netpoll

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ringlog/ioring"
)

// The test protocol: the first byte of a request frame says what the test
// handler does with it.
const (
	cmdEcho  = 'e' // reply with the whole frame
	cmdFile  = 'f' // pos u64, n u64: reply "F" + file[pos:pos+n] as a region
	cmdMixed = 'm' // pos u64, n u64: reply "A", region, "B", region
	cmdDelay = 'd' // ms u32, payload: reply with payload after ms, from another goroutine
	cmdNone  = 'n' // NoReply
	cmdHold  = 'h' // hand (conn, seq) to the test through testHandler.held
	cmdClose = 'c' // close the connection from the handler
	cmdCopy  = 'r' // reply with a copy of the whole frame, then recycle the frame
	cmdWho   = 'w' // reply with the client certificate's common name, or "-" without TLS
	cmdLimit = 'l' // n u32: SetMaxFrameBytes(n), reply "ok"
)

func echoReq(payload string) []byte { return append([]byte{cmdEcho}, payload...) }

func fileReq(cmd byte, pos, n int64) []byte {
	b := []byte{cmd}
	b = binary.BigEndian.AppendUint64(b, uint64(pos))
	return binary.BigEndian.AppendUint64(b, uint64(n))
}

func delayReq(ms int, payload string) []byte {
	b := binary.BigEndian.AppendUint32([]byte{cmdDelay}, uint32(ms))
	return append(b, payload...)
}

type held struct {
	c   *Conn
	seq uint64
}

// testHandler implements the test protocol and audits OnDone: every
// response it makes must be released exactly once.
type testHandler struct {
	t    testing.TB
	file *os.File

	held   chan held
	served atomic.Int64
	closed atomic.Int64
	made   atomic.Int64
	done   atomic.Int64
	twice  atomic.Int64
	wg     sync.WaitGroup // delayed replies
}

func newTestHandler(t testing.TB, file *os.File) *testHandler {
	return &testHandler{t: t, file: file, held: make(chan held, 1024)}
}

func (h *testHandler) response() *Response {
	r := &Response{}
	h.made.Add(1)
	var once atomic.Bool
	r.OnDone(func() {
		if !once.CompareAndSwap(false, true) {
			h.twice.Add(1)
		}
		h.done.Add(1)
	})
	return r
}

// ours holds the local addresses of the connections this test binary
// dialed. Other processes on the machine (the kafka package's tests, run
// at the same time by go test) dial ports on 127.0.0.1 too: a Kafka client
// still retrying a broker its test killed reaches whichever server got that
// port next. A frame from such a stranger is not the test protocol's.
var ours sync.Map

func remember(nc net.Conn) { ours.Store(nc.LocalAddr().String(), true) }

func (h *testHandler) Serve(c *Conn, seq uint64, frame []byte) {
	if _, ok := ours.Load(c.RemoteAddr().String()); !ok {
		c.Close()
		return
	}
	h.served.Add(1)
	if len(frame) == 0 {
		c.Reply(seq, h.response())
		return
	}
	switch frame[0] {
	case cmdEcho:
		r := h.response()
		r.AppendBytes(frame)
		c.Reply(seq, r)
	case cmdFile, cmdMixed:
		pos := int64(binary.BigEndian.Uint64(frame[1:]))
		n := int64(binary.BigEndian.Uint64(frame[9:]))
		r := h.response()
		if frame[0] == cmdFile {
			r.AppendBytes([]byte("F"))
			r.AppendRegion(h.file, pos, n)
		} else {
			r.AppendBytes([]byte("A"))
			r.AppendRegion(h.file, pos, n)
			r.AppendBytes([]byte("B"))
			r.AppendRegion(h.file, pos, n)
		}
		c.Reply(seq, r)
	case cmdDelay:
		ms := binary.BigEndian.Uint32(frame[1:])
		r := h.response()
		r.AppendBytes(frame[5:])
		h.wg.Add(1)
		time.AfterFunc(time.Duration(ms)*time.Millisecond, func() {
			defer h.wg.Done()
			c.Reply(seq, r)
		})
	case cmdCopy:
		r := h.response()
		r.AppendBytes(append([]byte(nil), frame...))
		c.Recycle(seq)
		c.Reply(seq, r)
	case cmdWho:
		who := "-"
		if st := c.TLS(); st != nil && len(st.PeerCertificates) > 0 {
			who = st.PeerCertificates[0].Subject.CommonName
		}
		r := h.response()
		r.AppendBytes([]byte(who))
		c.Reply(seq, r)
	case cmdLimit:
		c.SetMaxFrameBytes(int32(binary.BigEndian.Uint32(frame[1:])))
		r := h.response()
		r.AppendBytes([]byte("ok"))
		c.Reply(seq, r)
	case cmdNone:
		c.NoReply(seq)
	case cmdHold:
		h.held <- held{c, seq}
	case cmdClose:
		c.Close()
	default:
		h.t.Errorf("test handler: unknown command %q", frame[0])
		c.Close()
	}
}

func (h *testHandler) Closed(*Conn) { h.closed.Add(1) }

// checkDone asserts that every response made was released exactly once.
func (h *testHandler) checkDone(t testing.TB) {
	t.Helper()
	h.wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for h.done.Load() != h.made.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if made, done, twice := h.made.Load(), h.done.Load(), h.twice.Load(); made != done || twice != 0 {
		t.Fatalf("OnDone: %d responses made, %d releases, %d released twice", made, done, twice)
	}
}

// ios runs fn once per implementation: gnet, uring and portable.
func ios(t *testing.T, fn func(t *testing.T, via string)) {
	for _, via := range []string{IOGnet, IOUring, IOUringShards, IOPortable} {
		t.Run(via, func(t *testing.T) {
			skipUnless(t, via)
			fn(t, via)
		})
	}
}

// skipUnless skips the test where via cannot serve.
func skipUnless(t testing.TB, via string) {
	t.Helper()
	switch {
	case via == IOGnet && !gnetSupported:
		t.Skip("gnet is not supported here")
	case via == IOUring:
		if why := probeUring(); why != "" {
			t.Skipf("io_uring network path unavailable: %s", why)
		}
	case via == IOUringShards:
		if why := ioring.ProbeOwner(); why != "" {
			t.Skipf("io_uring ring owners unavailable: %s", why)
		}
	}
}

// testOwners starts n ring owners, each on a goroutine locked to its
// thread that does nothing but turn (as a shard with no partition
// would), for IOUringShards to register connections on; they end when the
// test's cleanups reach them, after the servers registered later closed.
func testOwners(t testing.TB, n int) []*ioring.Owner {
	owners, _ := testOwnersStop(t, n)
	return owners
}

// testOwnersStop is testOwners with a function that ends the owners at
// once (their group's rings are released at the test's end).
func testOwnersStop(t testing.TB, n int) ([]*ioring.Owner, func()) {
	t.Helper()
	g := ioring.NewOwnerGroup()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var owners []*ioring.Owner
	for range n {
		up := make(chan *ioring.Owner, 1)
		errc := make(chan error, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			o, err := g.NewOwner()
			if err != nil {
				errc <- err
				return
			}
			up <- o
			stopping := false
			o.AddHook(func() {
				select {
				case <-stop:
					stopping = true
				default:
				}
			}, func() bool { return stopping })
			for !stopping {
				if err := o.Turn(-1); err != nil {
					t.Errorf("ring owner: %v", err)
					break
				}
			}
			o.Close()
		}()
		select {
		case o := <-up:
			owners = append(owners, o)
		case err := <-errc:
			t.Fatalf("ring owner: %v", err)
		}
	}
	var once sync.Once
	end := func() {
		once.Do(func() {
			close(stop)
			for _, o := range owners {
				_ = o.Post(func() {})
			}
			wg.Wait()
		})
	}
	t.Cleanup(func() {
		end()
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	return owners, end
}

var testLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// serve starts a server on 127.0.0.1 with cfg (Addr, IO and Logger
// filled in) and closes it, then audits OnDone, when the test ends.
func serve(t *testing.T, via string, cfg Config, h *testHandler) *Server {
	t.Helper()
	return serveHandler(t, via, cfg, h, func() { h.checkDone(t) })
}

// serveHandler is serve for any handler; after, if set, runs once the
// server is closed.
func serveHandler(t *testing.T, via string, cfg Config, h Handler, after func()) *Server {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	cfg.IO = via
	if cfg.Loops == 0 {
		cfg.Loops = 2
	}
	if via == IOUringShards && cfg.Owners == nil {
		cfg.Owners = testOwners(t, cfg.Loops)
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger
	}
	s, err := Listen(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS == nil && s.IO() != via {
		t.Fatalf("serving on %s, want %s", s.IO(), via)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Close(ctx)
		if after != nil {
			after()
		}
	})
	return s
}

// testFile creates a file of n random bytes and returns it, open, with its
// contents.
func testFile(t testing.TB, n int) (*os.File, []byte) {
	t.Helper()
	data := make([]byte, n)
	seed := [32]byte{byte(n), byte(n >> 8), byte(n >> 16)}
	_, _ = rand.NewChaCha8(seed).Read(data)
	path := filepath.Join(t.TempDir(), "region")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f, data
}

// client speaks the framing over a plain socket.
type client struct {
	t  testing.TB
	nc *net.TCPConn
	br *bufio.Reader
}

func dial(t testing.TB, s *Server) *client {
	t.Helper()
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	remember(nc)
	t.Cleanup(func() { _ = nc.Close() })
	return &client{t: t, nc: nc.(*net.TCPConn), br: bufio.NewReaderSize(nc, 256<<10)}
}

func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func (c *client) send(body []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(frame(body)); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

func (c *client) recv() []byte {
	c.t.Helper()
	b, err := c.tryRecv(5 * time.Second)
	if err != nil {
		c.t.Fatalf("recv: %v", err)
	}
	return b
}

func (c *client) tryRecv(timeout time.Duration) ([]byte, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(timeout))
	var hdr [4]byte
	if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > 1<<30 {
		return nil, fmt.Errorf("response length %d", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c.br, b); err != nil {
		return nil, err
	}
	return b, nil
}

// expectClosed asserts that the server closes the connection: reads end in
// EOF or a reset, not a timeout.
func (c *client) expectClosed(timeout time.Duration) {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(timeout))
	_, err := io.Copy(io.Discard, c.br)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		c.t.Fatalf("connection still open after %v", timeout)
	}
}

func dialRaw(s *Server) (net.Conn, error) {
	nc, err := net.DialTimeout("tcp", s.Addr().String(), time.Second)
	if err == nil {
		remember(nc)
	}
	return nc, err
}
