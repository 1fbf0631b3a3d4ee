//go:build linux

package ioring

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

// neverIdle keeps kept waits raw however long they last, for the test:
// otherwise a wait that sysmon's preemption interrupts after idleWait goes
// on as an ordinary system call (TestIdleKeptWaitGivesItsPUp).
func neverIdle(t *testing.T) {
	saved := idleWait
	idleWait = time.Hour
	t.Cleanup(func() { idleWait = saved })
}

// inSyscalls is the runtime's count of goroutines in system calls.
func inSyscalls() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines/not-in-go:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestKeptWaitLetsTheWorldStop: an owner blocked without a timeout in a
// kept wait (a raw system call the runtime does not see) does not hold up
// a garbage collection, whose stops of the world and stack scans signal
// its thread; and it goes on turning afterwards. Without the preemption
// point after EINTR the wait would go straight back into the kernel and
// runtime.GC would never return (the test binary's timeout ends it).
func TestKeptWaitLetsTheWorldStop(t *testing.T) {
	neverIdle(t)
	g := NewOwnerGroup()
	stop := make(chan struct{})
	o, done := runKeptOwner(t, g, stop)
	waitSleeping(t, o)
	for range 3 {
		runtime.GC()
	}
	ran := make(chan struct{})
	if err := o.Post(func() { close(ran) }); err != nil {
		t.Fatalf("post: %v", err)
	}
	<-ran
	close(stop)
	o.Wake()
	<-done
}

// TestKeptWaitKeepsItsP: the runtime counts a goroutine in a kept wait as
// running Go code on its P, not as in a system call (the state in which
// sysmon takes its P away), and one in an ordinary wait as in a system
// call. Read from the runtime's own scheduler metrics; how many run Go
// code moves with the runtime's own goroutines, how many are in system
// calls does not here.
func TestKeptWaitKeepsItsP(t *testing.T) {
	neverIdle(t)
	g := NewOwnerGroup()
	stop := make(chan struct{})
	before := inSyscalls()

	kept, keptDone := runKeptOwner(t, g, stop)
	waitSleeping(t, kept)
	if n := inSyscalls(); n != before {
		t.Errorf("owner in a kept wait: goroutines in system calls %d -> %d, want %d", before, n, before)
	}

	plain, plainDone := runOwner(t, g, stop)
	waitSleeping(t, plain)
	if n := inSyscalls(); n != before+1 {
		t.Errorf("owner in an ordinary wait: goroutines in system calls %d -> %d, want %d", before, n, before+1)
	}

	// TurnIdle's wait is an ordinary one on an owner that keeps its P,
	// from its start (neverIdle: not by the kept wait's idle rule).
	idle, idleDone := runIdleOwner(t, g, stop)
	waitSleeping(t, idle)
	if n := inSyscalls(); n != before+2 {
		t.Errorf("kept owner in TurnIdle's wait: goroutines in system calls %d -> %d, want %d", before, n, before+2)
	}
	close(stop)
	kept.Wake()
	plain.Wake()
	idle.Wake()
	<-keptDone
	<-plainDone
	<-idleDone
}

// TestIdleKeptWaitGivesItsPUp: a kept wait that lasts (an idle loop) goes
// on as an ordinary system call once sysmon's preemption interrupts it,
// rather than hold its P and be woken every 10 ms.
func TestIdleKeptWaitGivesItsPUp(t *testing.T) {
	g := NewOwnerGroup()
	stop := make(chan struct{})
	before := inSyscalls()
	o, done := runKeptOwner(t, g, stop)
	defer func() {
		close(stop)
		o.Wake()
		<-done
	}()
	waitSleeping(t, o)
	deadline := time.Now().Add(2 * time.Second)
	for inSyscalls() != before+1 {
		if time.Now().After(deadline) {
			t.Fatalf("an idle kept wait still holds its P after 2 s (goroutines in system calls %d, want %d)", inSyscalls(), before+1)
		}
		time.Sleep(time.Millisecond)
	}
}
