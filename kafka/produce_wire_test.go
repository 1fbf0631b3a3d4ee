package kafka_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"ringlog/kafka"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// wireConn is a bare Kafka connection for tests that need what a client
// library hides: exact request versions, hand-built batches, acks=0
// without a response, garbage bytes. It speaks the real protocol over a
// real socket.
type wireConn struct {
	t    testing.TB
	c    net.Conn
	r    *bufio.Reader
	corr int32
	f    *kmsg.RequestFormatter
}

func dialWire(t testing.TB, addr string) *wireConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &wireConn{t: t, c: c, r: bufio.NewReader(c), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("wire-test"))}
}

// send writes req framed with a request header and returns its
// correlation id.
func (w *wireConn) send(req kmsg.Request) int32 {
	w.t.Helper()
	w.corr++
	w.write(w.f.AppendRequest(nil, req, w.corr))
	return w.corr
}

// write sends raw bytes (a frame or a piece of one).
func (w *wireConn) write(b []byte) {
	w.t.Helper()
	w.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := w.c.Write(b); err != nil {
		w.t.Fatalf("write: %v", err)
	}
}

// readFrame reads one response frame, failing the test after 10 s.
func (w *wireConn) readFrame() ([]byte, error) {
	w.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(w.r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 64<<20 {
		w.t.Fatalf("response frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(w.r, b)
	return b, err
}

// recv reads the response to the request with correlation id corr into
// resp (whose version must be set).
func (w *wireConn) recv(corr int32, resp kmsg.Response) {
	w.t.Helper()
	b, err := w.readFrame()
	if err != nil {
		w.t.Fatalf("read %s response: %v", kmsg.NameForKey(resp.Key()), err)
	}
	if len(b) < 4 || int32(binary.BigEndian.Uint32(b)) != corr {
		w.t.Fatalf("response to correlation id %d expected, got %x", corr, b[:min(len(b), 8)])
	}
	b = b[4:]
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		b, err = kafka.SkipTags(b)
		if err != nil {
			w.t.Fatal(err)
		}
	}
	if err := resp.ReadFrom(b); err != nil {
		w.t.Fatalf("decode %s v%d response: %v", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
}

// roundTrip sends req and returns its decoded response.
func (w *wireConn) roundTrip(req kmsg.Request) kmsg.Response {
	w.t.Helper()
	corr := w.send(req)
	resp := req.ResponseKind()
	w.recv(corr, resp)
	return resp
}

// expectClosed waits for the broker to close the connection, reading and
// discarding anything it still sends.
func (w *wireConn) expectClosed() {
	w.t.Helper()
	w.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, w.r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		w.t.Fatal("the broker kept the connection open")
	}
}

// expectNothing checks that no response arrives within d (acks=0). It is
// a check of absence, not of speed: d only bounds how long to look.
func (w *wireConn) expectNothing(d time.Duration) {
	w.t.Helper()
	w.c.SetReadDeadline(time.Now().Add(d))
	b, err := w.r.Peek(1)
	if err == nil {
		w.t.Fatalf("unexpected response bytes %x", b)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		w.t.Fatalf("connection: %v", err)
	}
}
