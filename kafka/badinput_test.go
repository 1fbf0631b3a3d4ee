package kafka_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ringlog/broker"
	"ringlog/kafka"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// badInputMaxRequestBytes is the broker's limit for non-Produce requests in
// TestBadInput, small so that an oversized request is cheap to send.
const badInputMaxRequestBytes = 1 << 20

// TestBadInput sends a live broker what a broken or hostile client would:
// random bytes, truncated frames, impossible frame lengths, array counts
// far beyond the bytes that follow, unknown API keys and versions,
// oversized requests. Each gets an error code or a closed connection. A
// franz-go producer keeps producing the whole time and every record it had
// acknowledged is in the log at the end; the heap stays bounded.
func TestBadInput(t *testing.T) {
	ioPaths(t, brokerOpts{Config: func(c *broker.Config) { c.MaxRequestBytes = badInputMaxRequestBytes }}, func(t *testing.T, b *testBroker) {
		createTopic(t, b, "good", 2, nil)

		heap := startHeapWatch()
		defer heap.stop()

		// The well-behaved neighbour.
		cl := b.client(kgo.DefaultProduceTopic("good"), kgo.ProducerLinger(0))
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var acked atomic.Int64
		stop := make(chan struct{})
		neighbour := make(chan error, 1)
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					neighbour <- nil
					return
				default:
				}
				if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("ok")}).FirstErr(); err != nil {
					neighbour <- err
					return
				}
				acked.Add(1)
			}
		}()

		for _, c := range badInputCases(t) {
			t.Run(c.name, func(t *testing.T) {
				w := dialWire(t, b.Addr)
				c.run(t, w)
			})
		}

		// The neighbour is still served after all of it.
		for after := acked.Load() + 20; acked.Load() < after; {
			select {
			case err := <-neighbour:
				t.Fatalf("the well-behaved client stopped: %v", err)
			case <-ctx.Done():
				t.Fatal("the well-behaved client is no longer served")
			case <-time.After(time.Millisecond):
			}
		}
		close(stop)
		if err := <-neighbour; err != nil {
			t.Fatalf("the well-behaved client failed: %v", err)
		}
		if acked.Load() == 0 {
			t.Fatal("the well-behaved client got nothing through")
		}
		ends, err := b.admin().ListEndOffsets(ctx, "good")
		if err != nil || ends.Error() != nil {
			t.Fatal(err, ends.Error())
		}
		var total int64
		ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
		if total != acked.Load() {
			t.Fatalf("%d records in the log, %d acknowledged", total, acked.Load())
		}
		if grew := heap.stop(); grew > badInputHeapMax {
			t.Fatalf("heap grew by %d MiB during the bad input", grew>>20)
		}
	})
}

// badInputHeapMax bounds the heap's growth during TestBadInput. The largest
// legitimate cost is decoding a request of MaxRequestBytes (a small multiple
// of it) and the frames in flight.
const badInputHeapMax = 192 << 20

type badInputCase struct {
	name string
	run  func(t *testing.T, w *wireConn)
}

// frame prefixes body with its length.
func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func badInputCases(t *testing.T) []badInputCase {
	seeds := kafka.SeedRequests(t)
	closes := func(name string, b []byte) badInputCase {
		return badInputCase{name, func(t *testing.T, w *wireConn) {
			w.write(b)
			w.expectClosed()
		}}
	}
	// answered: a well-formed response comes back and the connection still
	// serves a Metadata request after it.
	answered := func(name string, body []byte, resp kmsg.Response) badInputCase {
		return badInputCase{name, func(t *testing.T, w *wireConn) {
			w.write(frame(body))
			w.recv(1, resp)
			md := kafka.MetadataReq(1)
			w.recv(w.send(md), md.ResponseKind())
		}}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 64<<10)
	for i := range random {
		random[i] = byte(rng.UintN(256))
	}
	// Random bytes whose first four make a plausible frame length.
	random[0], random[1] = 0, 0

	oversized := kafka.FrameOf(kafka.MetadataReq(1, string(bytes.Repeat([]byte("x"), 200))))
	for len(oversized) <= badInputMaxRequestBytes {
		oversized = append(oversized, oversized[14:]...)
	}

	// A Produce body of zeros is thousands of empty topics, each six
	// bytes; its topic count is within what the bytes allow (two per topic,
	// kmsg's own bound) but above what they hold. Decoding would allocate
	// the whole count (8M topic structures, half a GiB) before finding out;
	// checkProduceShape refuses the count first.
	neg := seeds["produce-v7-topics-negative"]
	zeros := binary.BigEndian.AppendUint32(bytes.Clone(neg[:len(neg)-4]), 8<<20)
	zeros = append(zeros, make([]byte, 16<<20)...)

	cases := []badInputCase{
		{"random bytes", func(t *testing.T, w *wireConn) {
			w.write(random)
			w.c.(*net.TCPConn).CloseWrite()
			w.expectClosed()
		}},
		{"truncated frame", func(t *testing.T, w *wireConn) {
			f := frame(kafka.FrameOf(kafka.MetadataReq(12, "a")))
			w.write(f[:len(f)-3])
			w.c.(*net.TCPConn).CloseWrite()
			w.expectClosed()
		}},
		closes("frame length 2^31-1", []byte{0x7f, 0xff, 0xff, 0xff, 0, 3, 0, 1}),
		closes("negative frame length", []byte{0xff, 0xff, 0xff, 0xf0, 0, 3, 0, 1}),
		closes("frame above the frame limit", binary.BigEndian.AppendUint32(nil, 100<<20+1)),
		closes("short header", frame(seeds["short-header"])),
		closes("bad client id", frame(seeds["bad-client-id"])),
		closes("truncated body", frame(seeds["produce-truncated"])),
		closes("unknown API key", frame(seeds["unknown-key"])),
		closes("negative API key", frame(seeds["negative-key"])),
		closes("unknown Metadata version", frame(seeds["metadata-v99"])),
		closes("huge Metadata array count", frame(seeds["metadata-v1-count-max"])),
		closes("huge Produce topic count", frame(seeds["produce-v7-topics-huge"])),
		closes("huge Produce partition count", frame(seeds["produce-v7-partitions-max"])),
		closes("huge compact Produce topic count", frame(seeds["produce-v9-topics-varint-max"])),
		closes("Produce topic count backed by zeros", frame(zeros)),
		closes("request above MaxRequestBytes", frame(oversized)),
		// kmsg reads a negative count as an empty array (Kafka reads it as
		// null): a valid request, answered.
		answered("negative Metadata array count", seeds["metadata-v1-count-negative"], &kmsg.MetadataResponse{Version: 1}),
		answered("negative Produce topic count", seeds["produce-v7-topics-negative"], &kmsg.ProduceResponse{Version: 7}),
		answered("many empty Produce topics", seeds["produce-v7-many-empty-topics"], &kmsg.ProduceResponse{Version: 7}),
		{"unknown ApiVersions version", func(t *testing.T, w *wireConn) {
			w.write(frame(seeds["apiversions-v99"]))
			resp := &kmsg.ApiVersionsResponse{Version: 0}
			w.recv(1, resp)
			if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
				t.Fatalf("ApiVersions v99: code %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
			}
		}},
	}
	return cases
}

// heapWatch samples the heap in use while bad input is sent, to catch an
// allocation sized by a count off the wire (it would be released soon
// after, so a before/after comparison would miss it).
type heapWatch struct {
	base, peak uint64
	done       chan struct{}
	wg         sync.WaitGroup
	once       sync.Once
	grew       uint64
}

func startHeapWatch() *heapWatch {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h := &heapWatch{base: ms.HeapInuse, peak: ms.HeapInuse, done: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-h.done:
				return
			case <-tick.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				h.peak = max(h.peak, ms.HeapInuse)
			}
		}
	}()
	return h
}

// stop ends the watch and returns how much the heap grew at its peak.
func (h *heapWatch) stop() uint64 {
	h.once.Do(func() {
		close(h.done)
		h.wg.Wait()
		h.grew = h.peak - h.base
	})
	return h.grew
}
