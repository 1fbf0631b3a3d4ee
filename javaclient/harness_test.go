package javaclient

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/kafkaref"
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
	addr string
	out  *syncBuffer
	cmd  *exec.Cmd
	done chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startBroker runs cmd/ringlog with serverProperties and waits until it
// says it serves. The port is chosen free and then handed over, so
// another process may take it in between: such a start is tried again on
// another port.
func startBroker(t *testing.T) *broker {
	t.Helper()
	bin := testkit.Binary(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(config, []byte(serverProperties), 0o644); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		b := &broker{addr: testkit.FreeAddr(t), out: &syncBuffer{}, done: make(chan error, 1)}
		b.cmd = exec.Command(bin, "-config", config, "-listen", b.addr, "-data-dir", filepath.Join(dir, "data"))
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
				if strings.Contains(b.out.String(), "address already in use") && attempt < 3 {
					t.Logf("port %s was taken before the broker bound it; starting again on another", b.addr)
					goto again
				}
				t.Fatalf("ringlog exited (%v) before serving:\n%s", err, b.out)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				b.cmd.Process.Kill()
				t.Fatalf("ringlog not serving after 20 s:\n%s", b.out)
			}
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
		return b
	again:
	}
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

var (
	compileOnce sync.Once
	classpath   string
	compileErr  error
)

// javaClasspath compiles the programs under java/ once per test binary
// and returns the classpath that runs them: their classes, then Kafka's
// jars. Kafka's jars come from kafkaref (Maven, once per machine).
func javaClasspath(t *testing.T) string {
	t.Helper()
	compileOnce.Do(func() {
		if compileErr = kafkaref.Available(); compileErr != nil {
			return
		}
		if _, err := exec.LookPath("javac"); err != nil {
			compileErr = fmt.Errorf("javac not found on PATH (the Java programs are compiled at test time; install a JDK 17): %w", err)
			return
		}
		var jars string
		if jars, compileErr = kafkaref.Jars(); compileErr != nil {
			return
		}
		var sources []string
		compileErr = filepath.WalkDir("java", func(path string, d os.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(path, ".java") {
				sources = append(sources, path)
			}
			return err
		})
		if compileErr != nil {
			return
		}
		out, err := os.MkdirTemp("", "ringlog-javaclient")
		if err != nil {
			compileErr = err
			return
		}
		// Kafka's clients log through log4j 2: warnings and errors go to
		// standard error, which a failing test shows.
		log4j := "rootLogger.level=warn\nrootLogger.appenderRef.err.ref=err\nappender.err.type=Console\n" +
			"appender.err.name=err\nappender.err.target=SYSTEM_ERR\nappender.err.layout.type=PatternLayout\n" +
			"appender.err.layout.pattern=[%d{HH:mm:ss.SSS}] %p %c{1}: %m%n\n"
		if compileErr = os.WriteFile(filepath.Join(out, "log4j2.properties"), []byte(log4j), 0o644); compileErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		args := append([]string{"-Xlint:all", "-Werror", "-cp", filepath.Join(jars, "*"), "-d", out}, sources...)
		if msg, err := exec.CommandContext(ctx, "javac", args...).CombinedOutput(); err != nil {
			compileErr = fmt.Errorf("javac: %v\n%s", err, msg)
			return
		}
		classpath = out + string(os.PathListSeparator) + filepath.Join(jars, "*")
	})
	if compileErr != nil {
		t.Fatal(compileErr)
	}
	return classpath
}

// runJava runs one of the programs under java/ (class ringlog.<name>) and
// returns what it printed on standard output. A program that fails or
// outlives timeout fails the test with its standard error.
func runJava(t *testing.T, timeout time.Duration, class string, args ...string) results {
	t.Helper()
	cp := javaClasspath(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// C1 alone: these programs are short, and a JVM that skips C2 starts
	// and warms up sooner.
	jvm := []string{"-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", cp,
		"-Dlog4j2.configurationFile=" + filepath.Join(strings.Split(cp, string(os.PathListSeparator))[0], "log4j2.properties"),
		"ringlog." + class}
	cmd := exec.CommandContext(ctx, "java", append(jvm, args...)...)
	cmd.SysProcAttr = sysProcAttr()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("java ringlog.%s %s: %v", class, strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	r := parseResults(stdout.String())
	r.stderr = stderr.String()
	if err != nil {
		t.Fatalf("java ringlog.%s %s: %v\nstdout:\n%s\nstderr:\n%s", class, strings.Join(args, " "), err,
			tail(stdout.String(), 8000), tail(stderr.String(), 8000))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ringlog.%s's standard error:\n%s", class, tail(r.stderr, 8000))
		}
	})
	return r
}

// tool runs one of Kafka's command-line tools (its main class, as
// bin/kafka-*.sh do) against the broker and returns its output. A tool
// that exits non-zero fails the test unless failOK.
func (b *broker) tool(t *testing.T, failOK bool, class string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args = append([]string{"--bootstrap-server", b.addr}, args...)
	start := time.Now()
	out, err := kafkaref.Tool(ctx, class, args...)
	short := class[strings.LastIndexByte(class, '.')+1:]
	t.Logf("%s %s: %v", short, strings.Join(args[2:], " "), time.Since(start).Round(time.Millisecond))
	if err != nil && !failOK {
		t.Fatalf("%s %s: %v\n%s", class, strings.Join(args, " "), err, out)
	}
	return out
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
