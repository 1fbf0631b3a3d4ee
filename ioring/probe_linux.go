//go:build linux

package ioring

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Probe checks that io_uring can be used here: the syscalls are allowed,
// the kernel has the features and opcodes ringlog needs, and a request
// actually completes. It returns "" when everything works, else the reason
// in words an operator can act on.
func Probe() string {
	r, err := setupRing(4)
	if err != nil {
		return setupFailure(err)
	}
	defer r.close()
	if r.features&featExtArg == 0 {
		return "kernel lacks IORING_FEAT_EXT_ARG (Linux 5.11 or newer is needed)"
	}
	names := map[uint8]string{opNop: "NOP", opReadv: "READV", opWritev: "WRITEV", opFsync: "FSYNC", opRead: "READ", opWrite: "WRITE"}
	missing, err := r.unsupported(opNop, opReadv, opWritev, opFsync, opRead, opWrite)
	if err != nil {
		return err.Error()
	}
	if len(missing) > 0 {
		var ms []string
		for _, m := range missing {
			ms = append(ms, names[m])
		}
		return "kernel lacks io_uring opcodes " + strings.Join(ms, ", ")
	}
	// Seccomp policies sometimes allow io_uring_setup but not
	// io_uring_enter: push a NOP through to be sure.
	s := r.next()
	s.opcode = opNop
	s.userData = 1
	if _, err := r.submit(); err != nil {
		return fmt.Sprintf("io_uring_enter: %v", err)
	}
	if err := r.waitCQE(time.Second); err != nil {
		return fmt.Sprintf("io_uring_enter wait: %v", err)
	}
	var res int32 = 1
	r.reap(func(_ uint64, rr int32) { res = rr })
	if res != 0 {
		return fmt.Sprintf("NOP completed with %v", unix.Errno(-res))
	}
	return ""
}

// setupFailure turns an io_uring_setup error into a reason.
func setupFailure(err error) string {
	switch {
	case errors.Is(err, unix.ENOSYS):
		return "io_uring_setup: ENOSYS (kernel older than 5.1, built without io_uring, or the syscall is filtered by seccomp)"
	case errors.Is(err, unix.EPERM):
		b, rerr := os.ReadFile("/proc/sys/kernel/io_uring_disabled")
		switch strings.TrimSpace(string(b)) {
		case "2":
			return "io_uring disabled by sysctl kernel.io_uring_disabled=2"
		case "1":
			return "io_uring restricted by sysctl kernel.io_uring_disabled=1 and this process is not in kernel.io_uring_group"
		}
		if rerr == nil {
			return "io_uring_setup: EPERM (blocked by seccomp or a security module)"
		}
		return "io_uring_setup: EPERM"
	case errors.Is(err, unix.ENOMEM):
		return "io_uring_setup: ENOMEM (locked-memory limit too low; raise RLIMIT_MEMLOCK)"
	}
	return err.Error()
}
