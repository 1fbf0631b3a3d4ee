package javaclient

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ringlog/internal/kafkaref"
)

// work holds what the test binary makes for its JVMs: the compiled
// programs (classes/), the log4j configuration, and the class-data archive
// of Kafka's tools. TestMain removes it.
var work string

func TestMain(m *testing.M) {
	var err error
	if work, err = os.MkdirTemp("", "ringlog-javaclient"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(work)
	os.Exit(code)
}

// log4j is the configuration of every JVM the tests start, clients and
// tools, as Kafka's bin/ scripts give tools theirs
// (config/tools-log4j2.yaml): warnings and errors on standard error.
const log4j = `rootLogger.level=warn
rootLogger.appenderRef.err.ref=err
appender.err.type=Console
appender.err.name=err
appender.err.target=SYSTEM_ERR
appender.err.layout.type=PatternLayout
appender.err.layout.pattern=[%d{HH:mm:ss.SSS}] %p %c{1}: %m%n
`

var (
	setupOnce sync.Once
	jars      string
	setupErr  error
)

// javaSetup finds Java and Kafka's jars (kafkaref fetches them with Maven
// once per machine), compiles the programs under java/ into work/classes
// and writes the log4j configuration, once per test binary. Without java,
// javac or mvn the test fails with the reason.
func javaSetup(t *testing.T) {
	t.Helper()
	setupOnce.Do(func() {
		if setupErr = kafkaref.Available(); setupErr != nil {
			return
		}
		if _, err := exec.LookPath("javac"); err != nil {
			setupErr = fmt.Errorf("javac not found on PATH (the Java programs are compiled at test time; install a JDK 17): %w", err)
			return
		}
		if jars, setupErr = kafkaref.Jars(); setupErr != nil {
			return
		}
		if setupErr = os.WriteFile(filepath.Join(work, "log4j2.properties"), []byte(log4j), 0o644); setupErr != nil {
			return
		}
		var sources []string
		setupErr = filepath.WalkDir("java", func(path string, d os.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(path, ".java") {
				sources = append(sources, path)
			}
			return err
		})
		if setupErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		args := append([]string{"-Xlint:all", "-Werror", "-cp", filepath.Join(jars, "*"), "-d", filepath.Join(work, "classes")}, sources...)
		start := time.Now()
		if msg, err := exec.CommandContext(ctx, "javac", args...).CombinedOutput(); err != nil {
			setupErr = fmt.Errorf("javac: %v\n%s", err, msg)
		}
		t.Logf("javac: %d files in %v", len(sources), time.Since(start).Round(time.Millisecond))
	})
	if setupErr != nil {
		t.Fatal(setupErr)
	}
}

// jvm is the start of every java command line: a small heap, C1 alone
// (these JVMs live a few seconds; C2 would compile for a run that is
// over), and the log4j configuration.
func jvm() []string {
	return []string{"-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dlog4j2.configurationFile=" + filepath.Join(work, "log4j2.properties")}
}

// runJava runs one of the programs under java/ (class ringlog.<name>) and
// returns what it printed on standard output. A program that fails or
// outlives timeout fails the test with its standard error.
func runJava(t *testing.T, timeout time.Duration, class string, args ...string) results {
	t.Helper()
	javaSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cp := filepath.Join(work, "classes") + string(os.PathListSeparator) + filepath.Join(jars, "*")
	cmd := exec.CommandContext(ctx, "java", append(append(jvm(), "-cp", cp, "ringlog."+class), args...)...)
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

// Kafka's tool classes, run as bin/kafka-*.sh run them.
const (
	kafkaTopics         = "org.apache.kafka.tools.TopicCommand"
	kafkaConsumerGroups = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
	kafkaConfigs        = "org.apache.kafka.tools.ConfigCommand"
	kafkaGetOffsets     = "org.apache.kafka.tools.GetOffsetShell"
	kafkaDeleteRecords  = "org.apache.kafka.tools.DeleteRecordsCommand"
	kafkaConsoleProd    = "org.apache.kafka.tools.ConsoleProducer"
	kafkaConsoleCons    = "org.apache.kafka.tools.consumer.ConsoleConsumer"
)

var (
	archiveOnce sync.Once
	archive     string // the tools' class-data archive, once it exists
)

// toolCmd is the java command of a Kafka tool against the broker. A tool
// starts in about 1.5 s of CPU, loading and verifying a few thousand
// classes from the jars; with a class-data sharing archive of them (made
// by the first tool the binary runs, -XX:ArchiveClassesAtExit, and then
// mapped by every other) it takes about 0.5 s. The tools behave the same
// either way. kafkaref.Tool runs tools too, but takes no standard input
// (the console producer needs it) and no archive.
func (b *broker) toolCmd(ctx context.Context, dump bool, class string, args ...string) *exec.Cmd {
	flags := append(jvm(), "-Xlog:cds=off", "-Xlog:cds+dynamic=off")
	if dump {
		flags = append(flags, "-XX:ArchiveClassesAtExit="+filepath.Join(work, "tools.jsa"))
	} else if archive != "" {
		flags = append(flags, "-XX:SharedArchiveFile="+archive)
	}
	flags = append(flags, "-cp", filepath.Join(jars, "*"), class, "--bootstrap-server", b.addr)
	cmd := exec.CommandContext(ctx, "java", append(flags, args...)...)
	cmd.SysProcAttr = sysProcAttr()
	return cmd
}

// tool runs one of Kafka's command-line tools against the broker, with
// stdin as its standard input, and returns what it printed (standard
// output and error, as an operator sees them) and how it exited.
func (b *broker) toolIn(t *testing.T, stdin string, class string, args ...string) (string, error) {
	t.Helper()
	javaSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(dump bool) (string, error) {
		cmd := b.toolCmd(ctx, dump, class, args...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	start := time.Now()
	var out string
	var err error
	ran := false
	archiveOnce.Do(func() {
		out, err = run(true)
		ran = true
		if _, statErr := os.Stat(filepath.Join(work, "tools.jsa")); statErr == nil {
			archive = filepath.Join(work, "tools.jsa")
		}
	})
	if !ran {
		out, err = run(false)
	}
	t.Logf("%s %s: %v", class[strings.LastIndexByte(class, '.')+1:], strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return out, err
}

// tool is toolIn with no input.
func (b *broker) tool(t *testing.T, class string, args ...string) (string, error) {
	t.Helper()
	return b.toolIn(t, "", class, args...)
}

// toolOK runs a tool that must succeed, and returns its output.
func (b *broker) toolOK(t *testing.T, class string, args ...string) string {
	t.Helper()
	out, err := b.tool(t, class, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", class, strings.Join(args, " "), err, out)
	}
	return out
}

// toolFails runs a tool that must fail, and returns its output.
func (b *broker) toolFails(t *testing.T, class string, args ...string) string {
	t.Helper()
	out, err := b.tool(t, class, args...)
	if err == nil {
		t.Errorf("%s %s succeeded; want it refused:\n%s", class, strings.Join(args, " "), out)
	}
	return out
}

// background is a tool left running (a console consumer in a group).
type background struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error // how it exited, once done is closed
	once sync.Once
}

// startTool starts a tool that runs until stopped; the test's end stops
// it if the test did not.
func (b *broker) startTool(t *testing.T, class string, args ...string) *background {
	t.Helper()
	javaSetup(t)
	bg := &background{cmd: b.toolCmd(context.Background(), false, class, args...), out: &syncBuffer{}, done: make(chan struct{})}
	bg.cmd.Stdout, bg.cmd.Stderr = bg.out, bg.out
	if err := bg.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		bg.err = bg.cmd.Wait()
		close(bg.done)
	}()
	t.Cleanup(func() { bg.stop(t) })
	return bg
}

// stop ends the tool as Ctrl-C would (SIGTERM runs the console
// consumer's shutdown hook, which closes the consumer: it leaves its
// group) and returns its output.
func (bg *background) stop(t *testing.T) string {
	t.Helper()
	bg.once.Do(func() {
		_ = bg.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-bg.done:
		case <-time.After(30 * time.Second):
			_ = bg.cmd.Process.Kill()
			<-bg.done
			t.Errorf("%s still running 30 s after SIGTERM:\n%s", strings.Join(bg.cmd.Args, " "), bg.out)
		}
	})
	return bg.out.String()
}
