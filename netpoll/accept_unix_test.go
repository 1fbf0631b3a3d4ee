//go:build unix

package netpoll

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"ringlog/internal/testkit"
)

// fdChildEnv names the engine a re-executed test binary serves with under a
// lowered descriptor limit (TestAcceptAfterDescriptorExhaustion).
const fdChildEnv = "NETPOLL_FD_CHILD"

// echoAll replies to every frame with the frame, whoever sent it: the
// child process of TestAcceptAfterDescriptorExhaustion serves its parent's
// connections, which testHandler would take for strangers.
type echoAll struct{}

func (echoAll) Serve(c *Conn, seq uint64, frame []byte) {
	r := &Response{}
	r.AppendBytes(frame)
	c.Reply(seq, r)
}

func (echoAll) Closed(*Conn) {}

// Regression: an accept that failed with EMFILE stopped gnet's whole
// engine (gnet's acceptor returns ErrAcceptSocket, which ends its main
// reactor and shuts every loop down), and the process went on running
// with nothing listening. The server runs in a child process whose
// descriptor limit is 256; the parent opens 1000 connections to it, closes
// them, and then must be served again.
func TestAcceptAfterDescriptorExhaustion(t *testing.T) {
	if engine := os.Getenv(fdChildEnv); engine != "" {
		fdChild(t, engine)
		return
	}
	ios(t, func(t *testing.T, via string) {
		name := via
		cmd := exec.Command(os.Args[0], "-test.run=^TestAcceptAfterDescriptorExhaustion$", "-test.v")
		cmd.Env = append(os.Environ(), fdChildEnv+"="+name)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr syncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = stdin.Close()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				t.Logf("child's log:\n%s", stderr.String())
			}
		}()
		lines := bufio.NewScanner(stdout)
		var addr string
		for lines.Scan() {
			if a, ok := strings.CutPrefix(lines.Text(), "addr "); ok {
				addr = a
				break
			}
		}
		if addr == "" {
			t.Fatalf("the child did not start a server:\n%s", stderr.String())
		}
		go func() { _, _ = io.Copy(io.Discard, stdout) }()

		// 1000 connections at once: the child runs out of descriptors
		// after about 250.
		var conns []net.Conn
		for range 1000 {
			nc, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				continue // the backlog is full: an attempt all the same
			}
			conns = append(conns, nc)
		}
		t.Logf("%d of 1000 connections established", len(conns))
		// They stay open until the child has run out of descriptors
		// accepting them.
		testkit.WaitFor(t, 10*time.Second, "the child to run out of descriptors", func() bool {
			return strings.Contains(stderr.String(), "too many open files")
		})
		for _, nc := range conns {
			_ = nc.Close()
		}

		// Descriptors free up as the child sees its connections close;
		// then it must accept and serve again.
		deadline := time.Now().Add(20 * time.Second)
		var last error
		for time.Now().Before(deadline) {
			if last = echoOnce(addr); last == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if last != nil {
			t.Fatalf("not served again 20 s after the connections closed: %v", last)
		}
	})
}

// echoOnce dials addr and round-trips one frame.
func echoOnce(addr string) error {
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := nc.Write(frame([]byte("ping"))); err != nil {
		return err
	}
	got := make([]byte, 8)
	if _, err := io.ReadFull(nc, got); err != nil {
		return err
	}
	if string(got[4:]) != "ping" {
		return fmt.Errorf("echo %q", got)
	}
	return nil
}

// fdChild is the child's side: serve with a descriptor limit of 256 until
// the parent closes stdin.
func fdChild(t *testing.T, via string) {
	lim := syscall.Rlimit{Cur: 256, Max: 256}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("setrlimit: %v", err)
	}
	s, err := Listen(Config{Addr: "127.0.0.1:0", IO: via, Loops: 1, Logger: testLogger}, echoAll{})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("addr %s\n", s.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.Close(ctx)
}
