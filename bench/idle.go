package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Issue 13's 10,000-connection workload: 100 producers beside idle
// connections, 10,000 in all, against the same 100 producers alone. An
// idle connection is what a broker meets most: a client that connected,
// asked what the broker speaks, and has nothing to say for now. Each one
// here is a TCP connection that sent an ApiVersions request (v0), read
// its answer, and stays open without a byte more: the broker accepted it,
// admitted it against max.connections, armed its reads (a receive on the
// ring, an epoll registration, a goroutine) and served a request on it.
// That is all a kgo client holding metadata only would cost it too, at a
// fraction of the suite's own memory and CPU (no client goroutines).

// connsProducers are the producing connections of the workload.
const connsProducers = 100

// connsTotal is the connections of the 10,000-connection run: the idle
// ones make up the rest. kgo opens a second connection per producer for
// its metadata requests, which count among the idle ones' 10,000 loosely
// (see the table's note).
const connsTotal = 10_000

// connsMax is max.connections of the single ringlog brokers of the suite:
// above the workload's connections with the producers' metadata
// connections and the driver's (netpoll's default is 10,000).
const connsMax = 12_000

// connsWorkload is true for the two workloads of the 10,000-connection
// target: the 100 producers alone and beside the idle connections.
func connsWorkload(w workload) bool { return w.netPaths && w.producers == connsProducers }

// connsLike finds the workload of the target with idle idle connections.
func connsLike(idle int) func(w workload) bool {
	return func(w workload) bool { return connsWorkload(w) && w.idle == idle }
}

// connsBuffered is each producer's kgo buffer in the connection
// workloads: 32 MiB for each of 100 producers would hold 3.2 GB in the
// suite's process, which would measure its own garbage collector.
const connsBuffered = 2 << 20

// idleConns are the idle connections of a run.
type idleConns struct {
	conns []net.Conn
}

// apiVersionsV0 is an ApiVersions v0 request frame with correlation id
// corr: size, api key 18, version 0, correlation id, client id.
func apiVersionsV0(corr int32) []byte {
	const client = "ringlog-bench-idle"
	b := make([]byte, 4, 4+2+2+4+2+len(client))
	b = binary.BigEndian.AppendUint16(b, 18)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(client)))
	b = append(b, client...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// readApiVersionsV0 reads the answer to apiVersionsV0(corr) and checks
// its correlation id and error code.
func readApiVersionsV0(r io.Reader, corr int32) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 6 || n > 1<<20 {
		return fmt.Errorf("ApiVersions answer of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		return fmt.Errorf("ApiVersions answer has correlation id %d, want %d", got, corr)
	}
	if code := int16(binary.BigEndian.Uint16(body[4:])); code != 0 {
		return fmt.Errorf("ApiVersions answered error code %d", code)
	}
	return nil
}

// openIdle opens n idle connections to addr, 32 at a time. The process's
// open file limit is raised first where it is below what they need.
func openIdle(ctx context.Context, addr string, n int) (*idleConns, error) {
	if err := raiseNoFile(uint64(n) + 4096); err != nil {
		return nil, err
	}
	ic := &idleConns{conns: make([]net.Conn, n)}
	var mu sync.Mutex
	var first error
	next := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			d := net.Dialer{Timeout: 10 * time.Second}
			for i := range next {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err == nil {
					c.SetDeadline(time.Now().Add(10 * time.Second))
					if _, err = c.Write(apiVersionsV0(int32(i))); err == nil {
						err = readApiVersionsV0(c, int32(i))
					}
					c.SetDeadline(time.Time{})
					if err != nil {
						c.Close()
					}
				}
				mu.Lock()
				if err != nil && first == nil {
					first = fmt.Errorf("idle connection %d of %d: %w", i+1, n, err)
				}
				if err == nil {
					ic.conns[i] = c
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	if first != nil {
		ic.close()
		return nil, first
	}
	return ic, nil
}

// closedByPeer counts the connections the broker closed (or reset): a
// run whose broker dropped idle connections did not measure them.
func (ic *idleConns) closedByPeer() (int, error) {
	closed := 0
	for _, c := range ic.conns {
		ok, err := peerOpen(c)
		if err != nil {
			return 0, err
		}
		if !ok {
			closed++
		}
	}
	return closed, nil
}

func (ic *idleConns) close() {
	for _, c := range ic.conns {
		if c != nil {
			c.Close()
		}
	}
}

var errNoPeek = errors.New("bench: telling a closed connection from an idle one needs Linux")
