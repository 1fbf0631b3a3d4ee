package netpoll

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"ringlog/internal/testkit"
)

func limitReq(n uint32) []byte { return binary.BigEndian.AppendUint32([]byte{cmdLimit}, n) }

// A new connection's frames are bounded by InitialMaxFrameBytes (Kafka's
// sasl.server.max.receive.size before authentication): a larger one closes
// it unserved. Once the handler lifts the bound with SetMaxFrameBytes, the
// same frame is served; the bound never exceeds MaxFrameBytes.
func TestSetMaxFrameBytes(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{MaxFrameBytes: 64 << 10, InitialMaxFrameBytes: 1 << 10}, h)
		big := echoReq(strings.Repeat("x", 2000))

		before := dial(t, s)
		before.send(echoReq("small"))
		if got := string(before.recv()); got != "esmall" {
			t.Fatalf("got %q", got)
		}
		before.send(big)
		before.expectClosed(5 * time.Second)
		if n := h.served.Load(); n != 1 {
			t.Fatalf("%d served: the frame above the initial bound was served", n)
		}

		after := dial(t, s)
		after.send(limitReq(4 << 10))
		if got := string(after.recv()); got != "ok" {
			t.Fatalf("got %q", got)
		}
		after.send(big)
		if got := after.recv(); !bytes.Equal(got, big) {
			t.Fatalf("the frame under the lifted bound: %d bytes back", len(got))
		}
		// Asking for more than MaxFrameBytes gets MaxFrameBytes.
		after.send(limitReq(1 << 30))
		after.recv()
		after.send(echoReq(strings.Repeat("y", 60<<10)))
		if got := after.recv(); len(got) != 1+60<<10 {
			t.Fatalf("%d bytes back", len(got))
		}
		if _, err := after.nc.Write(binary.BigEndian.AppendUint32(nil, 64<<10+1)); err != nil {
			t.Fatal(err)
		}
		after.expectClosed(5 * time.Second)
	})
}

// MaxConnsPerIP bounds the connections from one address, and an override
// replaces it for its address (0: none at all). The test dials from
// addresses of its own in 127/8, so that other processes' connections to
// 127.0.0.1 cannot take the places it counts on.
func TestMaxConnsPerIP(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{MaxConnsPerIP: 2,
			MaxConnsPerIPOverrides: map[string]int{"127.0.0.6": 1, "127.0.0.7": 0, "127.0.0.8": 3}}, h)
		from := func(ip string) *client {
			t.Helper()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: time.Second}
			nc, err := d.Dial("tcp", s.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			remember(nc)
			t.Cleanup(func() { _ = nc.Close() })
			return &client{t: t, nc: nc.(*net.TCPConn), br: bufio.NewReader(nc)}
		}
		served := func(c *client) {
			t.Helper()
			c.send(echoReq("hi"))
			if got := string(c.recv()); got != "ehi" {
				t.Fatalf("got %q", got)
			}
		}
		open := map[string][]*client{}
		for ip, limit := range map[string]int{"127.0.0.5": 2, "127.0.0.6": 1, "127.0.0.7": 0, "127.0.0.8": 3} {
			for range limit {
				c := from(ip)
				served(c)
				open[ip] = append(open[ip], c)
			}
			from(ip).expectClosed(5 * time.Second)
		}
		if st := s.Stats(); st.Rejected != 4 || st.Conns != 6 {
			t.Fatalf("stats %+v", st)
		}
		// A place freed is a place to take again.
		_ = open["127.0.0.6"][0].nc.Close()
		testkit.WaitFor(t, 5*time.Second, "the close", func() bool { return s.Stats().Conns == 5 })
		served(from("127.0.0.6"))
		from("127.0.0.6").expectClosed(5 * time.Second)
	})
}

// holdReq is a held request of n bytes in all.
func holdReq(n int) []byte { return append([]byte{cmdHold}, make([]byte, n-1)...) }

// MaxQueuedRequestBytes is shared by all connections: once the request
// bytes handed out and not answered reach it, a connection with a request
// in flight takes no more, while one with none is served one (so that no
// connection starves and a frame above the budget passes); answers that
// bring the bytes under the budget wake the paused connections, whichever
// connection they answered.
func TestMaxQueuedRequestBytes(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		const budget = 1000
		s := serve(t, via, Config{MaxQueuedRequestBytes: budget}, h)
		held := func(n int) []held {
			t.Helper()
			var hs []held
			for range n {
				select {
				case hd := <-h.held:
					hs = append(hs, hd)
				case <-time.After(5 * time.Second):
					t.Fatalf("%d requests held, want %d", len(hs), n)
				}
			}
			return hs
		}
		quiet := func(what string) {
			t.Helper()
			select {
			case hd := <-h.held:
				t.Fatalf("%s: request %d served over the budget", what, hd.seq)
			case <-time.After(50 * time.Millisecond):
			}
		}

		a := dial(t, s)
		for range 4 {
			a.send(holdReq(400)) // 400, 800, 1200: the fourth waits
		}
		fromA := held(3)
		quiet("a's fourth")
		if got := s.Stats().QueuedRequestBytes; got != 1200 {
			t.Fatalf("%d request bytes queued, want 1200", got)
		}

		b := dial(t, s)
		b.send(holdReq(400)) // nothing of b's in flight: served over the budget
		b.send(holdReq(400)) // b has one: waits
		fromB := held(1)
		quiet("b's second")

		// Answering a's requests brings the budget down to b's 400: a's
		// fourth and b's second are both served, b woken by a's answers.
		for _, hd := range fromA {
			hd.c.NoReply(hd.seq)
		}
		rest := held(2)
		for _, hd := range append(fromB, rest...) {
			hd.c.NoReply(hd.seq)
		}
		testkit.WaitFor(t, 5*time.Second, "the budget to empty", func() bool { return s.Stats().QueuedRequestBytes == 0 })

		// A frame larger than the whole budget is served when nothing is
		// queued.
		c := dial(t, s)
		huge := echoReq(strings.Repeat("z", 10*budget))
		c.send(huge)
		if got := c.recv(); !bytes.Equal(got, huge) {
			t.Fatalf("%d bytes back", len(got))
		}
	})
}

// TestMute: a muted connection's next requests are not read until the
// mute ends, then are served in order (a throttled Kafka client, KIP-219);
// the request being served when the mute began is answered at once.
func TestMute(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		s := serve(t, via, Config{}, h)
		c := dial(t, s)
		if _, err := c.nc.Write(frame([]byte{cmdHold})); err != nil {
			t.Fatal(err)
		}
		hd := <-h.held
		const mute = 400 * time.Millisecond
		start := time.Now()
		hd.c.Mute(mute)
		r := h.response()
		r.AppendBytes([]byte("first"))
		hd.c.Reply(hd.seq, r)
		if got := c.recv(); string(got) != "first" {
			t.Fatalf("the held request's answer: %q", got)
		}
		var wire []byte
		for i := range 3 {
			wire = append(wire, frame(echoReq(string(rune('a'+i))))...)
		}
		if _, err := c.nc.Write(wire); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			got := c.recv()
			if i == 0 && time.Since(start) < mute {
				t.Fatalf("a request was served %v into a mute of %v", time.Since(start), mute)
			}
			if want := "e" + string(rune('a'+i)); string(got) != want {
				t.Fatalf("answer %d after the mute: %q, want %q", i, got, want)
			}
		}
		if s.Stats().Mutes != 1 {
			t.Fatalf("%d mutes counted", s.Stats().Mutes)
		}
	})
}
