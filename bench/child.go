package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is a process the suite started (a broker). Its output is drained
// for its whole life, not only until it is ready: a broker blocked on a
// full stderr pipe would be measured as slow.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser // closed to tell a peer child (kfake, NATS) to stop

	mu    sync.Mutex
	lines []string // the last lines of output, for error messages

	exited  chan struct{}
	waitErr error
}

const childTailLines = 40

// startChild runs path with args and waits until ready accepts a line of
// its output (stdout and stderr together), or the process exits, or
// readyTimeout passes. The child gets SIGKILL if this process dies without
// stopping it (Linux), and is stopped on every error path here.
func startChild(name, path string, args []string, ready func(line string) bool, readyTimeout time.Duration) (*child, error) {
	cmd := exec.Command(path, args...)
	setParentDeathSignal(cmd)
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%s: output pipe: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	stdin, err := cmd.StdinPipe()
	if err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("%s: stdin pipe: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	pw.Close() // the child holds the write end now; EOF comes when it exits
	c := &child{name: name, cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	readyCh := make(chan struct{})
	go func() {
		var once sync.Once
		r := bufio.NewReaderSize(pr, 64<<10)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				line = strings.TrimRight(line, "\r\n")
				c.mu.Lock()
				c.lines = append(c.lines, line)
				if len(c.lines) > childTailLines {
					c.lines = c.lines[len(c.lines)-childTailLines:]
				}
				c.mu.Unlock()
				if ready(line) {
					once.Do(func() { close(readyCh) })
				}
			}
			if err != nil {
				pr.Close()
				return
			}
		}
	}()
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	select {
	case <-readyCh:
		return c, nil
	case <-c.exited:
		// Give the reader a moment to collect the last words.
		time.Sleep(50 * time.Millisecond)
		return nil, fmt.Errorf("%s exited at start (%v): %s", name, c.waitErr, c.lastLine())
	case <-time.After(readyTimeout):
		c.stop()
		return nil, fmt.Errorf("%s not ready after %v: %s", name, readyTimeout, c.lastLine())
	}
}

// output returns the last lines the child printed.
func (c *child) output() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

// lastLine is the most telling line of output: the last one that looks
// like an error, else the last one.
func (c *child) lastLine() string {
	ls := c.output()
	for i := len(ls) - 1; i >= 0; i-- {
		l := strings.ToLower(ls[i])
		if strings.Contains(l, "error") || strings.Contains(l, "fail") || strings.Contains(l, "ringlog:") {
			return strings.TrimSpace(ls[i])
		}
	}
	if len(ls) == 0 {
		return "no output"
	}
	return strings.TrimSpace(ls[len(ls)-1])
}

// lastProblem is the last warning or error the child logged (slog's
// level=WARN or level=ERROR), or "".
func (c *child) lastProblem() string {
	ls := c.output()
	for i := len(ls) - 1; i >= 0; i-- {
		if strings.Contains(ls[i], "level=WARN") || strings.Contains(ls[i], "level=ERROR") {
			return strings.TrimSpace(ls[i])
		}
	}
	return ""
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) alive() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// childStopGrace is how long a child may take to shut down cleanly (ringlog
// flushes and marks its logs clean on SIGTERM) before it is killed.
const childStopGrace = 20 * time.Second

// stop asks the child to stop (SIGTERM, and EOF on its stdin), then kills
// it if it has not exited within childStopGrace. It returns when the
// process is gone.
func (c *child) stop() error {
	if !c.alive() {
		return nil
	}
	c.stdin.Close()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		// Windows has no SIGTERM to deliver: kill.
		c.cmd.Process.Kill()
	}
	select {
	case <-c.exited:
	case <-time.After(childStopGrace):
		c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("%s did not stop within %v; killed", c.name, childStopGrace)
	}
	var ee *exec.ExitError
	if c.waitErr != nil && !errors.As(c.waitErr, &ee) {
		return c.waitErr
	}
	return nil
}

// kill sends SIGKILL (no clean shutdown: a crash) and returns when the
// process is gone.
func (c *child) kill() {
	if c.alive() {
		c.cmd.Process.Kill()
	}
	<-c.exited
}

// runCommand runs a short-lived command (fio, kcat) bounded by ctx, and
// returns its standard output; its standard error is in the error.
func runCommand(ctx context.Context, path string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	setParentDeathSignal(cmd)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
