package netpoll

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// cpuMeter measures the server's CPU time: the process's, minus that of the
// calling goroutine's thread (the benchmark's client, locked to it).
type cpuMeter struct {
	proc, self time.Duration
}

func rusage(who int) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() *cpuMeter {
	runtime.LockOSThread()
	return &cpuMeter{proc: rusage(unix.RUSAGE_SELF), self: rusage(unix.RUSAGE_THREAD)}
}

func (m *cpuMeter) stop() time.Duration {
	self := rusage(unix.RUSAGE_THREAD) - m.self
	proc := rusage(unix.RUSAGE_SELF) - m.proc
	runtime.UnlockOSThread()
	return proc - self
}
