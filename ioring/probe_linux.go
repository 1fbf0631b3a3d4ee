//go:build linux

package ioring

import (
	"errors"
	"fmt"
	"os"
	"runtime"
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
	if why := r.lacks(opName{opNop, "NOP"}, opName{opReadv, "READV"}, opName{opWritev, "WRITEV"}, opName{opFsync, "FSYNC"},
		opName{opRead, "READ"}, opName{opWrite, "WRITE"}); why != "" {
		return why
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
		return setupError("io_uring_setup", unix.ENOMEM).Error() // names the limit and its value
	}
	return err.Error()
}

// ProbeNet checks that the network path of io_uring works here: a ring
// with SINGLE_ISSUER and DEFER_TASKRUN (Linux 6.1), the opcodes a network
// loop submits, a provided buffer ring (IORING_REGISTER_PBUF_RING, 5.19),
// and a real multishot receive (6.0) that lands bytes sent on a socket
// pair in a provided buffer and stays armed. It returns "" when all of it
// works, else the reason.
func ProbeNet() string {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n, err := NewNetRing(8, 16)
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return "io_uring_setup with SINGLE_ISSUER|DEFER_TASKRUN: EINVAL (Linux 6.1 or newer is needed)"
		}
		return setupFailure(errors.Unwrap(err))
	}
	defer n.Close()
	if why := n.r.lacks(opName{opRecv, "RECV"}, opName{opSendmsg, "SENDMSG"}, opName{opPollAdd, "POLL_ADD"},
		opName{opAsyncCancel, "ASYNC_CANCEL"}, opName{opRead, "READ"}); why != "" {
		return why
	}
	bufs, err := n.RegisterBufRing(0, 2, 64)
	if err != nil {
		return err.Error() + " (Linux 5.19 or newer is needed)"
	}
	defer bufs.Close()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Sprintf("socketpair: %v", err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if _, err := unix.Write(fds[1], []byte("ping")); err != nil {
		return fmt.Sprintf("write: %v", err)
	}
	if err := n.RecvMultishot(fds[0], 0, 1); err != nil {
		return err.Error()
	}
	if err := n.EnterTimeout(time.Second); err != nil {
		return err.Error()
	}
	var got NetCQE
	if n.Reap(func(c NetCQE) { got = c }) == 0 {
		return "multishot receive: no completion within a second"
	}
	id, ok := got.Buffer()
	switch {
	case got.Res < 0:
		return fmt.Sprintf("multishot receive: %v (Linux 6.0 or newer is needed)", unix.Errno(-got.Res))
	case !ok || got.Res != 4 || string(bufs.Bytes(id, 4)) != "ping":
		return fmt.Sprintf("multishot receive: unexpected completion %+v", got)
	case !got.More():
		return "multishot receive ended after one completion (IORING_RECV_MULTISHOT not honoured)"
	}
	bufs.Recycle(id)
	// Cancel the receive and wait for its last completion, so that Close
	// frees nothing the kernel still uses.
	if err := n.CancelFD(fds[0], 2); err != nil {
		return err.Error()
	}
	for more, deadline := true, time.Now().Add(time.Second); more; {
		if time.Now().After(deadline) {
			return "multishot receive: cancellation did not complete"
		}
		if err := n.EnterTimeout(100 * time.Millisecond); err != nil {
			return err.Error()
		}
		n.Reap(func(c NetCQE) {
			if c.UserData == 1 && !c.More() {
				more = false
			}
		})
	}
	return ""
}
