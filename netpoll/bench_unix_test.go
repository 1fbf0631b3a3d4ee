//go:build unix

package netpoll

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"
)

// Counting a server's system calls per request needs the server in a
// process of its own, apart from the benchmark's client:
//
//	NETPOLL_BENCH_SERVE=uring ./netpoll.test -test.run '^TestBenchServer$' &   # prints "addr HOST:PORT"
//	perf stat -e raw_syscalls:sys_enter -p <its pid> &
//	NETPOLL_BENCH_ADDR=HOST:PORT ./netpoll.test -test.run '^$' -test.bench 'Echo/uring/depth=1$' -test.benchtime 20000x
//
// The server echoes every frame (echoAll) on one loop until its stdin
// closes. BenchmarkEcho dials NETPOLL_BENCH_ADDR instead of starting a
// server of its own when it is set.
const (
	benchServeEnv = "NETPOLL_BENCH_SERVE"
	benchAddrEnv  = "NETPOLL_BENCH_ADDR"
)

func TestBenchServer(t *testing.T) {
	via := os.Getenv(benchServeEnv)
	if via == "" {
		t.Skip(benchServeEnv + " not set: run by hand to count a server's system calls")
	}
	s, err := Listen(Config{Addr: "127.0.0.1:0", IO: via, Loops: 1, Logger: testLogger}, echoAll{})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("addr %s io %s pid %d\n", s.Addr(), s.IO(), os.Getpid())
	_, _ = io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.Close(ctx)
}
