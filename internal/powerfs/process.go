//go:build linux

package powerfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The file system is served by a process of its own, the test binary run
// again: a process that serves a FUSE mount must never touch the mount
// itself, since a thread blocked in a FUSE request (a page fault on a
// mapped file, say) keeps the process from exiting when the server in it
// stops, and a test's panic would then hang instead of failing. The
// server also outlives a test that dies: it unmounts when its stdin
// closes.

const (
	envServe = "RINGLOG_POWERFS_SERVE" // the mount point; set in the server process
	envSeed  = "RINGLOG_POWERFS_SEED"
	envLimit = "RINGLOG_POWERFS_UNSYNCED_MAX"
)

// init turns any binary that imports powerfs into its server when the
// environment says so: the test binaries that use it run themselves.
func init() {
	if dir := os.Getenv(envServe); dir != "" {
		os.Exit(serverMain(dir, os.Stdin, os.Stdout))
	}
}

// Options tune a mount.
type Options struct {
	// Seed makes the choices of Torn and Reorder repeatable.
	Seed uint64
	// UnsyncedMax bounds the unsynced bytes held in memory (default 4 GiB);
	// past it writes fail with ENOSPC.
	UnsyncedMax int64
}

// FS is a mounted powerfs, served by a child process.
type FS struct {
	dir    string
	cmd    *exec.Cmd
	in     io.WriteCloser
	stdout *os.File
	out    *bufio.Reader
	done   chan error
}

// Mount serves an empty powerfs at dir, which must exist, from a child
// process (this binary, run again). The caller must Unmount it (a test:
// in t.Cleanup); if the caller dies first the child unmounts on its own.
func Mount(dir string, opts Options) (*FS, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("powerfs: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envServe+"="+dir, envSeed+"="+strconv.FormatUint(opts.Seed, 10),
		envLimit+"="+strconv.FormatInt(opts.UnsyncedMax, 10))
	cmd.Stderr = os.Stderr
	// The server's own session: a signal meant for the test's process
	// group does not reach it, and it outlives its parent only long
	// enough to unmount (stdin closes when the parent dies).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// A pipe of our own, not StdoutPipe: Wait closes that one as soon as
	// the server exits, possibly before its last answer is read.
	stdout, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		stdout.Close()
		return nil, fmt.Errorf("powerfs: start server: %w", err)
	}
	p := &FS{dir: dir, cmd: cmd, in: in, stdout: stdout, out: bufio.NewReader(stdout), done: make(chan error, 1)}
	if _, err := p.reply(); err != nil {
		in.Close()
		cmd.Wait()
		stdout.Close()
		return nil, err
	}
	go func() { p.done <- cmd.Wait() }()
	return p, nil
}

// Dir is the mount point.
func (p *FS) Dir() string { return p.dir }

// call sends one command line and returns the answer's fields.
func (p *FS) call(cmd string) ([]string, error) {
	if p.cmd == nil {
		return nil, errors.New("powerfs: unmounted")
	}
	if _, err := io.WriteString(p.in, cmd+"\n"); err != nil {
		return nil, fmt.Errorf("powerfs: %s: %w", cmd, err)
	}
	return p.reply()
}

func (p *FS) reply() ([]string, error) {
	line, err := p.out.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("powerfs: server gone: %w", err)
	}
	fields := strings.Fields(line)
	if len(fields) == 0 || fields[0] != "ok" {
		return nil, fmt.Errorf("powerfs: %s", strings.TrimSpace(line))
	}
	return fields[1:], nil
}

// PowerLoss cuts the power: every process using the mount must be dead by
// now, as it would be. The server unmounts, keeps of the unsynced state
// what mode says, and mounts the survivors again.
func (p *FS) PowerLoss(mode Mode) error {
	_, err := p.call("loss " + strconv.Itoa(int(mode)))
	return err
}

// Fail makes writes and syncs of every file under path (a directory or
// file under the mount, absolute or relative to it) fail with EIO from now
// on, as a disk that broke under one log; "" heals it. The files stay
// readable.
func (p *FS) Fail(path string) error {
	if filepath.IsAbs(path) {
		rel, err := filepath.Rel(p.dir, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("powerfs: %s is not under the mount %s", path, p.dir)
		}
		path = rel
	}
	if strings.ContainsAny(path, " \n") {
		return fmt.Errorf("powerfs: fail %q: no spaces or newlines", path)
	}
	cmd := "fail"
	if path != "" {
		cmd += " " + filepath.Clean(path)
	}
	_, err := p.call(cmd)
	return err
}

// Unsynced reports what a power loss now would put at risk: files with
// unsynced changes, their unsynced bytes, and directories whose entries
// changed since their last fsync.
func (p *FS) Unsynced() (files, bytes, dirs int64, err error) {
	f, err := p.call("unsynced")
	if err != nil {
		return 0, 0, 0, err
	}
	if len(f) != 3 {
		return 0, 0, 0, fmt.Errorf("powerfs: unsynced answered %q", f)
	}
	n := make([]int64, 3)
	for i := range f {
		if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return 0, 0, 0, fmt.Errorf("powerfs: unsynced answered %q", f)
		}
	}
	return n[0], n[1], n[2], nil
}

// Unmount stops the server, which unmounts. Every process with a file or
// directory open under the mount must have let go (or died) first.
func (p *FS) Unmount() error {
	if p.cmd == nil {
		return nil
	}
	_, err := p.call("quit")
	p.in.Close()
	select {
	case werr := <-p.done:
		err = errors.Join(err, werr)
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		err = errors.Join(err, errors.New("powerfs: server did not exit"))
	}
	p.stdout.Close()
	p.cmd = nil
	return err
}

// serverMain serves dir until told to quit or until its input closes,
// answering each command line with "ok ..." or "err ...".
func serverMain(dir string, in io.Reader, out io.Writer) int {
	opts := Options{}
	opts.Seed, _ = strconv.ParseUint(os.Getenv(envSeed), 10, 64)
	opts.UnsyncedMax, _ = strconv.ParseInt(os.Getenv(envLimit), 10, 64)
	s, err := serve(dir, opts)
	if err != nil {
		fmt.Fprintf(out, "err %v\n", err)
		return 1
	}
	fmt.Fprintln(out, "ok")
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "loss":
			mode, _ := strconv.Atoi(f[1])
			if err := s.powerLoss(Mode(mode)); err != nil {
				fmt.Fprintf(out, "err %v\n", err)
				continue
			}
			fmt.Fprintln(out, "ok")
		case "fail":
			s.mu.Lock()
			s.failing = ""
			if len(f) > 1 {
				s.failing = f[1]
			}
			s.mu.Unlock()
			fmt.Fprintln(out, "ok")
		case "unsynced":
			files, bytes, dirs := s.unsynced()
			fmt.Fprintf(out, "ok %d %d %d\n", files, bytes, dirs)
		case "quit":
			if err := s.unmount(); err != nil {
				fmt.Fprintf(out, "err %v\n", err)
				continue
			}
			fmt.Fprintln(out, "ok")
			return 0
		default:
			fmt.Fprintf(out, "err unknown command %q\n", f[0])
		}
	}
	// The parent is gone: unmount, lazily if something still uses the
	// mount (its users then get ENOTCONN instead of hanging).
	if err := s.unmount(); err != nil {
		syscall.Unmount(dir, syscall.MNT_DETACH)
	}
	return 0
}

// MountT mounts a powerfs on a temporary directory of t for the test's
// life: the machine must have FUSE (the test fails otherwise, it never
// skips), and the file system is unmounted at the end of the test, after
// the cleanups registered later (the processes using it are stopped first).
func MountT(t testing.TB, opts Options) *FS {
	t.Helper()
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	p, err := Mount(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return p
}
