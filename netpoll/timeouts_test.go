package netpoll

import (
	"strings"
	"testing"
	"time"

	"ringlog/internal/testkit"
)

// A connection with nothing in flight and no traffic for IdleTimeout is
// closed; one whose request is in flight (a long poll) is not, however
// long the handler takes, and is closed once it has gone idle after its
// answer.
func TestIdleTimeout(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		const idle = 200 * time.Millisecond
		s := serve(t, via, Config{IdleTimeout: idle}, h)

		quiet := dial(t, s)
		quiet.send(echoReq("once"))
		quiet.recv()
		polling := dial(t, s)
		polling.send([]byte{cmdHold})
		hd := <-h.held

		quiet.expectClosed(5 * time.Second)
		testkit.WaitFor(t, 5*time.Second, "the idle close counted", func() bool { return s.Stats().IdleClosed >= 1 })
		if st := s.Stats(); st.IdleClosed != 1 || st.InFlight != 1 {
			t.Fatalf("the long poll was closed as idle: %+v", st)
		}

		// The long poll has outlived the timeout several times over by
		// now; it is answered, and only then goes idle.
		time.Sleep(3 * idle)
		r := h.response()
		r.AppendBytes([]byte("late answer"))
		hd.c.Reply(hd.seq, r)
		if got := string(polling.recv()); got != "late answer" {
			t.Fatalf("got %q", got)
		}
		polling.expectClosed(5 * time.Second)
		// The client sees the close before the server has finished it.
		testkit.WaitFor(t, 5*time.Second, "both connections gone", func() bool { return s.Stats().Conns == 0 })
		if st := s.Stats(); st.IdleClosed != 2 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// A client that stops reading while its responses wait to be written is
// closed after WriteTimeout: every response is released (OnDone, checked
// by serve's cleanup; file regions pin their file) and the queue empties.
// A client that reads its responses meanwhile is served. The responses
// wait in netpoll's queue (file regions, or byte responses) or, on gnet,
// all in gnet's outbound buffer, which netpoll counts as written: with
// copyRemainder, what sendfile could not send of a region is copied there
// whole.
func TestWriteTimeout(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		for _, tc := range []struct {
			name          string
			req           []byte
			n             int
			copyRemainder bool
		}{
			{"regions", fileReq(cmdFile, 0, 4<<20), 6, false},
			{"bytes", echoReq(strings.Repeat("b", 2<<20)), 6, false},
			{"in gnet's buffer", fileReq(cmdFile, 0, 12<<20), 1, true},
		} {
			if via != IOGnet && tc.copyRemainder {
				continue // a gnet scheme
			}
			t.Log(tc.name)
			f, _ := testFile(t, 12<<20)
			h := newTestHandler(t, f)
			s := serve(t, via, Config{WriteTimeout: 300 * time.Millisecond, IdleTimeout: -1, copyRemainder: tc.copyRemainder}, h)

			reader := dial(t, s)
			stuck := dial(t, s)
			if err := stuck.nc.SetReadBuffer(16 << 10); err != nil {
				t.Fatal(err)
			}
			// 12 MiB of responses, three times what the socket buffers
			// hold (tcp_wmem's 4 MiB at most), while the echoes' requests
			// stay under what a paused gnet connection may send
			// (pausedInboundMax), which would close it for another reason.
			var wire []byte
			for range tc.n {
				wire = append(wire, frame(tc.req)...)
			}
			go func() { _, _ = stuck.nc.Write(wire) }()
			testkit.WaitFor(t, 5*time.Second, "the requests served", func() bool { return h.served.Load() >= 1 })

			// Meanwhile a client that reads is served.
			for range 3 {
				reader.send(fileReq(cmdFile, 0, 1<<20))
				reader.recv()
			}

			testkit.WaitFor(t, 10*time.Second, "the stuck client to be closed", func() bool { return s.Stats().WriteTimeouts == 1 })
			testkit.WaitFor(t, 5*time.Second, "its responses released", func() bool {
				st := s.Stats()
				return st.Conns == 1 && st.QueuedBytes == 0 && h.done.Load() == h.made.Load()
			})
			reader.send(echoReq("still served"))
			if got := string(reader.recv()); got != "estill served" {
				t.Fatalf("got %q", got)
			}
		}
	})
}
