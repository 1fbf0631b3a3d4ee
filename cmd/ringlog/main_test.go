package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ringlog/internal/testkit"
	"ringlog/internal/testkit/testbroker"

	"github.com/twmb/franz-go/pkg/kgo"
)

// syncBuffer collects output written and read at once.
type syncBuffer = testkit.Buffer

type proc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

// start runs the binary with args, on the network path RINGLOG_TEST_NET
// asks for (testbroker.EnvNet) unless args name one.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	args = append(testbroker.NetArgs(t), args...)
	p := &proc{cmd: exec.Command(testkit.Binary(t), args...), out: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	})
	return p
}

// waitFor waits until the output holds want, or the process exits.
func (p *proc) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if out := p.out.String(); strings.Contains(out, want) {
			testbroker.CheckNetLog(t, out)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %q in the broker's output:\n%s", want, p.out.String())
}

func (p *proc) stop(t *testing.T) error {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		// Put back for start's cleanup, which waits for the exit too
		// (5 s per stopped broker when it found nothing).
		p.done <- err
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("broker did not stop after SIGTERM:\n%s", p.out.String())
	}
	return nil
}

func TestBrokerLifecycle(t *testing.T) {
	addr, admin := testkit.FreeAddr(t), testkit.FreeAddr(t)
	dir := t.TempDir()
	p := start(t, "-listen", addr, "-data-dir", dir, "-admin", admin, "-flush", "always")
	p.waitFor(t, "ringlog started")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("life"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 100 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	// The admin listener serves metrics, with the protocol's counters, and
	// pprof.
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`ringlog_requests_total{api="Produce"}`, `ringlog_log_end_offset{partition="0",topic="life"} 100`, "ringlog_fetch_sendfile_bytes_total"} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("metrics lack %q:\n%s", want, body)
		}
	}
	// The tail caches hold the partition's latest appends where the
	// appends are direct writes (the default on io_uring), nothing else.
	m := regexp.MustCompile(`(?m)^ringlog_tail_cache_bytes (\S+)$`).FindStringSubmatch(string(body))
	if m == nil {
		t.Fatalf("metrics lack ringlog_tail_cache_bytes:\n%s", body)
	}
	held, err := strconv.ParseFloat(m[1], 64)
	if direct := strings.Contains(p.out.String(), " writes=direct "); err != nil || direct != (held > 0) {
		t.Fatalf("ringlog_tail_cache_bytes %s with direct writes %v", m[1], direct)
	}
	if resp, err := http.Get("http://" + admin + "/debug/pprof/"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("pprof: %v %v", resp, err)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.out.String())
	}
	if !strings.Contains(p.out.String(), "stopped cleanly") {
		t.Fatalf("no clean stop:\n%s", p.out.String())
	}
	// The restart skips recovery: every log was closed cleanly.
	p = start(t, "-listen", addr, "-data-dir", dir)
	p.waitFor(t, "ringlog started")
	// Every log (the topic's and __consumer_offsets's) opened clean.
	if !strings.Contains(p.out.String(), "logs opened") || !strings.Contains(p.out.String(), " recovered=0") || strings.Contains(p.out.String(), "clean=0 ") {
		t.Fatalf("restart after SIGTERM recovered logs:\n%s", p.out.String())
	}
	p.stop(t)
}

func TestBrokerRefusesBadConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "server.properties")
	os.WriteFile(cfg, []byte("listeners=PLAINTEXT://127.0.0.1:0\nzookeeper.connect=localhost:2181\n"), 0o644)
	p := start(t, "-config", cfg, "-data-dir", t.TempDir())
	select {
	case err := <-p.done:
		p.done <- err // for start's cleanup
		if err == nil || !strings.Contains(p.out.String(), `"zookeeper.connect"`) {
			t.Fatalf("exit %v, output:\n%s", err, p.out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("broker started with an unknown config key")
	}
	p = start(t, "-io", "epoll")
	err := <-p.done
	p.done <- err
	if err == nil || !strings.Contains(p.out.String(), "epoll") {
		t.Fatalf("bad -io accepted: %v %s", err, p.out.String())
	}
}

// TestSecondBrokerOnOneDirectory: a broker started on a data directory
// another one is running on exits at once, saying so, without touching the
// first one's logs (which would have been "recovered" under it).
func TestSecondBrokerOnOneDirectory(t *testing.T) {
	dir := t.TempDir()
	first := start(t, "-listen", testkit.FreeAddr(t), "-data-dir", dir)
	first.waitFor(t, "ringlog started")
	second := start(t, "-listen", testkit.FreeAddr(t), "-data-dir", dir)
	select {
	case err := <-second.done:
		second.done <- err
		if err == nil || !strings.Contains(second.out.String(), "in use by another process") {
			t.Fatalf("second broker: exit %v, output:\n%s", err, second.out.String())
		}
		if strings.Contains(second.out.String(), "logs opened") {
			t.Fatalf("second broker opened the logs:\n%s", second.out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("second broker on the same directory still running:\n%s", second.out.String())
	}
	if err := first.stop(t); err != nil || !strings.Contains(first.out.String(), "stopped cleanly") {
		t.Fatalf("first broker: exit %v, output:\n%s", err, first.out.String())
	}
}
