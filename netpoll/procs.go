package netpoll

import (
	"runtime"
	"sync"
)

// Each uring loop adds one P (GOMAXPROCS) for its life. A loop is a
// goroutine locked to its thread that waits for completions inside
// io_uring_enter, and a thread blocked in a system call keeps its P: the
// goroutines the loop's turn made runnable (the shard a produce was handed
// to, above all) sit in that P's run queue until sysmon takes the P back,
// 20 us to 10 ms later, longer when sysmon itself waits for a CPU. With an
// idle P to spare, making a goroutine runnable wakes a thread that steals
// it at once. The loops are counted in GOMAXPROCS as the threads they are,
// so that the Ps left for everything else stay as many as before.
//
// The count is process-wide (servers come and go in one process): the
// first loop records GOMAXPROCS as the base, each loop adds one, and the
// base is restored when the last loop ends. Config.Loops' default is the
// base, not the raised value; an engine opened while loops run (several
// brokers in one test process) sees the raised value in GOMAXPROCS. Setting
// GOMAXPROCS ends the runtime's tracking of the CPU limit (Go 1.25), as
// any explicit setting does.
var loopProcs struct {
	sync.Mutex
	base  int // GOMAXPROCS before the first loop raised it
	loops int // loops alive
}

// addLoopProc raises GOMAXPROCS by one for a loop starting.
func addLoopProc() {
	loopProcs.Lock()
	defer loopProcs.Unlock()
	if loopProcs.loops == 0 {
		loopProcs.base = runtime.GOMAXPROCS(0)
	}
	loopProcs.loops++
	runtime.GOMAXPROCS(loopProcs.base + loopProcs.loops)
}

// releaseLoopProc gives back a loop's P.
func releaseLoopProc() {
	loopProcs.Lock()
	defer loopProcs.Unlock()
	loopProcs.loops--
	runtime.GOMAXPROCS(loopProcs.base + loopProcs.loops)
}

// baseProcs is GOMAXPROCS without the loops' Ps.
func baseProcs() int {
	loopProcs.Lock()
	defer loopProcs.Unlock()
	if loopProcs.loops > 0 {
		return loopProcs.base
	}
	return runtime.GOMAXPROCS(0)
}
