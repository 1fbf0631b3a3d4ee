package testkit

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary returns the path of the broker binary (cmd/ringlog), built once
// per test binary into a temporary directory. A build that fails fails
// the test: nothing that needs the binary is skipped.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ringlog-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "ringlog")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
		out, err := exec.CommandContext(ctx, goBin, "build", "-o", binPath, "ringlog/cmd/ringlog").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ringlog/cmd/ringlog: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// FreeAddr returns 127.0.0.1:port with a port free now. Another process
// may take it before the caller binds it: a start that fails with
// "address already in use" should pick again.
//
// The port is below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), where the local ends of outgoing
// connections and listeners on port 0 are allocated: a test that stops a
// process and starts it again on its port (a cluster's controllers keep
// their voter addresses) found it taken by some connection's local end
// meanwhile ("bind: address already in use" in a suite run). Without
// such a range (another system) the kernel picks, as on port 0.
func FreeAddr(t testing.TB) string {
	t.Helper()
	// The kernel may hand a port just closed out again at once: a test
	// that asked for two (a cluster's voters) once got one port twice.
	// No port is handed out twice in one test process.
	low := ephemeralLow()
	for range 100 {
		port := 0
		if low > minTestPort+1000 {
			port = minTestPort + rand.IntN(low-minTestPort)
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			if port != 0 {
				continue // in use: another
			}
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, dup := handedOut.LoadOrStore(addr, true); !dup {
			return addr
		}
	}
	t.Fatal("testkit: no port not handed out before in 100 tries")
	return ""
}

// minTestPort is the lowest port FreeAddr hands out: above the ports
// services commonly register.
const minTestPort = 20000

// ephemeralLow is the first port of the kernel's ephemeral range, 0 when
// it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		return 0
	}
	return lo
}

// handedOut holds the addresses FreeAddr returned in this process.
var handedOut sync.Map

// WaitFor polls cond until it holds, failing the test with what after d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Buffer is a bytes.Buffer that goroutines may write and read at once: a
// process's output collected while the test reads it, a logger written
// from event loops.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// LogBytes sums the bytes of the batches in the .log files of a partition
// directory (0 when it does not exist): each file's batches walked by
// their length fields up to the first that is zero or runs past the file.
// Not the files' sizes: with direct writes (-writes direct) an active
// segment's file runs ahead of its batches, blocks reserved as zeros.
func LogBytes(t testing.TB, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if os.IsNotExist(err) {
			continue // a segment deleted meanwhile
		}
		if err != nil {
			t.Fatal(err)
		}
		for pos := 0; pos+12 <= len(b); {
			size := 12 + int(int32(binary.BigEndian.Uint32(b[pos+8:])))
			if size <= 12 || pos+size > len(b) {
				break
			}
			pos += size
			n += int64(size)
		}
	}
	return n
}

// DescribeQuorumRequest is a DescribeQuorum request for the metadata
// quorum's one partition, __cluster_metadata-0.
func DescribeQuorumRequest() *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	return req
}
