package fetcher_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/internal/kwire"
	"ringlog/internal/testkit/testbroker"
)

// wireSpy sees every Fetch request a stream writes, as the bytes on the
// socket: Config.Dial is its dial, which wraps the real connection.
type wireSpy struct {
	mu      sync.Mutex
	fetches []sentFetch
}

// sentFetch is one Fetch request as written: its frame's size (length
// prefix included) and its decoded body.
type sentFetch struct {
	bytes int
	req   *kmsg.FetchRequest
}

func (w *wireSpy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &spyConn{Conn: c, w: w}, nil
}

// since returns the Fetch requests written after the first n.
func (w *wireSpy) since(n int) []sentFetch {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]sentFetch(nil), w.fetches[min(n, len(w.fetches)):]...)
}

func (w *wireSpy) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.fetches)
}

type spyConn struct {
	net.Conn
	w   *wireSpy
	buf []byte // bytes written and not yet a whole frame
}

// Write passes p on and cuts the frames it completes (the stream's loop is
// the only writer, so frames are never interleaved).
func (c *spyConn) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	for len(c.buf) >= 4 {
		n := int(binary.BigEndian.Uint32(c.buf)) + 4
		if len(c.buf) < n {
			break
		}
		c.note(c.buf[4:n])
		c.buf = c.buf[n:]
	}
	return c.Conn.Write(p)
}

// note decodes a request frame (header v1, or v2 with tags for flexible
// versions) and keeps it if it is a Fetch.
func (c *spyConn) note(frame []byte) {
	r := kwire.NewReader(frame, false)
	key, version := r.Int16(), r.Int16()
	if r.Bad() || key != kmsg.Fetch.Int16() {
		return
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	r.Int32() // correlation id
	if n := r.Int16(); n > 0 {
		r.Span(int(n)) // client id
	}
	if req.IsFlexible() {
		r.Tags()
	}
	if r.Bad() {
		panic("spy: bad Fetch request header")
	}
	if err := req.ReadFrom(r.Rest()); err != nil {
		panic(fmt.Sprintf("spy: Fetch v%d request: %v", version, err))
	}
	c.w.mu.Lock()
	c.w.fetches = append(c.w.fetches, sentFetch{bytes: len(frame) + 4, req: req})
	c.w.mu.Unlock()
}

// named lists the partitions a Fetch request names.
func named(req *kmsg.FetchRequest) []int32 {
	var out []int32
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.Partition)
		}
	}
	return out
}

// forgotten lists the partitions a Fetch request forgets.
func forgotten(req *kmsg.FetchRequest) []int32 {
	var out []int32
	for _, t := range req.ForgottenTopics {
		out = append(out, t.Partitions...)
	}
	return out
}

// startBrokerWith starts ringlog's broker with changes to the test
// configuration.
func startBrokerWith(t testing.TB, change func(*broker.Config)) *testBroker {
	t.Helper()
	cfg := testbroker.Config(t.TempDir())
	change(&cfg)
	return &testBroker{Broker: testbroker.StartBroker(t, cfg), t: t}
}

// startPair starts two brokers in this process, voters of one metadata
// quorum, replicas of each other: each one's replication/node follows the
// other's partitions with this package's streams. change adjusts both
// configurations.
func startPair(t testing.TB, change func(*broker.Config)) [2]*broker.Broker {
	t.Helper()
	var ports [2]string
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = ln.Addr().String()
		ln.Close()
	}
	var out [2]*broker.Broker
	var errs [2]error
	var wg sync.WaitGroup
	for i := range out {
		cfg := testbroker.Config(t.TempDir())
		cfg.NodeID = int32(i + 1)
		cfg.Cluster.Voters = fmt.Sprintf("1@%s,2@%s", ports[0], ports[1])
		cfg.Cluster.ReplicationFactor = 2
		change(&cfg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out[i], errs[i] = broker.Start(ctx, cfg)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, b := range out {
			if b != nil {
				_ = b.Close(ctx)
			}
		}
	})
	for _, err := range errs {
		if err != nil {
			t.Fatalf("start the pair: %v", err)
		}
	}
	return out
}
