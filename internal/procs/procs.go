// Package procs keeps the count of Ps (GOMAXPROCS) that ringlog adds for
// threads that wait in system calls holding their P, so that whoever sizes
// work by the machine's CPUs (the engine's default shard count, netpoll's
// default loop count) sees GOMAXPROCS as it was before any was added.
//
// A goroutine locked to its thread that blocks in io_uring_enter (a
// netpoll uring loop, a shard that owns a ring) keeps its P for the whole
// wait: the goroutines its turn made runnable sit in that P's run queue
// until sysmon takes the P back, 20 us to 10 ms later. With one P added
// per such thread, readying a goroutine finds an idle P and a thread
// steals it at once (ARCHITECTURE.md, "A P per loop").
//
// The count is process-wide, as GOMAXPROCS is: several brokers, each with
// loops and shards, may share one test process. The first Add records
// GOMAXPROCS as the base, each Add raises it by one, each Release lowers it
// again, and the last Release restores the base. Setting GOMAXPROCS ends the
// runtime's tracking of the CPU limit (Go 1.25), as any explicit setting
// does.
//
// Concurrency: every function may be called from any goroutine.
package procs

import (
	"runtime"
	"sync"
)

var state struct {
	sync.Mutex
	base  int // GOMAXPROCS before the first Add raised it
	added int // Ps added and not released
}

// Add raises GOMAXPROCS by one, for a thread that waits in system calls
// holding its P. Each Add is undone by one Release.
func Add() {
	state.Lock()
	defer state.Unlock()
	if state.added == 0 {
		state.base = runtime.GOMAXPROCS(0)
	}
	state.added++
	runtime.GOMAXPROCS(state.base + state.added)
}

// Release gives back a P that Add added.
func Release() {
	state.Lock()
	defer state.Unlock()
	if state.added == 0 {
		panic("procs: Release without Add")
	}
	state.added--
	runtime.GOMAXPROCS(state.base + state.added)
}

// Base is GOMAXPROCS without the Ps added: the CPUs the process may use,
// what sizes per-CPU work.
func Base() int {
	state.Lock()
	defer state.Unlock()
	if state.added > 0 {
		return state.base
	}
	return runtime.GOMAXPROCS(0)
}

// Added is the number of Ps added and not released.
func Added() int {
	state.Lock()
	defer state.Unlock()
	return state.added
}
