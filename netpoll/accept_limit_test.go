package netpoll

import (
	"bufio"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// scriptedLimiter paces every connection by pace and throttles those
// from refuse, holding them for hold; it records what it was asked.
type scriptedLimiter struct {
	pace   time.Duration
	refuse netip.Addr
	hold   time.Duration

	mu    sync.Mutex
	paced int
	asked []netip.Addr
}

func (l *scriptedLimiter) Pace() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.paced++
	return l.pace
}

func (l *scriptedLimiter) Throttle(ip netip.Addr) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = append(l.asked, ip)
	if ip == l.refuse {
		return l.hold
	}
	return 0
}

// ConnLimiter: a connection the limiter throttles is held, unserved, for
// the throttle time and then closed; the others are served after the
// pace the limiter asks, on every network path; a server closing ends a
// pace and closes the held connections.
func TestConnLimiter(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		h := newTestHandler(t, nil)
		l := &scriptedLimiter{pace: 50 * time.Millisecond, refuse: netip.MustParseAddr("127.0.0.9"), hold: 300 * time.Millisecond}
		s := serve(t, via, Config{ConnLimiter: l}, h)

		start := time.Now()
		c := dial(t, s)
		c.send(echoReq("paced"))
		if got := string(c.recv()); got != "epaced" {
			t.Fatalf("answer %q", got)
		}
		if d := time.Since(start); d < l.pace {
			t.Errorf("served after %v, the limiter asked for a pace of %v", d, l.pace)
		}

		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.9")}, Timeout: time.Second}
		nc, err := d.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nc.Close() })
		held := &client{t: t, nc: nc.(*net.TCPConn), br: bufio.NewReader(nc)}
		held.send(echoReq("held"))
		start = time.Now()
		held.expectClosed(5 * time.Second)
		if d := time.Since(start); d < l.hold/2 {
			t.Errorf("throttled connection closed after %v, want it held about %v", d, l.hold)
		}
		if st := s.Stats(); st.Accepted != 1 {
			t.Errorf("accepted %d, want only the first connection served", st.Accepted)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.paced != 2 || len(l.asked) != 2 || l.asked[0] != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("paced %d, asked about %v", l.paced, l.asked)
		}
	})
}
