package javaclient

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit"
)

// serverProperties is the broker's configuration, as an operator of a
// development broker writes it (Kafka's config/server.properties sets the
// same initial delay): groups form at once, and KIP-848 members hear of
// a new assignment within a second instead of Kafka's five.
const serverProperties = `group.initial.rebalance.delay.ms=0
group.consumer.heartbeat.interval.ms=1000
`

// broker is a ringlog binary running on a port and data directory of its
// own, stopped when the test ends.
type broker struct {
	addr   string
	nodeID string // node.id, from the broker's start-up line
	out    *syncBuffer
	cmd    *exec.Cmd
	done   chan error
}

// syncBuffer collects output written and read at once.
type syncBuffer = testkit.Buffer

// startBroker runs cmd/ringlog with serverProperties and waits until it
// says it serves. The port is chosen free and then handed over, so
// another process may take it in between: such a start is tried again on
// another port.
func startBroker(t *testing.T) *broker {
	t.Helper()
	return startBrokerWith(t, "")
}

// startBrokerWith is startBroker with more server.properties lines.
func startBrokerWith(t *testing.T, extra string) *broker {
	t.Helper()
	bin := testkit.Binary(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(config, []byte(serverProperties+extra), 0o644); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		b := &broker{addr: testkit.FreeAddr(t), out: &syncBuffer{}, done: make(chan error, 1)}
		b.cmd = exec.Command(bin, "-config", config, "-listen", b.addr, "-data-dir", filepath.Join(dir, "data"))
		if b.start(t) {
			return b
		}
		if attempt == 3 {
			t.Fatalf("three starts found their port taken:\n%s", b.out)
		}
		t.Logf("port %s was taken before the broker bound it; starting again on another", b.addr)
	}
}

// start starts b.cmd and waits for its start-up line; false when its
// port was taken.
func (b *broker) start(t *testing.T) bool {
	t.Helper()
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	b.cmd.SysProcAttr = sysProcAttr()
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.done <- b.cmd.Wait() }()
	started := `msg="ringlog started" listen=` + b.addr + " "
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(b.out.String(), started) {
		select {
		case err := <-b.done:
			if strings.Contains(b.out.String(), "address already in use") {
				return false
			}
			t.Fatalf("ringlog exited (%v) before serving:\n%s", err, b.out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = b.cmd.Process.Kill()
			t.Fatalf("ringlog not serving after 20 s:\n%s", b.out)
		}
	}
	out := b.out.String()
	line := out[strings.Index(out, started):]
	if i := strings.Index(line, " node_id="); i >= 0 {
		b.nodeID, _, _ = strings.Cut(line[i+len(" node_id="):], " ")
	}
	t.Cleanup(func() {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(30 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.done
		}
		if t.Failed() {
			t.Logf("ringlog's log:\n%s", tail(b.out.String(), 6000))
		}
	})
	return true
}

// client is a franz-go client of the broker: the tests read back with a
// second, independent client what the Java client wrote, and the reverse.
func (b *broker) client(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a topic of replication factor 1 with franz-go.
func (b *broker) createTopic(t *testing.T, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(b.client(t)).CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}
}

// results is what a Java program printed: key=value lines, and the other
// lines (events) in order.
type results struct {
	kv     map[string]string
	events [][]string
	stdout string
	stderr string
}

func parseResults(stdout string) results {
	r := results{kv: map[string]string{}, stdout: stdout}
	for _, line := range strings.Split(stdout, "\n") {
		if line == "" {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok && !strings.Contains(k, " ") {
			r.kv[k] = v
			continue
		}
		r.events = append(r.events, strings.Fields(line))
	}
	return r
}

// get returns the value of key, failing the test (not stopping it) when
// the program printed none, with the errors of the steps that lead to it.
func (r results) get(t *testing.T, key string) (string, bool) {
	t.Helper()
	v, ok := r.kv[key]
	if !ok {
		t.Errorf("%s: not printed; %s", key, r.errorsFor(key))
	}
	return v, ok
}

// want checks that key printed exactly value.
func (r results) want(t *testing.T, key, value string) {
	t.Helper()
	if v, ok := r.get(t, key); ok && v != value {
		t.Errorf("%s = %q, want %q", key, v, value)
	}
}

// wantPrefix checks that key printed a value starting with prefix (an
// exception's class name, say).
func (r results) wantPrefix(t *testing.T, key, prefix string) {
	t.Helper()
	if v, ok := r.get(t, key); ok && !strings.HasPrefix(v, prefix) {
		t.Errorf("%s = %q, want %q...", key, v, prefix)
	}
}

// noErrors fails the test for every step of the program that failed,
// other than the ones expected.
func (r results) noErrors(t *testing.T, expected ...string) {
	t.Helper()
	for _, k := range r.sortedKeys() {
		if strings.HasSuffix(k, ".error") && !slices.Contains(expected, strings.TrimSuffix(k, ".error")) {
			t.Errorf("step %s failed: %s", strings.TrimSuffix(k, ".error"), r.kv[k])
		}
	}
}

// errorsFor names the failed steps whose names lead to key.
func (r results) errorsFor(key string) string {
	var errs []string
	for _, k := range r.sortedKeys() {
		if step, ok := strings.CutSuffix(k, ".error"); ok && strings.HasPrefix(key, step) {
			errs = append(errs, k+"="+r.kv[k])
		}
	}
	if len(errs) == 0 {
		return "no step before it failed"
	}
	return strings.Join(errs, "; ")
}

func (r results) sortedKeys() []string {
	keys := make([]string, 0, len(r.kv))
	for k := range r.kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
