//go:build linux || freebsd || darwin

package netpoll

import (
	"context"
	"errors"
	"testing"
	"time"
)

// If gnet's engine stops without Close (here stopped behind the server's
// back, as a poller failure would), Done closes with ErrEngineStopped and
// new connections are refused: the broker can exit instead of looking
// alive.
func TestEngineStopsOnItsOwn(t *testing.T) {
	h := newTestHandler(t, nil)
	s := serve(t, IOGnet, Config{}, h)
	c := dial(t, s)
	c.send(echoReq("x"))
	c.recv()
	select {
	case <-s.Done():
		t.Fatal("Done closed on a serving server")
	default:
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.eng.(*gnetEngine).eng.Stop(ctx)
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done still open 5 s after the engine stopped")
	}
	if err := s.Err(); !errors.Is(err, ErrEngineStopped) {
		t.Fatalf("Err: %v", err)
	}
	c.expectClosed(5 * time.Second)
	if nc, err := dialRaw(s); err == nil {
		_ = nc.Close()
		t.Fatal("a stopped server still accepts")
	}
}
