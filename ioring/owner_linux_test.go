//go:build linux

package ioring

import (
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"ringlog/internal/procs"
)

// runOwner starts an owner of g on a goroutine locked to its thread that
// turns until stop is closed, waiting without limit in each turn. It
// returns the owner once it is up; done closes when the owner ended.
func runOwner(t *testing.T, g *OwnerGroup, stop <-chan struct{}) (*Owner, <-chan struct{}) {
	t.Helper()
	return startOwner(t, g, stop, false, false)
}

// runKeptOwner is runOwner for an owner whose goroutine counts a P of its
// own and keeps it through its waits (KeepP), as netpoll's loops and the
// ring-owning shards do.
func runKeptOwner(t *testing.T, g *OwnerGroup, stop <-chan struct{}) (*Owner, <-chan struct{}) {
	t.Helper()
	return startOwner(t, g, stop, true, false)
}

// runIdleOwner is runKeptOwner whose turns are TurnIdle's, as a shard's
// are once it has written nothing for a while.
func runIdleOwner(t *testing.T, g *OwnerGroup, stop <-chan struct{}) (*Owner, <-chan struct{}) {
	t.Helper()
	return startOwner(t, g, stop, true, true)
}

func startOwner(t *testing.T, g *OwnerGroup, stop <-chan struct{}, keepP, idle bool) (*Owner, <-chan struct{}) {
	t.Helper()
	up := make(chan *Owner, 1)
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if keepP {
			procs.Add()
			defer procs.Release()
		}
		o, err := g.NewOwner()
		if err != nil {
			errc <- err
			return
		}
		if keepP {
			o.KeepP()
		}
		up <- o
		stopping := false
		o.AddHook(func() {
			select {
			case <-stop:
				stopping = true
			default:
			}
		}, func() bool { return stopping })
		turn := o.Turn
		if idle {
			turn = o.TurnIdle
		}
		for !stopping {
			if err := turn(-1); err != nil {
				t.Errorf("turn: %v", err)
				break
			}
		}
		o.Close()
	}()
	select {
	case o := <-up:
		return o, done
	case err := <-errc:
		t.Fatalf("owner: %v", err)
	}
	return nil, nil
}

// waitSleeping waits until o blocks in io_uring_enter (its sleeping flag
// set and its thread asleep in the kernel for a while).
func waitSleeping(t *testing.T, o *Owner) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !o.sleeping.Load() {
		if time.Now().After(deadline) {
			t.Fatal("owner never waited in its ring")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // into the system call
	if !o.sleeping.Load() {
		t.Fatal("owner woke by itself")
	}
}

// TestOwnerDoorbellWakesBlockedOwner: an owner blocked in io_uring_enter
// without a timeout runs work posted to it by another owner of its group,
// woken by the MSG_RING doorbell that the poster's next turn submits (no
// eventfd write), and by a goroutine that is no owner through the eventfd.
func TestOwnerDoorbellWakesBlockedOwner(t *testing.T) {
	if why := ProbeOwner(); why != "" {
		t.Fatalf("io_uring owner unavailable: %s", why)
	}
	g := NewOwnerGroup()
	stop := make(chan struct{})
	target, targetDone := runOwner(t, g, stop)
	sender, senderDone := runOwner(t, g, stop)
	defer func() {
		close(stop)
		target.writeEventfd()
		sender.writeEventfd()
		<-targetDone
		<-senderDone
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	}()

	// From the sender's thread: the post finds the target sleeping and
	// queues a doorbell on the sender's ring.
	waitSleeping(t, target)
	ran := make(chan int, 1)
	if err := sender.Post(func() {
		if err := target.Post(func() { ran <- unix.Gettid() }); err != nil {
			t.Error(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case tid := <-ran:
		if tid != target.tid {
			t.Fatalf("posted work ran on thread %d, want the owner's %d", tid, target.tid)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the doorbell did not wake the owner blocked in io_uring_enter")
	}
	if s := target.Stats(); s.EventfdWakes != 0 {
		t.Fatalf("target woken by %d eventfd writes, want the doorbell alone", s.EventfdWakes)
	}
	if s := sender.Stats(); s.BellsSent != 1 {
		t.Fatalf("sender rang %d doorbells, want 1", s.BellsSent)
	}

	// From a goroutine that is no owner: the eventfd.
	waitSleeping(t, target)
	var n atomic.Int32
	if err := target.Post(func() { n.Add(1); ran <- 0 }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the eventfd did not wake the owner")
	}
	if s := target.Stats(); s.EventfdWakes != 1 {
		t.Fatalf("%d eventfd wakes, want 1", s.EventfdWakes)
	}
}

// TestOwnerTurnTimeout: a turn with a timeout returns once it passed
// (IORING_ENTER_EXT_ARG), the owner's timers.
func TestOwnerTurnTimeout(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	g := NewOwnerGroup()
	o, err := g.NewOwner()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := o.Turn(30 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 25*time.Millisecond {
		t.Fatalf("turn returned after %v, before its 30ms timeout", d)
	}
	o.Close()
	if err := o.Post(func() {}); err != ErrClosed {
		t.Fatalf("post after close: %v, want ErrClosed", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOwnerDispatchByTag: completions reach the handler whose tag their
// user data carries, with the tag stripped.
func TestOwnerDispatchByTag(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	g := NewOwnerGroup()
	o, err := g.NewOwner()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	defer o.Close()
	var got [3][]uint64
	var tags [3]uint8
	for i := range tags {
		i := i
		if tags[i], err = o.Register(func(c NetCQE) { got[i] = append(got[i], c.UserData) }); err != nil {
			t.Fatal(err)
		}
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	// Each handler polls the writable socket with user data of its own.
	for i, tag := range tags {
		if err := o.Ring().PollAdd(fds[1], unix.POLLOUT, UserData(tag, uint64(100+i))); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); len(got[0])+len(got[1])+len(got[2]) < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("completions: %v", got)
		}
		if err := o.Turn(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	for i := range got {
		if len(got[i]) != 1 || got[i][0] != uint64(100+i) {
			t.Fatalf("handler %d got %v, want [%d]", i, got[i], 100+i)
		}
	}
}

// TestOwnerFailedDoorbellFallsBackToEventfd: a doorbell the kernel
// refuses comes back to its sender, which wakes the target through its
// eventfd; the target, blocked in io_uring_enter without a timeout, runs
// the work posted to it. The owners have a CQ of 2 entries, and the
// target is rung while its CQ holds completions it has not reaped. On
// Linux 6.18 a full CQ alone does not fail a MSG_RING to a DEFER_TASKRUN
// ring (the completion waits in the overflow list), so the failure is an
// unknown msg_ring_flags bit, which the kernel answers with EINVAL.
// Ignoring the failed completion (the wake lost) fails the test.
func TestOwnerFailedDoorbellFallsBackToEventfd(t *testing.T) {
	if why := ProbeOwner(); why != "" {
		t.Fatalf("io_uring owner unavailable: %s", why)
	}
	g := NewOwnerGroup()
	g.cqEntries = 2
	stop := make(chan struct{})
	target, targetDone := runOwner(t, g, stop)
	sender, senderDone := runOwner(t, g, stop)
	defer func() {
		close(stop)
		target.writeEventfd()
		sender.writeEventfd()
		<-targetDone
		<-senderDone
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	}()
	ran := make(chan int, 64)
	postFromSender := func(n int) {
		t.Helper()
		waitSleeping(t, target)
		if err := sender.Post(func() {
			for i := range n {
				if err := target.Post(func() { ran <- i }); err != nil {
					t.Error(err)
				}
			}
		}); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			select {
			case <-ran:
			case <-time.After(5 * time.Second):
				t.Fatalf("%d of %d posts ran: a wake of the owner blocked in io_uring_enter was lost (target %+v, sender %+v)",
					i, n, target.Stats(), sender.Stats())
			}
		}
	}
	// Doorbells that work, into a tiny CQ.
	for range 5 {
		postFromSender(8)
	}
	if s := sender.Stats(); s.BellsSent == 0 || s.BellsFailed != 0 {
		t.Fatalf("sender %+v: want doorbells sent, none failed", s)
	}
	// Doorbells the kernel refuses.
	g.bellFlags.Store(1 << 7)
	wakes := target.Stats().EventfdWakes
	for range 3 {
		postFromSender(8)
	}
	if s := sender.Stats(); s.BellsFailed == 0 {
		t.Fatalf("sender %+v: no doorbell failed", s)
	}
	if s := target.Stats(); s.EventfdWakes == wakes {
		t.Fatalf("target %+v: not woken by its eventfd after failed doorbells", s)
	}
}

// TestOwnerDiskIO: an owner's DiskIO puts file writes and syncs in the
// owner's ring. Submit leaves them for the owner's next io_uring_enter
// (nothing completes before a turn), the turn dispatches their
// completions to the IO (Wait with no timeout then returns them), the
// owner counts the syncs, and Wait alone (Do) enters the owner's ring when
// it must wait. Both write modes.
func TestOwnerDiskIO(t *testing.T) {
	if why := ProbeOwner(); why != "" {
		t.Fatalf("io_uring ring owners unavailable: %s", why)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, mode := range []WriteMode{WritesInline, WritesInRing} {
		g := NewOwnerGroup()
		o, err := g.NewOwner()
		if err != nil {
			t.Fatal(err)
		}
		io, err := o.DiskIO(Config{Writes: mode})
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(t.TempDir(), "f"))
		if err != nil {
			t.Fatal(err)
		}
		op := &Op{Kind: OpWrite, File: f, Bufs: [][]byte{[]byte("hello "), []byte("ring")}, Sync: SyncData}
		if err := io.Submit(op); err != nil {
			t.Fatal(err)
		}
		if got, _ := io.Wait(nil, 0, 0); len(got) != 0 || o.Stats().DiskSyncs != 0 {
			t.Fatalf("mode %d: %d ops and %d syncs complete before the owner entered its ring", mode, len(got), o.Stats().DiskSyncs)
		}
		var done []*Op
		for turns := 0; len(done) == 0; turns++ {
			if turns == 100 {
				t.Fatalf("mode %d: the write and its sync did not complete in 100 turns", mode)
			}
			if err := o.Turn(time.Second); err != nil {
				t.Fatal(err)
			}
			if done, err = io.Wait(nil, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		if op.Err != nil || op.N != 10 || o.Stats().DiskSyncs != 1 {
			t.Fatalf("mode %d: write %d bytes, err %v, %d syncs counted", mode, op.N, op.Err, o.Stats().DiskSyncs)
		}
		if err := Do(io, &Op{Kind: OpSync, File: f, Sync: SyncFull}); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(f.Name()); err != nil || string(b) != "hello ring" || o.Stats().DiskSyncs != 2 {
			t.Fatalf("mode %d: file %q (%v), %d syncs counted", mode, b, err, o.Stats().DiskSyncs)
		}
		if err := io.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		o.Close()
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
