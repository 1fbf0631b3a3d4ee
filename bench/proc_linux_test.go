package bench

import (
	"os"
	"testing"
	"time"
)

// TestThreadCPUCountsShortBursts: 30 ms of this process's CPU shows in
// its threads' precise count, which utime and stime (10 ms ticks) may
// miss or round; cpuBetween takes it.
func TestThreadCPUCountsShortBursts(t *testing.T) {
	pid := os.Getpid()
	snap := func() usage {
		u := usage{cpuOK: true, threadsOK: true}
		user, sys, err := procCPU(pid)
		if err != nil {
			t.Fatal(err)
		}
		u.cpu, u.cpuSys = user+sys, sys
		if u.threads, err = procThreadCPU(pid); err != nil {
			t.Fatal(err)
		}
		return u
	}
	before := snap()
	if len(before.threads) == 0 {
		t.Fatal("no threads read")
	}
	// Spin until getrusage (the kernel's precise total, split by ticks)
	// says this process used 30 ms more: wall time would count the
	// moments other processes ran.
	burn := selfCPU()
	x := 0
	for selfCPU()-burn < 30*time.Millisecond {
		x++
	}
	after := snap()
	cpu, sys, ok := cpuBetween(before, after)
	if !ok || cpu < 25*time.Millisecond || cpu > 10*time.Second || sys > cpu {
		t.Fatalf("30 ms of CPU counted as %v (kernel %v, ok %v; %d spins)", cpu, sys, ok, x)
	}
}

// TestCPUBetweenFallsBackOnExitedThreads: a thread gone from the later
// snapshot took its count with it, so the ticks are used.
func TestCPUBetweenFallsBackOnExitedThreads(t *testing.T) {
	before := usage{cpu: 100 * time.Millisecond, cpuSys: 40 * time.Millisecond, threadsOK: true,
		threads: map[int]time.Duration{1: time.Second, 2: time.Second}}
	after := usage{cpu: 300 * time.Millisecond, cpuSys: 90 * time.Millisecond, threadsOK: true,
		threads: map[int]time.Duration{1: time.Second + 150*time.Millisecond, 3: 70 * time.Millisecond}}
	if cpu, sys, _ := cpuBetween(before, after); cpu != 200*time.Millisecond || sys != 50*time.Millisecond {
		t.Errorf("with an exited thread: %v, %v; want the ticks' 200ms, 50ms", cpu, sys)
	}
	after.threads[2] = time.Second + 30*time.Millisecond
	// 150 + 30 + 70 (a new thread) ms; kernel share 50/200 of it.
	if cpu, sys, _ := cpuBetween(before, after); cpu != 250*time.Millisecond || sys != 62500*time.Microsecond {
		t.Errorf("every thread there: %v, %v; want 250ms, 62.5ms", cpu, sys)
	}
}
