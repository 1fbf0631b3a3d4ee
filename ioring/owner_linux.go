//go:build linux

package ioring

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// An Owner is a ring and the goroutine that owns it: the meeting point of
// the layers that put I/O on one thread's ring (the engine's shard and
// netpoll's connections) without knowing each other. Handlers register on
// it and get a tag; a request's user data carries the tag in its top byte
// (UserData), and each turn dispatches every completion to the handler of
// its tag. Work posted from other goroutines (Post) runs on the owner's
// goroutine between turns, and the hooks registered with AddHook run at
// every turn. The owner waits in io_uring_enter alone, with a timeout for
// its timers (IORING_ENTER_EXT_ARG).
//
// The ring is a NetRing (SINGLE_ISSUER, DEFER_TASKRUN): the goroutine that
// calls NewOwner must be locked to its OS thread and be the only one to
// call the methods documented "owner's goroutine".
//
// Waking an owner that waits: another owner of the same group queues an
// IORING_OP_MSG_RING in its own ring, submitted with its next turn (no
// system call of its own); any other goroutine writes an eventfd that the
// owner always has a read of in its ring. Either is made only by the
// poster that takes the owner's sleeping flag from true to false, so a
// burst of posts costs one wake and a busy owner none. A MSG_RING that
// fails comes back to its sender as a completion, which then writes the
// target's eventfd: the poster took the flag, so no one else would wake
// the target, and a lost doorbell is an owner asleep with work posted.
type Owner struct {
	g    *OwnerGroup
	idx  int // the owner's place in its group, in its doorbells' user data
	ring *NetRing
	tid  int // the owner's thread

	handlers [256]Handler // by tag; tag 0 is the owner's own
	hooks    []*hook
	groups   uint16 // provided buffer groups handed out

	efd      int // the eventfd of wakes by goroutines that are no owners
	efdb     []byte
	wakeRead bool // the eventfd read is in the ring

	// bells are the owners of the group to ring at this owner's next
	// enter (the posts to them found them sleeping).
	bells []*Owner

	// closers run when the owner closes (OnClose).
	closers []*hook

	// skipWait: the turn under way does not block (SkipWait).
	skipWait bool

	// err is the ring's failure (a Turn's io_uring_enter that failed);
	// nil while it works. Any goroutine (Err).
	err atomic.Pointer[error]

	// sleeping is set while the owner may block in the ring. Any goroutine.
	sleeping atomic.Bool

	mu     sync.Mutex // the inbox and efd, from any goroutine
	posted []func()
	spare  []func()
	closed bool

	stats ownerStats
}

// OwnerStats counts an owner's wakes, for tests and metrics.
type OwnerStats struct {
	// Turns is the number of turns; Waits those that blocked in the ring.
	Turns, Waits int64
	// BellsSent are the MSG_RING doorbells this owner queued for others,
	// BellsReceived those that reached it; EventfdWakes the eventfd
	// writes that woke it. BellsFailed are this owner's doorbells that
	// the kernel refused (each followed by an eventfd write to the
	// target).
	BellsSent, BellsReceived, EventfdWakes, BellsFailed int64
	// DiskSyncs are the fsyncs and fdatasyncs of the owner's DiskIO that
	// completed successfully, counted as their completions are reaped
	// (before whoever waits on them learns they are done).
	DiskSyncs int64
}

type ownerStats struct {
	turns, waits, bells, bellsIn, efdWakes, bellsFailed, diskSyncs atomic.Int64
}

// Handler gets a completion whose user data carries its tag; UserData in
// c is the value the handler gave UserData, without the tag. It runs on
// the owner's goroutine and may queue new requests.
type Handler func(c NetCQE)

type hook struct {
	fn   func()
	busy func() bool
}

// User data of the owner's own requests (tag 0).
const (
	ownWake = 1 // the eventfd read
	ownBell = 2 // a MSG_RING doorbell: posted into this ring by another
	ownStop = 3 // the cancellation of the eventfd read at Close
	// ownBellSent | target's idx << 8: a doorbell this owner sent, whose
	// completion comes back only if it failed.
	ownBellSent = 4
	tagBits     = 56
)

// Owner ring sizes: as netpoll's loops (a turn's sends and receives in
// the SQ; multishot receives post many completions per SQE).
const (
	ownerEntries   = 1024
	ownerCQEntries = 8192
)

// OwnerGroup is a set of owners that ring each other with MSG_RING: the
// shards of one engine, the loops of one netpoll server. A ring's
// descriptor is closed only when the group closes (after every owner's
// goroutine ended), so that a doorbell already queued by one member never
// reaches a descriptor number that another file reused.
type OwnerGroup struct {
	mu      sync.Mutex
	members []*Owner
	closed  bool

	// For tests: cqEntries, when set, sizes the owners' completion
	// queues (a tiny CQ); bellFlags are put in every doorbell's
	// msg_ring_flags, where an unknown flag makes the kernel fail it
	// (EINVAL), a real failed MSG_RING through the real path.
	cqEntries uint32
	bellFlags atomic.Uint32
}

// NewOwnerGroup returns an empty group.
func NewOwnerGroup() *OwnerGroup { return &OwnerGroup{} }

// owners finds the owner running on a thread, for Post's doorbell. Any
// goroutine.
var owners sync.Map // tid -> *Owner

// ProbeOwner checks what an Owner needs beyond ProbeNet: the MSG_RING
// opcode (Linux 5.18; to a DEFER_TASKRUN ring, 6.x). "" when it works.
func ProbeOwner() string {
	if why := ProbeNet(); why != "" {
		return why
	}
	r, err := setupRing(2)
	if err != nil {
		return setupFailure(errors.Unwrap(err))
	}
	defer r.close()
	return r.lacks(opName{opMsgRing, "MSG_RING"})
}

// NewOwner creates an owner in g on the calling goroutine, which must be
// locked to its OS thread and stay so until Close.
func (g *OwnerGroup) NewOwner() (*Owner, error) {
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	cq := uint32(ownerCQEntries)
	if g.cqEntries != 0 {
		cq = g.cqEntries
	}
	ring, err := NewNetRing(min(ownerEntries, cq), cq)
	if err != nil {
		return nil, err
	}
	o := &Owner{g: g, ring: ring, tid: unix.Gettid(), efd: -1, efdb: make([]byte, 8)}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		_ = ring.Close()
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	o.efd = efd
	if err := o.armWake(); err != nil {
		_ = unix.Close(efd)
		_ = ring.Close()
		return nil, err
	}
	g.mu.Lock()
	o.idx = len(g.members)
	g.members = append(g.members, o)
	g.mu.Unlock()
	owners.Store(o.tid, o)
	return o, nil
}

// member is the owner at idx, or nil once the group closed. Any goroutine.
func (g *OwnerGroup) member(idx int) *Owner {
	g.mu.Lock()
	defer g.mu.Unlock()
	if idx < 0 || idx >= len(g.members) {
		return nil
	}
	return g.members[idx]
}

// Close stops the owner (owner's goroutine): later posts fail with
// ErrClosed, posted work not run is dropped, the eventfd read is
// cancelled and reaped. Every handler must have finished its requests. The
// ring itself is released by the group's Close.
func (o *Owner) Close() {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return
	}
	o.closed = true
	o.posted = nil
	o.mu.Unlock()
	// Whoever is still registered learns that the owner is gone (a
	// netpoll loop abandons its connections) before the owner's ring
	// stops being turned.
	for len(o.closers) > 0 {
		c := o.closers[0]
		o.closers = o.closers[1:]
		c.fn()
	}
	owners.CompareAndDelete(o.tid, o)
	if o.wakeRead && o.ring.CancelFD(o.efd, ownStop) == nil {
		for deadline := time.Now().Add(time.Second); o.wakeRead && time.Now().Before(deadline); {
			if o.ring.EnterTimeout(100*time.Millisecond) != nil {
				break
			}
			o.ring.Reap(func(c NetCQE) {
				if c.UserData == ownWake {
					o.wakeRead = false
				}
			})
		}
	}
	o.mu.Lock()
	_ = unix.Close(o.efd)
	o.efd = -1
	o.mu.Unlock()
	// The thread's registration of the ring goes now, on the thread; the
	// ring itself when the group closes.
	_ = o.ring.r.unregisterRing()
}

// Close releases the rings of every owner of the group. Each owner's
// goroutine must have ended (after Owner.Close), so that none submits
// again.
func (g *OwnerGroup) Close() error {
	g.mu.Lock()
	members := g.members
	g.members, g.closed = nil, true
	g.mu.Unlock()
	var errs []error
	for _, o := range members {
		errs = append(errs, o.ring.Close())
	}
	return errors.Join(errs...)
}

// Ring is the owner's ring (owner's goroutine).
func (o *Owner) Ring() *NetRing { return o.ring }

// KeepP says that the owner's goroutine counts a P of its own
// (internal/procs): its waits in the ring then keep that P rather than
// offer it to the runtime's sysmon (ring.enter). Owner's goroutine, before
// its first Turn.
func (o *Owner) KeepP() { o.ring.r.keepP = true }

// TurnIdle is a Turn whose wait, if it waits, is an ordinary system call
// even on an owner that keeps its P (KeepP): the P is offered back to the
// runtime while the thread sleeps, as a goroutine parked on a channel
// gives its P up. For an owner with nothing of its own in flight, whose
// wait may last until its next timer: a kept wait is seen by sysmon as a
// goroutine running without end, preempted every 10 ms, and keeps sysmon
// polling (owner's goroutine).
func (o *Owner) TurnIdle(timeout time.Duration) error {
	keep := o.ring.r.keepP
	o.ring.r.keepP = false
	err := o.Turn(timeout)
	o.ring.r.keepP = keep
	return err
}

// Stats returns the owner's counters. Any goroutine.
func (o *Owner) Stats() OwnerStats {
	return OwnerStats{Turns: o.stats.turns.Load(), Waits: o.stats.waits.Load(),
		BellsSent: o.stats.bells.Load(), BellsReceived: o.stats.bellsIn.Load(), EventfdWakes: o.stats.efdWakes.Load(),
		BellsFailed: o.stats.bellsFailed.Load(), DiskSyncs: o.stats.diskSyncs.Load()}
}

// DiskIO returns an IO whose requests go in the owner's ring, beside the
// network's (owner's goroutine, and the IO is the owner's goroutine's
// alone: the ring is SINGLE_ISSUER). Its SQEs are submitted by the next
// io_uring_enter of the owner, a turn's or the IO's own Wait, so one
// enter carries a turn's disk and network requests; its completions are
// dispatched with the others (a turn hands them to the IO, and a later
// Wait, even with a zero timeout, returns them). Wait enters the owner's
// ring itself when it must wait, dispatching whatever else completes to
// its handlers. Close waits for its requests and unregisters it; the ring
// stays the owner's. Once the owner's ring failed or closed, the IO fails
// (the fate of what was in flight is unknown).
func (o *Owner) DiskIO(cfg Config) (IO, error) {
	if o.ring.closed {
		return nil, ErrClosed
	}
	if o.ring.r.features&featExtArg == 0 {
		return nil, errors.New("kernel lacks IORING_FEAT_EXT_ARG (Linux 5.11 or newer is needed)")
	}
	u := &uringIO{r: o.ring.r, writes: cfg.Writes, own: o}
	tag, err := o.Register(u.handle)
	if err != nil {
		return nil, err
	}
	u.tag = tag
	return u, nil
}

// Err is the failure of the owner's ring (a turn whose io_uring_enter
// failed), nil while it works. A closer (OnClose) reads it to tell a
// failed ring from an owner that stopped. Any goroutine.
func (o *Owner) Err() error {
	if p := o.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Register adds h and returns its tag (owner's goroutine).
func (o *Owner) Register(h Handler) (uint8, error) {
	for tag := 1; tag < len(o.handlers); tag++ {
		if o.handlers[tag] == nil {
			o.handlers[tag] = h
			return uint8(tag), nil
		}
	}
	return 0, fmt.Errorf("ioring: owner has %d handlers already", len(o.handlers)-1)
}

// Unregister removes the handler of tag; its requests must all have
// completed (owner's goroutine).
func (o *Owner) Unregister(tag uint8) { o.handlers[tag] = nil }

// UserData is the user data of a request of the handler of tag: v (below
// 2^56) with the tag on top.
func UserData(tag uint8, v uint64) uint64 { return uint64(tag)<<tagBits | v }

// BufferGroup hands out a provided buffer group id of the ring, for
// NetRing.RegisterBufRing (owner's goroutine).
func (o *Owner) BufferGroup() uint16 {
	g := o.groups
	o.groups++
	return g
}

// AddHook adds fn to run at every turn, before the wait (owner's
// goroutine); busy, when not nil, tells the owner not to block in the ring
// because fn has work (it may be called after the sleeping flag is set,
// so whoever gives fn work must call Wake after making it visible). The
// returned function removes the hook.
func (o *Owner) AddHook(fn func(), busy func() bool) (remove func()) {
	h := &hook{fn: fn, busy: busy}
	o.hooks = append(o.hooks, h)
	return func() {
		for i, x := range o.hooks {
			if x == h {
				o.hooks = append(o.hooks[:i], o.hooks[i+1:]...)
				return
			}
		}
	}
}

// OnClose adds fn to run on the owner's goroutine when it closes while fn
// is still registered (owner's goroutine); the returned function removes
// it. A handler that the owner's end would strand (requests never reaped,
// a Close waiting for a detach that cannot come) gives up there.
func (o *Owner) OnClose(fn func()) (remove func()) {
	h := &hook{fn: fn}
	o.closers = append(o.closers, h)
	return func() {
		for i, x := range o.closers {
			if x == h {
				o.closers = append(o.closers[:i], o.closers[i+1:]...)
				return
			}
		}
	}
}

// Poll waits at most timeout for completions and dispatches them, without
// the turn's posted work and hooks (owner's goroutine): for a closer
// (OnClose) that must see its requests finish while the owner closes.
func (o *Owner) Poll(timeout time.Duration) error {
	if err := o.ring.EnterTimeout(timeout); err != nil {
		return err
	}
	o.ring.Reap(o.dispatch)
	return nil
}

// SkipWait makes the turn under way return without blocking in the ring
// (owner's goroutine): a hook that changed what its owner's caller should
// do next calls it.
func (o *Owner) SkipWait() { o.skipWait = true }

// Post queues fn to run on the owner's goroutine at its next turn and
// wakes the owner if it waits. ErrClosed once the owner closed (fn then
// never runs). Any goroutine, the owner's included.
func (o *Owner) Post(fn func()) error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return ErrClosed
	}
	o.posted = append(o.posted, fn)
	o.mu.Unlock()
	o.Wake()
	return nil
}

// Wake rings the owner's doorbell if it may be blocked in the ring (or is
// about to be), after work for it was made visible. Any goroutine.
func (o *Owner) Wake() {
	if !o.sleeping.Load() || !o.sleeping.CompareAndSwap(true, false) {
		return
	}
	// The caller's thread tells whether it is an owner of the group,
	// which can queue a MSG_RING for its next enter, or any other
	// goroutine, which writes the eventfd. gettid is made only here,
	// when a wake is needed.
	if v, ok := owners.Load(unix.Gettid()); ok {
		from := v.(*Owner)
		if from == o {
			return // the owner itself: it is not waiting
		}
		if from.g == o.g {
			from.bells = append(from.bells, o)
			return
		}
	}
	o.writeEventfd()
}

// Current reports whether the caller runs on the owner's thread (a
// handler, a hook, posted work, or the owner's own loop). It costs a
// gettid system call. Any goroutine.
func (o *Owner) Current() bool {
	v, ok := owners.Load(unix.Gettid())
	return ok && v.(*Owner) == o
}

// Current returns the owner of g that runs on the calling thread, or nil
// when the caller is no owner of g. It costs a gettid system call. Any
// goroutine.
func (g *OwnerGroup) Current() *Owner {
	v, ok := owners.Load(unix.Gettid())
	if !ok || v.(*Owner).g != g {
		return nil
	}
	return v.(*Owner)
}

// writeEventfd wakes the owner through its eventfd. The write is made
// under the inbox's lock, which Close takes to close the descriptor: a
// late wake must never write into whatever file reused its number.
func (o *Owner) writeEventfd() {
	one := [8]byte{1}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.efd < 0 {
		return
	}
	o.stats.efdWakes.Add(1)
	for {
		if _, err := unix.Write(o.efd, one[:]); err != unix.EINTR {
			return
		}
	}
}

// armWake queues the read of the wake eventfd: eventfd reads can be
// attempted without blocking, so the ring polls it rather than handing
// the read to a worker thread.
func (o *Owner) armWake() error {
	if err := o.ring.Read(o.efd, o.efdb, ownWake); err != nil {
		return err
	}
	o.wakeRead = true
	return nil
}

// RunPosted runs the work posted so far (owner's goroutine); Turn calls it.
func (o *Owner) RunPosted() {
	o.mu.Lock()
	work := o.posted
	o.posted = o.spare[:0]
	o.mu.Unlock()
	for _, fn := range work {
		fn()
	}
	clear(work)
	o.spare = work[:0]
}

func (o *Owner) hasPosted() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.posted) > 0
}

// Turn is one turn of the owner (owner's goroutine): it runs the posted
// work and the hooks, then submits what they queued (and the doorbells of
// other owners) and waits in the same io_uring_enter for a completion, at
// most timeout (0: only submits and reaps; negative: no limit), and
// dispatches every completion to its handler. It does not wait when work
// is posted or a hook says it is busy.
func (o *Owner) Turn(timeout time.Duration) error {
	o.stats.turns.Add(1)
	o.RunPosted()
	for i := 0; i < len(o.hooks); i++ {
		o.hooks[i].fn()
	}
	if o.skipWait {
		o.skipWait = false
		timeout = 0
	}
	if timeout != 0 {
		o.sleeping.Store(true)
		if o.hasPosted() || o.anyBusy() {
			timeout = 0
			o.sleeping.Store(false)
		}
	}
	if err := o.ringBells(); err != nil {
		o.sleeping.Store(false)
		o.failed(err)
		return err
	}
	var err error
	switch {
	case timeout == 0:
		err = o.ring.Enter(false)
	case timeout < 0:
		o.stats.waits.Add(1)
		err = o.ring.Enter(true)
	default:
		o.stats.waits.Add(1)
		err = o.ring.EnterTimeout(timeout)
	}
	o.sleeping.Store(false)
	if err != nil {
		o.failed(err)
		return err
	}
	o.ring.Reap(o.dispatch)
	return nil
}

// failed records the ring's failure (Err); the first one stays.
func (o *Owner) failed(err error) {
	o.err.CompareAndSwap(nil, &err)
}

func (o *Owner) anyBusy() bool {
	for _, h := range o.hooks {
		if h.busy != nil && h.busy() {
			return true
		}
	}
	return false
}

// ringBells queues a MSG_RING for each owner of the group that a post
// from this one found sleeping. The target's CQE (tag 0, ownBell) only
// wakes it; the message itself is in the target's inbox. A doorbell the
// kernel refuses comes back with the target's place in the group
// (bellFailed).
func (o *Owner) ringBells() error {
	for _, t := range o.bells {
		if err := o.ring.msgRing(t.ring.r.fd, 0, ownBell, ownBellSent|uint64(t.idx)<<8, o.g.bellFlags.Load()); err != nil {
			// The SQ was full and submitting it failed: the ring is
			// broken, and the targets still need their wake.
			for _, t := range o.bells {
				t.writeEventfd()
			}
			clear(o.bells)
			o.bells = o.bells[:0]
			return err
		}
		o.stats.bells.Add(1)
	}
	clear(o.bells)
	o.bells = o.bells[:0]
	return nil
}

// bellFailed wakes through its eventfd the owner at idx, whose doorbell
// the kernel refused: a MSG_RING may fail (ENOMEM,
// EOWNERDEAD; and on kernels before the remote posting of 6.x, EOVERFLOW
// or EAGAIN when the target's CQ is full), and the poster that took the
// target's sleeping flag was the only one to wake it. The eventfd is
// always armed, so the wake is not lost; a spurious one costs a turn.
func (o *Owner) bellFailed(idx int) {
	o.stats.bellsFailed.Add(1)
	if t := o.g.member(idx); t != nil {
		t.writeEventfd()
	}
}

// dispatch hands a completion to the handler of its tag.
func (o *Owner) dispatch(c NetCQE) {
	tag := uint8(c.UserData >> tagBits)
	c.UserData &= 1<<tagBits - 1
	if tag == 0 {
		if c.UserData == ownWake {
			o.wakeRead = false
			if o.ring.closed {
				return
			}
			o.mu.Lock()
			closed := o.closed
			o.mu.Unlock()
			if !closed {
				if err := o.armWake(); err != nil {
					// The next Turn's enter reports the broken ring.
					o.wakeRead = false
				}
			}
		}
		if c.UserData == ownBell && c.Res >= 0 {
			o.stats.bellsIn.Add(1)
		}
		if c.UserData&0xff == ownBellSent && c.Res < 0 {
			o.bellFailed(int(c.UserData >> 8))
		}
		return
	}
	if h := o.handlers[tag]; h != nil {
		h(c)
	}
}
