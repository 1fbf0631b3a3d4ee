//go:build linux

package ioring

import (
	"errors"
	"fmt"
	"io"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// opState is the per-op bookkeeping of the io_uring implementation. It
// lives inside Op so that submitting allocates nothing once an Op has been
// used: the iovec and result slices are reused.
type opState struct {
	slot     uint32
	iovs     []unix.Iovec // iovecs of the current attempt; referenced by SQEs
	parts    []part       // one per SQE of the current attempt
	pending  int          // SQEs of the current attempt not yet completed
	attempts int
}

// part is one SQE of an op's chain: a write covering want bytes, or the
// trailing sync (want < 0).
type part struct {
	want int
	res  int32
}

// uringIO implements IO over one ring. User data of each SQE is the op's
// slot in inflight (upper 48 bits) and the part index (lower 16 bits), so a
// completion finds its op without a map lookup.
type uringIO struct {
	r        *ring
	inflight []*Op // slot -> op; nil when free
	free     []uint32
	count    int   // ops submitted and not yet returned by Wait
	sqesOut  int   // SQEs handed to the kernel and not yet completed
	done     []*Op // completed ops waiting to be returned by Wait
	retry    []*Op // ops whose write was short; their remainder is resubmitted
	err      error // sticky ring failure
	closed   bool
	writes   WriteMode

	// own, when set, is the Owner whose ring this IO shares (Owner.DiskIO)
	// and tag the handler tag its requests carry: SQEs go in the owner's
	// ring and are submitted by its next io_uring_enter (a turn, or Wait),
	// together with the network's; completions reach complete through the
	// owner's dispatch. nil for an IO with a ring of its own.
	own *Owner
	tag uint8
}

func newUring(cfg Config) (*uringIO, error) {
	r, err := setupRing(cfg.entries())
	if err != nil {
		return nil, err
	}
	if r.features&featExtArg == 0 {
		r.close()
		return nil, errors.New("kernel lacks IORING_FEAT_EXT_ARG (Linux 5.11 or newer is needed)")
	}
	return &uringIO{r: r, writes: cfg.Writes}, nil
}

func (u *uringIO) Kind() Kind    { return Uring }
func (u *uringIO) keepP()        { u.r.keepP = true }
func (u *uringIO) InFlight() int { return u.count }

const partBits = 16

func (u *uringIO) Submit(ops ...*Op) error {
	if u.closed {
		return ErrClosed
	}
	if err := u.ownerGone(); err != nil {
		return err
	}
	if u.err != nil {
		return u.err
	}
	for _, o := range ops {
		o.N, o.Err = 0, nil
		o.state.attempts = 0
		o.state.slot = u.takeSlot(o)
		u.count++
		if err := u.prepare(o); err != nil {
			return u.fail(err)
		}
	}
	if err := u.flush(); err != nil {
		return u.fail(err)
	}
	return u.resubmit()
}

// fail records a ring failure: the ring can no longer be trusted.
func (u *uringIO) fail(err error) error {
	if u.err == nil {
		u.err = fmt.Errorf("ioring: ring failed: %w", err)
	}
	return u.err
}

func (u *uringIO) takeSlot(o *Op) uint32 {
	if n := len(u.free); n > 0 {
		s := u.free[n-1]
		u.free = u.free[:n-1]
		u.inflight[s] = o
		return s
	}
	u.inflight = append(u.inflight, o)
	return uint32(len(u.inflight) - 1)
}

// prepare fills the SQEs of o's next attempt (all of a write when
// attempts == 0, else what is left after o.N bytes).
func (u *uringIO) prepare(o *Op) error {
	st := &o.state
	st.parts = st.parts[:0]
	st.iovs = st.iovs[:0]
	var fd int32 = -1
	if o.Kind != OpNop {
		if o.File == nil {
			return u.completeNow(o, fmt.Errorf("ioring: %s without a file: %w", o.Kind, unix.EBADF))
		}
		fd = int32(o.File.Fd())
	}

	switch o.Kind {
	case OpNop:
		st.parts = append(st.parts, part{want: 0})
	case OpSync:
		st.parts = append(st.parts, part{want: -1})
	case OpRead:
		if len(o.Bufs) != 1 {
			return u.completeNow(o, fmt.Errorf("ioring: read wants one buffer, got %d: %w", len(o.Bufs), unix.EINVAL))
		}
		st.parts = append(st.parts, part{want: len(o.Bufs[0])})
	case OpWrite:
		if u.writes == WritesInline && st.attempts == 0 && !o.Direct {
			// Copy into the page cache now; only the sync goes to the ring.
			n, err := writeAt(o.File, o.Bufs, o.Offset)
			o.N = n
			if err != nil {
				return u.completeNow(o, opError(o, errnoOf(err)))
			}
			if o.Sync == SyncNone {
				return u.completeNow(o, nil)
			}
			st.parts = append(st.parts, part{want: -1})
			break
		}
		// Skip the bytes a previous attempt wrote, then cut the rest into
		// writev parts of at most iovMax buffers.
		skip := o.N
		for _, b := range o.Bufs {
			if skip >= len(b) {
				skip -= len(b)
				continue
			}
			b = b[skip:]
			skip = 0
			st.iovs = append(st.iovs, unix.Iovec{Base: &b[0]})
			st.iovs[len(st.iovs)-1].SetLen(len(b))
		}
		for i := 0; i < len(st.iovs); i += iovMax {
			want := 0
			for _, v := range st.iovs[i:min(i+iovMax, len(st.iovs))] {
				want += int(v.Len)
			}
			st.parts = append(st.parts, part{want: want})
		}
		if o.Sync != SyncNone {
			st.parts = append(st.parts, part{want: -1})
		}
		if len(st.parts) == 0 { // nothing to write and no sync
			return u.completeNow(o, nil)
		}
	default:
		return u.completeNow(o, fmt.Errorf("ioring: unknown op kind %d: %w", o.Kind, unix.EINVAL))
	}
	if len(st.parts) >= 1<<partBits {
		return u.completeNow(o, fmt.Errorf("ioring: op needs %d SQEs: %w", len(st.parts), unix.E2BIG))
	}

	// A linked chain must go to the kernel in one submission, and the
	// completions it will post must fit in the CQ: make room first.
	need := uint32(len(st.parts))
	if need > u.r.sqEntries || int(need) > u.maxOut() {
		return u.completeNow(o, fmt.Errorf("ioring: op needs %d SQEs, ring has %d: %w", need, u.r.sqEntries, unix.E2BIG))
	}
	for u.r.sqFree() < need || u.sqesOut+u.unsubmitted()+int(need) > u.maxOut() {
		if err := u.makeRoom(); err != nil {
			return err
		}
	}

	iov := 0
	for i, p := range st.parts {
		s := u.r.next()
		s.fd = fd
		s.userData = uint64(st.slot)<<partBits | uint64(i)
		if u.own != nil {
			s.userData = UserData(u.tag, s.userData)
		}
		switch {
		case o.Kind == OpNop:
			s.opcode = opNop
		case p.want < 0: // sync
			s.opcode = opFsync
			if o.Sync == SyncData {
				s.opFlags = fsyncDatasync
			}
		case o.Kind == OpRead:
			s.opcode = opRead
			s.off = uint64(o.Offset)
			if len(o.Bufs[0]) > 0 {
				s.addr = uint64(uintptr(unsafe.Pointer(&o.Bufs[0][0])))
			}
			s.len = uint32(len(o.Bufs[0]))
		default: // a write part
			n := min(iovMax, len(st.iovs)-iov)
			s.off = uint64(o.Offset) + uint64(o.N) + uint64(writtenBefore(st.parts[:i]))
			if n == 1 {
				// One buffer: a plain WRITE spares the kernel the iovec
				// copy; from the staging arena, a WRITE_FIXED spares it
				// pinning the pages too.
				s.opcode = opWrite
				s.addr = uint64(uintptr(unsafe.Pointer(st.iovs[iov].Base)))
				s.len = uint32(st.iovs[iov].Len)
				if o.Direct {
					if idx, ok := u.r.fixedBuffer(unsafe.Pointer(st.iovs[iov].Base), int(st.iovs[iov].Len)); ok {
						s.opcode = opWriteFixed
						s.bufIndex = idx
						directWrites[directFixed].Add(1)
					} else {
						directWrites[directPlain].Add(1)
					}
				}
			} else {
				s.opcode = opWritev
				s.addr = uint64(uintptr(unsafe.Pointer(&st.iovs[iov])))
				s.len = uint32(n)
				if o.Direct {
					directWrites[directPlain].Add(1)
				}
			}
			iov += n
		}
		if i < len(st.parts)-1 {
			s.flags |= sqeIOLink
		}
	}
	st.pending = len(st.parts)
	st.attempts++
	if u.own != nil {
		// On an owner's ring the SQEs count as out from now: whichever
		// io_uring_enter comes next (the owner's turn) submits them.
		u.sqesOut += len(st.parts)
	}
	return nil
}

// maxOut is the most SQEs this IO keeps in flight: the CQ's size on a ring
// of its own, so that the CQ cannot overflow; on an owner's ring, whose
// CQ the network's multishot receives share, a quarter of it.
func (u *uringIO) maxOut() int {
	if u.own != nil {
		return max(int(u.r.cqEntries)/4, 1)
	}
	return int(u.r.cqEntries)
}

// unsubmitted is the number of SQEs filled and not yet counted in sqesOut
// (on an owner's ring they are counted when filled).
func (u *uringIO) unsubmitted() int {
	if u.own != nil {
		return 0
	}
	return int(u.r.pending())
}

func writtenBefore(parts []part) int {
	n := 0
	for _, p := range parts {
		if p.want > 0 {
			n += p.want
		}
	}
	return n
}

// completeNow finishes an op that never reaches the kernel.
func (u *uringIO) completeNow(o *Op, err error) error {
	o.Err = err
	u.inflight[o.state.slot] = nil
	u.free = append(u.free, o.state.slot)
	u.done = append(u.done, o)
	return nil
}

// makeRoom frees SQ or CQ capacity: it submits what is filled and, when
// that is not enough, waits for at least one completion. This is the
// back-pressure path: a caller that submits faster than the disk completes
// is held here.
func (u *uringIO) makeRoom() error {
	if u.own != nil {
		// The owner's ring: submit everything queued (the network's SQEs
		// too); when that frees neither the SQ nor any of this IO's
		// requests, wait for a completion. Completions go to their
		// handlers, as in a turn.
		n := u.own.ring
		out, free := u.sqesOut, u.r.sqFree()
		if err := n.Enter(false); err != nil {
			return err
		}
		n.Reap(u.own.dispatch)
		if u.sqesOut < out || u.r.sqFree() > free {
			return nil
		}
		if u.sqesOut == 0 {
			return errors.New("no room in the owner's ring and nothing of the disk's in flight")
		}
		if err := n.Enter(true); err != nil {
			return err
		}
		n.Reap(u.own.dispatch)
		return nil
	}
	free := u.r.sqFree()
	if err := u.flush(); err != nil {
		return err
	}
	if u.r.sqFree() > free {
		return nil
	}
	if u.sqesOut == 0 {
		return errors.New("no room in the ring and nothing in flight")
	}
	if err := u.r.waitCQE(-1); err != nil {
		return fmt.Errorf("io_uring_enter wait: %w", err)
	}
	u.reap()
	return nil
}

// flush hands every filled SQE to the kernel. EBUSY and EAGAIN mean the
// kernel wants completions consumed first: reap (waiting for one if none
// is posted yet) and try again.
func (u *uringIO) flush() error {
	if u.own != nil {
		return nil // the owner's next io_uring_enter submits them
	}
	for u.r.pending() > 0 || u.r.sqeHead != u.r.sqeTail {
		n, err := u.r.submit()
		u.sqesOut += n
		switch {
		case err == nil && n == 0:
			return errors.New("io_uring_enter consumed no SQE")
		case err == nil:
		case errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EAGAIN):
			if u.reap() == 0 && u.sqesOut > 0 {
				if werr := u.r.waitCQE(-1); werr != nil {
					return fmt.Errorf("io_uring_enter wait: %w", werr)
				}
				u.reap()
			}
		default:
			return fmt.Errorf("io_uring_enter submit: %w", err)
		}
	}
	return nil
}

// reap consumes every posted CQE and finishes the ops whose last SQE
// completed.
func (u *uringIO) reap() int {
	if u.own != nil {
		// The CQ is the owner's: every completion goes to its handler
		// (this IO's to complete, through handle).
		return u.own.ring.Reap(u.own.dispatch)
	}
	return u.r.reap(u.complete)
}

// handle is the owner's handler of this IO's tag.
func (u *uringIO) handle(c NetCQE) { u.complete(c.UserData, c.Res) }

func (u *uringIO) complete(userData uint64, res int32) {
	u.sqesOut--
	slot := uint32(userData >> partBits)
	o := u.inflight[slot]
	if o == nil {
		// The kernel answered for a request we do not know: an invariant
		// of this package is broken. Refuse to go on silently.
		u.fail(fmt.Errorf("completion for unknown slot %d", slot))
		return
	}
	st := &o.state
	p := &st.parts[userData&(1<<partBits-1)]
	p.res = res
	if u.own != nil && p.want < 0 && o.Kind != OpNop && res >= 0 {
		u.own.stats.diskSyncs.Add(1)
	}
	st.pending--
	if st.pending > 0 {
		return
	}
	if u.finish(o) {
		u.inflight[slot] = nil
		u.free = append(u.free, slot)
		u.done = append(u.done, o)
	} else {
		u.retry = append(u.retry, o)
	}
}

// finish evaluates the results of an op's attempt. It returns false when
// a write was short and the rest must be submitted again.
func (u *uringIO) finish(o *Op) bool {
	st := &o.state
	switch o.Kind {
	case OpNop, OpSync:
		if r := st.parts[0].res; r < 0 {
			o.Err = opError(o, unix.Errno(-r))
		}
		return true
	case OpRead:
		if r := st.parts[0].res; r < 0 {
			o.Err = opError(o, unix.Errno(-r))
		} else {
			o.N = int(r)
		}
		return true
	}
	// A write chain runs in order; a short part makes the kernel cancel
	// the rest of the chain (ECANCELED), so the bytes written are the
	// full parts before the first short one plus that part's count.
	progress := 0
	short := false
	for _, p := range st.parts {
		if p.want < 0 { // the sync: it ran only if every write was whole
			if !short && p.res < 0 {
				o.Err = opError(o, unix.Errno(-p.res))
			}
			continue
		}
		if short {
			continue
		}
		if p.res < 0 {
			if p.res != -int32(unix.ECANCELED) {
				o.N += progress
				o.Err = opError(o, unix.Errno(-p.res))
				return true
			}
			short = true
			continue
		}
		progress += int(p.res)
		if int(p.res) < p.want {
			short = true
		}
	}
	o.N += progress
	if !short {
		return true
	}
	if progress == 0 {
		o.Err = fmt.Errorf("ioring: write to %s at %d made no progress: %w", o.File.Name(), o.Offset+int64(o.N), io.ErrShortWrite)
		return true
	}
	return false
}

func opError(o *Op, errno unix.Errno) error {
	name := "<nil>"
	if o.File != nil {
		name = o.File.Name()
	}
	return fmt.Errorf("ioring: %s %s at %d: %w", o.Kind, name, o.Offset, errno)
}

// resubmit sends the remainder of short writes.
func (u *uringIO) resubmit() error {
	for len(u.retry) > 0 {
		batch := u.retry
		u.retry = nil
		for _, o := range batch {
			if err := u.prepare(o); err != nil {
				return u.fail(err)
			}
		}
		if err := u.flush(); err != nil {
			return u.fail(err)
		}
	}
	return nil
}

func (u *uringIO) Wait(out []*Op, minOps int, timeout time.Duration) ([]*Op, error) {
	if u.closed {
		return out, ErrClosed
	}
	minOps = min(minOps, u.count)
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		if err := u.ownerGone(); err != nil {
			return out, err
		}
		if u.err != nil {
			return out, u.err
		}
		u.reap()
		if err := u.resubmit(); err != nil {
			return out, err
		}
		if len(u.done) >= minOps || timeout == 0 {
			break
		}
		wait := time.Duration(-1)
		if timeout > 0 {
			wait = time.Until(deadline)
			if wait <= 0 {
				break
			}
		}
		if u.sqesOut == 0 {
			return out, u.fail(errors.New("waiting for completions with nothing in flight"))
		}
		if u.own != nil {
			// Submits what is queued on the owner's ring and waits;
			// the completions are dispatched by the reap above.
			var err error
			if wait < 0 {
				err = u.own.ring.Enter(true)
			} else {
				err = u.own.ring.EnterTimeout(wait)
			}
			if err != nil {
				return out, u.fail(fmt.Errorf("io_uring_enter wait: %w", err))
			}
			continue
		}
		if err := u.r.waitCQE(wait); err != nil {
			if errors.Is(err, unix.ETIME) {
				continue // the loop re-checks the deadline
			}
			return out, u.fail(fmt.Errorf("io_uring_enter wait: %w", err))
		}
	}
	out = append(out, u.done...)
	u.count -= len(u.done)
	clear(u.done)
	u.done = u.done[:0]
	return out, nil
}

func (u *uringIO) Close() error {
	if u.closed {
		return nil
	}
	// The kernel may still read from or write to our buffers while ops are
	// in flight: wait for all of them before the ring goes away.
	var werr error
	for u.count > 0 && u.err == nil {
		_, werr = u.Wait(nil, u.count, -1)
	}
	u.closed = true
	if u.own != nil {
		// The ring is the owner's and stays; only the handler goes.
		u.own.Unregister(u.tag)
		return werr
	}
	err := u.r.close()
	if werr != nil {
		return errors.Join(werr, err)
	}
	return err
}

// ownerGone fails the IO once its owner's ring failed or closed: the
// fate of what was in it is unknown, and its queues may be unmapped.
func (u *uringIO) ownerGone() error {
	if u.own == nil {
		return nil
	}
	if u.own.ring.closed {
		return u.fail(ErrClosed)
	}
	if err := u.own.Err(); err != nil {
		return u.fail(err)
	}
	return nil
}

// errnoOf extracts the errno behind an error of the portable helpers.
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}
