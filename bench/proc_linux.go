package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which the kernel fixes at 100 for user space on every architecture Go
// supports (sysconf(_SC_CLK_TCK) would need cgo to ask).
const procTick = 10 * time.Millisecond

// procCPU is the CPU time a process has used so far, in user space
// (utime) and in the kernel on its behalf (stime).
func procCPU(pid int) (user, sys time.Duration, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: fields
	// are counted from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("bench: /proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("bench: /proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("bench: /proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return time.Duration(ut) * procTick, time.Duration(st) * procTick, nil
}

// procThreadCPU is the CPU time each of a process's threads has used so
// far, by thread id, in nanoseconds: the first field of
// /proc/<pid>/task/<tid>/schedstat, the scheduler's own count of time on
// a CPU (user and kernel together). utime and stime are counted in
// 10 ms ticks, too coarse for a run that costs the broker a few tens of
// milliseconds (a quick run's consume: 48 MiB at about 0.5 s per GB is
// 2.4 ticks, and no tick at all in one run out of ten).
func procThreadCPU(pid int) (map[int]time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make(map[int]time.Duration, len(ents))
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // the thread exited while we listed
			}
			return nil, err
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return nil, fmt.Errorf("bench: %s/%s/schedstat: empty", dir, e.Name())
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bench: %s/%s/schedstat: %w", dir, e.Name(), err)
		}
		out[tid] = time.Duration(ns)
	}
	return out, nil
}

// procAlive is false once the process has exited: /proc/<pid> is gone
// (reaped) or the process is a zombie (exited, not yet reaped).
func procAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	return i >= 0 && len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// procResetPeakRSS resets the process's peak RSS (VmHWM) to its current
// RSS, so that the next procPeakRSS is the peak of one run (Linux 4.0+).
func procResetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// procPeakRSS is the process's peak resident set size in bytes (VmHWM).
func procPeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) < 1 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("bench: /proc/%d/status: no VmHWM", pid)
}

// selfCPU is this process's CPU time: the clients' share of the machine.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// setParentDeathSignal makes the kernel kill the child when the thread
// that started it dies, so that a bench killed with SIGKILL leaves no
// broker behind.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// dropFileCache evicts every regular file under dir from the page cache:
// each is fsynced (only clean pages can be dropped) and then advised
// POSIX_FADV_DONTNEED. Unlike writing /proc/sys/vm/drop_caches, it needs
// no root and leaves the other users of a shared machine their cache.
// Pages a process keeps mapped (ringlog's mmap'd indexes) stay resident.
func dropFileCache(dir string) error {
	return eachFile(dir, func(f *os.File) error {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", f.Name(), err)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			return fmt.Errorf("fadvise %s: %w", f.Name(), err)
		}
		return nil
	})
}

// cacheDropMethod says how dropFileCache works, for the report.
const cacheDropMethod = "every data file of the peer fsynced, then posix_fadvise(POSIX_FADV_DONTNEED)"

// fsType names the file system dir is on, from /proc/self/mounts (the
// longest mount point that is a prefix of dir).
func fsType(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "unknown"
	}
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return "unknown"
	}
	best, typ := "", "unknown"
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		mp := f[1]
		if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > len(best) {
			best, typ = mp, f[2]
		}
	}
	return typ
}

// syncFS writes back the dirty pages of the file system holding dir.
func syncFS(dir string) {
	f, err := os.Open(dir)
	if err != nil {
		return
	}
	defer f.Close()
	unix.Syncfs(int(f.Fd()))
}
