package netpoll

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serverSocketTimer reads the timer of the server's end of c from
// /proc/net/tcp: its kind (0 none, 1 retransmit, 2 keepalive, ...) and
// how far off it is.
func serverSocketTimer(t *testing.T, s *Server, c *client) (kind int, due time.Duration) {
	t.Helper()
	server := s.Addr().(*net.TCPAddr).Port
	peer := c.nc.LocalAddr().(*net.TCPAddr).Port
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when ...
		fields := strings.Fields(lines.Text())
		if len(fields) < 6 || fields[1] != fmt.Sprintf("0100007F:%04X", server) || fields[2] != fmt.Sprintf("0100007F:%04X", peer) {
			continue
		}
		tr, when, _ := strings.Cut(fields[5], ":")
		k, err1 := strconv.ParseInt(tr, 16, 32)
		ticks, err2 := strconv.ParseInt(when, 16, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("unreadable timer %q", fields[5])
		}
		return int(k), time.Duration(ticks) * 10 * time.Millisecond // USER_HZ = 100
	}
	t.Fatalf("no server socket 127.0.0.1:%d <- %d in /proc/net/tcp", server, peer)
	return 0, 0
}

// Accepted sockets carry TCP keepalive with Config.KeepAlive's idle time
// (the kernel's keepalive timer is armed on the server's end), and none
// when it is negative.
func TestKeepAlive(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		for _, tc := range []struct {
			keepAlive time.Duration
			want      int
		}{{7 * time.Second, 2}, {0, 2}, {-1, 0}} {
			h := newTestHandler(t, nil)
			s := serve(t, via, Config{KeepAlive: tc.keepAlive}, h)
			c := dial(t, s)
			c.send(echoReq("x"))
			c.recv()
			kind, due := serverSocketTimer(t, s, c)
			idle := tc.keepAlive
			if idle == 0 {
				idle = DefaultKeepAlive
			}
			if kind != tc.want || (kind == 2 && (due <= 0 || due > idle)) {
				t.Fatalf("KeepAlive %v: timer kind %d due in %v, want kind %d within %v", tc.keepAlive, kind, due, tc.want, idle)
			}
		}
	})
}
