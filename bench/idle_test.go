package bench

import (
	"context"
	"testing"
	"time"

	"ringlog/internal/testkit"
)

// Idle connections are real connections of the broker: each had its
// ApiVersions answered, they stay open while it runs, and the check that
// fails a run sees them closed once the broker is gone.
func TestIdleConns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	bin := testkit.Binary(t)
	spec, _ := peerSpecByKey(netUringPeer)
	p := &peer{spec: spec}
	if err := p.start(bin, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 300
	ic, err := openIdle(ctx, p.addr, n)
	if err != nil {
		t.Fatal(err)
	}
	defer ic.close()
	time.Sleep(200 * time.Millisecond)
	if closed, err := ic.closedByPeer(); err != nil || closed != 0 {
		t.Fatalf("%d of %d idle connections closed while the broker runs (%v)", closed, n, err)
	}
	m, err := scrapeMetrics(ctx, p.admins[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := m[requestsMetric+"{}"]; got < n {
		t.Errorf("the broker counts %v requests, want at least the %d ApiVersions", got, n)
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		closed, err := ic.closedByPeer()
		if err != nil {
			t.Fatal(err)
		}
		if closed == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d idle connections seen closed after the broker stopped", closed, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
