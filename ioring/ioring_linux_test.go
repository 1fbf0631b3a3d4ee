//go:build linux

package ioring

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// testPlatformErrors provokes real errnos from the kernel and checks that
// each reaches the op that caused it, alongside an op that succeeds.
func testPlatformErrors(t *testing.T, iox IO) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	dir := t.TempDir()
	direct, err := os.OpenFile(filepath.Join(dir, "direct"), os.O_RDWR|os.O_CREATE|unix.O_DIRECT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	wo, err := os.OpenFile(filepath.Join(dir, "wo"), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer wo.Close()
	ok := tempFile(t, "ok")

	// O_DIRECT wants block-aligned memory, length and offset: 3 bytes at
	// offset 1 are refused with EINVAL.
	misaligned := make([]byte, 4)[1:]
	cases := []struct {
		op   *Op
		want error
	}{
		{&Op{Kind: OpWrite, File: full, Bufs: [][]byte{[]byte("no space")}}, unix.ENOSPC},
		{&Op{Kind: OpSync, File: pr, Sync: SyncData}, unix.EINVAL},
		{&Op{Kind: OpWrite, File: direct, Offset: 1, Bufs: [][]byte{misaligned}}, unix.EINVAL},
		{&Op{Kind: OpRead, File: wo, Bufs: [][]byte{make([]byte, 8)}}, unix.EBADF},
		{&Op{Kind: OpWrite, File: ok, Bufs: [][]byte{[]byte("fine")}, Sync: SyncData}, nil},
	}
	var ops []*Op
	for _, c := range cases {
		ops = append(ops, c.op)
	}
	Do(iox, ops...) // errors are checked one by one below
	for i, c := range cases {
		if c.want == nil {
			if c.op.Err != nil {
				t.Fatalf("case %d: unexpected error %v", i, c.op.Err)
			}
			continue
		}
		if !errors.Is(c.op.Err, c.want) {
			t.Fatalf("case %d (%s %s): err = %v, want %v", i, c.op.Kind, c.op.File.Name(), c.op.Err, c.want)
		}
	}
}

// TestENOSPCOnSmallTmpfs fills a 1 MiB tmpfs with a 2 MiB write: the write
// is short, the rest is retried and fails with ENOSPC, and the caller sees
// how much was written.
func TestENOSPCOnSmallTmpfs(t *testing.T) {
	// The test machines run as root; a tmpfs that cannot be mounted is a
	// failure, not a reason to skip.
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	forEach(t, Config{}, func(t *testing.T, iox IO) {
		f, err := os.CreateTemp(dir, "f")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { f.Close(); os.Remove(f.Name()) }()
		op := &Op{Kind: OpWrite, File: f, Bufs: [][]byte{make([]byte, 1<<20), make([]byte, 1<<20)}, Sync: SyncData}
		Do(iox, op)
		if !errors.Is(op.Err, unix.ENOSPC) {
			t.Fatalf("err = %v, want ENOSPC", op.Err)
		}
		if op.N <= 0 || op.N >= 2<<20 {
			t.Fatalf("N = %d, want a partial write", op.N)
		}
	})
}

// TestWaitTimeoutAndPipe uses a pipe, whose read blocks until data comes,
// to check that Wait honours its timeout and then delivers the op.
func TestWaitTimeoutAndPipe(t *testing.T) {
	u, err := newUring(Config{Entries: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	op := &Op{Kind: OpRead, File: pr, Bufs: [][]byte{make([]byte, 16)}}
	if err := u.Submit(op); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := u.Wait(nil, 1, 50*time.Millisecond)
	if err != nil || len(out) != 0 {
		t.Fatalf("Wait = %v, %v; want nothing before data", out, err)
	}
	if el := time.Since(start); el < 40*time.Millisecond {
		t.Fatalf("Wait returned after %v, before its 50ms timeout", el)
	}
	if out, _ := u.Wait(nil, 1, 0); len(out) != 0 {
		t.Fatal("Wait(timeout 0) returned an op that cannot be complete")
	}
	pw.Write([]byte("wake"))
	out, err = u.Wait(nil, 1, 5*time.Second)
	if err != nil || len(out) != 1 || out[0].N != 4 || string(op.Bufs[0][:4]) != "wake" {
		t.Fatalf("Wait = %v, %v", out, err)
	}
}

// TestPipeLargeWrite writes 4 MiB into a 64 KiB pipe while a reader
// drains it: io_uring may complete the write in pieces, and the op must
// still report the whole write. (Pipes cannot seek, so the portable
// path's pwrite does not apply to them.)
func TestPipeLargeWrite(t *testing.T) {
	iox, err := newUring(Config{Writes: WritesInRing})
	if err != nil {
		t.Fatal(err)
	}
	defer iox.Close()
	{
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		defer pw.Close()
		data := pattern(9, 4<<20)
		got := make(chan []byte)
		go func() {
			b, _ := io.ReadAll(io.LimitReader(pr, int64(len(data))))
			got <- b
		}()
		op := &Op{Kind: OpWrite, File: pw, Bufs: [][]byte{data[:1<<20], data[1<<20:]}}
		if err := Do(iox, op); err != nil {
			t.Fatal(err)
		}
		if op.N != len(data) {
			t.Fatalf("N = %d", op.N)
		}
		if !bytes.Equal(<-got, data) {
			t.Fatal("reader got different bytes")
		}
	}
}

// withSeccompDenying runs fn on a fresh OS thread on which a seccomp filter
// makes io_uring_setup fail with errno. The thread is never unlocked, so
// the runtime discards it when fn returns.
func withSeccompDenying(t *testing.T, errno unix.Errno, fn func()) {
	t.Helper()
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		filter := []unix.SockFilter{
			{Code: 0x20, K: 0}, // ld [nr]
			{Code: 0x15, Jt: 0, Jf: 1, K: unix.SYS_IO_URING_SETUP}, // jeq io_uring_setup
			{Code: 0x06, K: 0x00050000 | uint32(errno)},            // ret ERRNO(errno)
			{Code: 0x06, K: 0x7fff0000},                            // ret ALLOW
		}
		prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			done <- err
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_SECCOMP, 2, uintptr(unsafe.Pointer(&prog))); e != 0 {
			done <- e
			return
		}
		fn()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatalf("cannot install a seccomp filter: %v", err)
	}
}

func TestProbeFallsBackWhenBlocked(t *testing.T) {
	for _, tc := range []struct {
		errno unix.Errno
		words string
	}{{unix.ENOSYS, "ENOSYS"}, {unix.EPERM, "EPERM"}} {
		withSeccompDenying(t, tc.errno, func() {
			reason := Probe()
			if !strings.Contains(reason, tc.words) {
				t.Errorf("Probe() = %q, want it to name %s", reason, tc.words)
			}
			iox, c, err := Open(ModeAuto, Config{})
			if err != nil || iox.Kind() != Portable || c.Kind != Portable || !strings.Contains(c.Reason, tc.words) {
				t.Errorf("Open(auto) = %v, %v, %v; want the portable path with the reason", iox, c, err)
			} else {
				iox.Close()
			}
			if _, _, err := Open(ModeUring, Config{}); !errors.Is(err, ErrUnavailable) {
				t.Errorf("Open(uring) under seccomp: err = %v, want ErrUnavailable", err)
			}
		})
	}
	// Outside the filter the probe passes and auto picks io_uring.
	iox, c, err := Open(ModeAuto, Config{})
	if err != nil || c.Kind != Uring {
		t.Fatalf("Open(auto) = %v, %v", c, err)
	}
	iox.Close()
}
