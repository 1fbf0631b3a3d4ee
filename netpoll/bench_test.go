package netpoll

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// benchIOs are the configurations compared by the benchmarks.
var benchIOs = []struct {
	name string
	cfg  Config
	skip bool
}{
	{"gnet", Config{IO: IOGnet}, !gnetSupported},
	{"gnet-copy-remainder", Config{IO: IOGnet, copyRemainder: true}, !gnetSupported},
	{"uring", Config{IO: IOUring}, probeUring() != ""},
	{"portable", Config{IO: IOPortable}, false},
}

// BenchmarkEcho measures round trips of 100-byte frames, one at a time
// (latency-bound) and 64 pipelined.
func BenchmarkEcho(b *testing.B) {
	for _, io := range benchIOs {
		if io.skip || io.cfg.copyRemainder {
			continue
		}
		for _, depth := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/depth=%d", io.name, depth), func(b *testing.B) {
				c := benchDial(b, io.cfg)
				req := frame(echoReq(string(bytes.Repeat([]byte{'x'}, 99))))
				batch := bytes.Repeat(req, depth)
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < b.N; i += depth {
					if _, err := c.nc.Write(batch); err != nil {
						b.Fatal(err)
					}
					for range depth {
						if _, err := c.tryRecv(5 * time.Second); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rt/s")
			})
		}
	}
}

// BenchmarkFileRegion measures file-region throughput to a client reading
// as fast as it can: each op is one response carrying a region of 1 MiB or
// 16 MiB. It reports MB/s, the share sent by sendfile, and, on Linux, the
// CPU time the server spent per GB (process CPU minus the client thread's).
func BenchmarkFileRegion(b *testing.B) {
	for _, io := range benchIOs {
		if io.skip {
			continue
		}
		for _, size := range []int64{1 << 20, 16 << 20} {
			b.Run(fmt.Sprintf("%s/region=%dMiB", io.name, size>>20), func(b *testing.B) {
				f, _ := testFile(b, 64<<20)
				h := newTestHandler(b, f)
				s := benchServer(b, io.cfg, h)
				c := dial(b, s)
				b.SetBytes(size)
				buf := make([]byte, 256<<10)
				done := make(chan struct{})
				go func() {
					defer close(done)
					var req []byte
					for i := range b.N {
						req = append(req[:0], frame(fileReq(cmdFile, int64(i%4)*size%(64<<20-size), size))...)
						if _, err := c.nc.Write(req); err != nil {
							return
						}
					}
				}()
				cpu := startCPU()
				b.ResetTimer()
				for range b.N {
					var hdr [5]byte
					if _, err := readFull(c, hdr[:]); err != nil {
						b.Fatal(err)
					}
					if n := binary.BigEndian.Uint32(hdr[:]); int64(n) != size+1 {
						b.Fatalf("response of %d bytes", n)
					}
					for got := int64(0); got < size; {
						n, err := c.br.Read(buf[:min(int64(len(buf)), size-got)])
						if err != nil {
							b.Fatal(err)
						}
						got += int64(n)
					}
				}
				b.StopTimer()
				serverCPU := cpu.stop()
				<-done
				st := s.Stats()
				if total := st.SendfileBytes + st.CopiedBytes; total > 0 {
					b.ReportMetric(100*float64(st.SendfileBytes)/float64(total), "%sendfile")
				}
				if serverCPU > 0 {
					b.ReportMetric(serverCPU.Seconds()/(float64(b.N*int(size))/1e9), "cpu-s/GB")
				}
			})
		}
	}
}

// benchDial connects to a server for cfg, or to the one named by
// NETPOLL_BENCH_ADDR (see bench_unix_test.go).
func benchDial(b *testing.B, cfg Config) *client {
	if addr := os.Getenv("NETPOLL_BENCH_ADDR"); addr != "" {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = nc.Close() })
		return &client{t: b, nc: nc.(*net.TCPConn), br: bufio.NewReaderSize(nc, 256<<10)}
	}
	return dial(b, benchServer(b, cfg, newTestHandler(b, nil)))
}

func readFull(c *client, b []byte) (int, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	return io.ReadFull(c.br, b)
}

func benchServer(b *testing.B, cfg Config, h *testHandler) *Server {
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = testLogger
	if cfg.Loops == 0 {
		cfg.Loops = 1
	}
	s, err := Listen(cfg, h)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close(b.Context()) })
	return s
}
