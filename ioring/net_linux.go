//go:build linux

package ioring

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NetRing is an io_uring for a network event loop: multishot receives
// into a ring of provided buffers, sends, polls and cancellations, all
// submitted together with the wait for their completions, so that one
// io_uring_enter carries a whole turn of the loop.
//
// A NetRing is created with IORING_SETUP_SINGLE_ISSUER and
// IORING_SETUP_DEFER_TASKRUN: only the thread that created it may submit
// to it, and the kernel runs its completion work only when that thread
// enters the ring to wait (no inter-processor interrupt, no completion
// arriving in the middle of the loop's work). The owner must therefore be
// a goroutine locked to its OS thread (runtime.LockOSThread) for the
// NetRing's whole life, from NewNetRing to Close.
type NetRing struct {
	r      *ring
	closed bool
}

// NetCQE is one completion of a NetRing.
type NetCQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// More reports whether the request that posted the completion goes on
// (IORING_CQE_F_MORE on a multishot request); when it is false the
// request is over and must be submitted again to go on.
func (c NetCQE) More() bool { return c.Flags&cqeFMore != 0 }

// Buffer returns the id of the provided buffer the completion's bytes are
// in, if it consumed one.
func (c NetCQE) Buffer() (uint16, bool) {
	return uint16(c.Flags >> cqeBufferShift), c.Flags&cqeFBuffer != 0
}

// netSetupFlags are the setup flags of a NetRing, tried in order: the
// first set the kernel accepts wins. COOP_TASKRUN is redundant with
// DEFER_TASKRUN on kernels that know the latter, but older 6.x kernels
// that reject the pair still take DEFER_TASKRUN alone.
var netSetupFlags = []uint32{
	setupSingleIssuer | setupDeferTaskrun | setupCoopTaskrun | setupSubmitAll,
	setupSingleIssuer | setupDeferTaskrun | setupSubmitAll,
}

// NewNetRing creates a NetRing with entries SQEs and cqEntries CQEs (the
// CQ is sized apart: a multishot receive posts many completions per
// submission). The calling goroutine must be locked to its OS thread.
func NewNetRing(entries, cqEntries uint32) (*NetRing, error) {
	var err error
	for _, flags := range netSetupFlags {
		var r *ring
		r, err = setupRingWith(entries, cqEntries, flags)
		if err == nil {
			r.registerRing()
			return &NetRing{r: r}, nil
		}
		if !errors.Is(err, unix.EINVAL) {
			break
		}
	}
	return nil, err
}

// Close releases the ring. Every request must have completed (the caller
// cancels and reaps them first): the kernel must not touch memory the
// program may reuse.
func (n *NetRing) Close() error {
	if n.closed {
		return nil
	}
	n.closed = true
	return n.r.close()
}

// sqe returns a zeroed SQE, first submitting what is queued if the SQ is
// full. ErrClosed once the ring is closed: its queues are unmapped.
func (n *NetRing) sqe() (*sqe, error) {
	if n.closed {
		return nil, ErrClosed
	}
	if n.r.sqFree() == 0 {
		if err := n.Enter(false); err != nil {
			return nil, err
		}
		if n.r.sqFree() == 0 {
			return nil, fmt.Errorf("ioring: submission queue full after submitting")
		}
	}
	return n.r.next(), nil
}

// RecvMultishot queues a multishot receive on fd into buffers of the
// provided buffer ring group: each arrival of bytes posts a completion
// with the buffer they are in, until the socket ends, an error, a
// cancellation, or the group runs out of buffers (ENOBUFS); a completion
// without More ends it.
func (n *NetRing) RecvMultishot(fd int, group uint16, userData uint64) error {
	s, err := n.sqe()
	if err != nil {
		return err
	}
	s.opcode = opRecv
	s.fd = int32(fd)
	s.ioprio = recvMultishot
	s.flags = sqeBufferSelect
	s.bufIndex = group
	s.userData = userData
	return nil
}

// Sendmsg queues a sendmsg(2) of msg on fd. msg, its iovecs and the bytes
// they point at must stay untouched until the completion.
func (n *NetRing) Sendmsg(fd int, msg *unix.Msghdr, flags uint32, userData uint64) error {
	s, err := n.sqe()
	if err != nil {
		return err
	}
	s.opcode = opSendmsg
	s.fd = int32(fd)
	s.addr = uint64(uintptr(unsafe.Pointer(msg)))
	s.len = 1
	s.opFlags = flags
	s.userData = userData
	return nil
}

// Read queues a read of fd into buf (at the file's position: for
// eventfds, pipes and sockets). buf must stay untouched until the
// completion.
func (n *NetRing) Read(fd int, buf []byte, userData uint64) error {
	s, err := n.sqe()
	if err != nil {
		return err
	}
	s.opcode = opRead
	s.fd = int32(fd)
	s.addr = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	s.len = uint32(len(buf))
	s.off = ^uint64(0) // -1: the file's own position
	s.userData = userData
	return nil
}

// PollAdd queues a one-shot poll of fd for events (unix.POLLOUT, ...).
func (n *NetRing) PollAdd(fd int, events uint32, userData uint64) error {
	s, err := n.sqe()
	if err != nil {
		return err
	}
	s.opcode = opPollAdd
	s.fd = int32(fd)
	s.opFlags = events
	s.userData = userData
	return nil
}

// CancelFD queues the cancellation of every request on fd. The cancelled
// requests complete with ECANCELED (or their own result, if they were
// finishing); the cancellation completes too, with the number cancelled
// or ENOENT.
func (n *NetRing) CancelFD(fd int, userData uint64) error {
	s, err := n.sqe()
	if err != nil {
		return err
	}
	s.opcode = opAsyncCancel
	s.fd = int32(fd)
	s.opFlags = asyncCancelFD | asyncCancelAll
	s.userData = userData
	return nil
}

// Cancel queues the cancellation of the request submitted with user data
// target.
func (n *NetRing) Cancel(target, userData uint64) error {
	s, err := n.sqe()
	if err != nil {
		return err
	}
	s.opcode = opAsyncCancel
	s.fd = -1
	s.addr = target
	s.userData = userData
	return nil
}

// Enter submits what is queued and runs the ring's deferred completion
// work; with wait, it also blocks until at least one completion is
// posted (unless one is already). EINTR is retried.
func (n *NetRing) Enter(wait bool) error {
	var min uint32
	if wait {
		min = 1
	}
	return n.enter(min, -1)
}

// EnterTimeout is Enter with wait that gives up after timeout
// (returning nil: the caller simply finds no completion).
func (n *NetRing) EnterTimeout(timeout time.Duration) error {
	return n.enter(1, timeout)
}

func (n *NetRing) enter(min uint32, timeout time.Duration) error {
	if n.closed {
		return ErrClosed
	}
	n.r.publish()
	toSubmit := n.r.pending()
	if n.r.cqReady() > 0 {
		min = 0 // completions to reap already: do not wait for more
	}
	// GETEVENTS even without waiting: with DEFER_TASKRUN it is what
	// runs the completion work and posts the CQEs.
	flags := uint32(enterGetEvents)
	var arg unsafe.Pointer
	var argSize uintptr
	if min > 0 && timeout >= 0 {
		*n.r.waitTs = unix.NsecToTimespec(int64(timeout))
		*n.r.waitArg = geteventsArg{ts: uint64(uintptr(unsafe.Pointer(n.r.waitTs)))}
		arg, argSize = unsafe.Pointer(n.r.waitArg), unsafe.Sizeof(geteventsArg{})
		flags |= enterExtArg
	}
	_, err := n.r.enter(toSubmit, min, flags, arg, argSize)
	switch {
	case err == nil, errors.Is(err, unix.ETIME):
		return nil
	case errors.Is(err, unix.EBUSY), errors.Is(err, unix.EAGAIN):
		// Completions wait in the kernel's overflow list, or the kernel
		// is short of memory for requests: reaping makes room, and what
		// was not consumed is submitted again by the next Enter.
		return nil
	}
	return fmt.Errorf("io_uring_enter: %w", err)
}

// Reap calls fn for every completion posted, in order, and frees their
// slots. fn may queue new requests.
func (n *NetRing) Reap(fn func(NetCQE)) int {
	if n.closed {
		return 0 // the CQ is unmapped
	}
	r := n.r
	total := 0
	for {
		head := atomic.LoadUint32(r.cqHead)
		tail := atomic.LoadUint32(r.cqTail)
		if head == tail {
			return total
		}
		for i := head; i != tail; i++ {
			c := &r.cqes[i&r.cqMask]
			cq := NetCQE{UserData: c.userData, Res: c.res, Flags: c.flags}
			// Free the slot before fn runs: fn may submit, and a full
			// CQ must not hold the kernel back meanwhile.
			atomic.StoreUint32(r.cqHead, i+1)
			fn(cq)
			total++
		}
	}
}

// BufRing is a ring of provided buffers registered with a NetRing
// (IORING_REGISTER_PBUF_RING): the kernel picks a buffer from it for each
// multishot receive completion, and the program hands the buffer back
// with Recycle once it has consumed its bytes. Owned by the NetRing's
// goroutine.
type BufRing struct {
	n       *NetRing
	group   uint16
	size    int
	count   int
	mem     []byte    // the ring of entries, page-aligned (mmap)
	entries []ringBuf // view of mem
	slab    []byte    // count buffers of size bytes (mmap)
	tail    *uint16   // overlays entries[0].resv
	local   uint16    // our tail, published to *tail by Recycle
}

// RegisterBufRing creates count buffers of size bytes each (count a power
// of two, at most 32768) and registers them as provided buffer group
// group. All of them start in the ring.
func (n *NetRing) RegisterBufRing(group uint16, count, size int) (*BufRing, error) {
	if count <= 0 || count > 1<<15 || count&(count-1) != 0 || size <= 0 {
		return nil, fmt.Errorf("ioring: buffer ring of %d x %d bytes: want a power of two count up to 32768", count, size)
	}
	ringBytes := count * int(unsafe.Sizeof(ringBuf{}))
	mem, err := unix.Mmap(-1, 0, ringBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("ioring: buffer ring: %w", err)
	}
	slab, err := unix.Mmap(-1, 0, count*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		_ = unix.Munmap(mem)
		return nil, fmt.Errorf("ioring: buffers: %w", err)
	}
	b := &BufRing{n: n, group: group, size: size, count: count, mem: mem, slab: slab,
		entries: unsafe.Slice((*ringBuf)(unsafe.Pointer(&mem[0])), count)}
	b.tail = &b.entries[0].resv
	reg := &bufReg{ringAddr: uint64(uintptr(unsafe.Pointer(&mem[0]))), ringEntries: uint32(count), bgid: group}
	if err := n.r.register(registerPbufRing, unsafe.Pointer(reg), 1); err != nil {
		_ = unix.Munmap(mem)
		_ = unix.Munmap(slab)
		return nil, fmt.Errorf("IORING_REGISTER_PBUF_RING: %w", err)
	}
	runtime.KeepAlive(reg)
	for id := range count {
		b.Recycle(uint16(id))
	}
	return b, nil
}

// Group is the buffer group id to pass to RecvMultishot.
func (b *BufRing) Group() uint16 { return b.group }

// Size is the size of each buffer.
func (b *BufRing) Size() int { return b.size }

// Count is the number of buffers.
func (b *BufRing) Count() int { return b.count }

// Bytes returns the first n bytes of buffer id, as a completion reported
// them. They are valid until Recycle(id).
func (b *BufRing) Bytes(id uint16, n int) []byte {
	off := int(id) * b.size
	return b.slab[off : off+n : off+b.size]
}

// Recycle hands buffer id back to the kernel: its bytes may be
// overwritten by the next receive from then on.
func (b *BufRing) Recycle(id uint16) {
	e := &b.entries[int(b.local)&(b.count-1)]
	e.addr = uint64(uintptr(unsafe.Pointer(&b.slab[int(id)*b.size])))
	e.len = uint32(b.size)
	e.bid = id
	b.local++
	// The entry is written before the tail that publishes it (a
	// sequentially consistent store orders them).
	atomicStoreUint16(b.tail, b.local)
}

// Close unregisters the buffer ring and releases its memory. Every
// receive using it must have completed.
func (b *BufRing) Close() error {
	var errs []error
	if !b.n.closed {
		reg := &bufReg{bgid: b.group}
		if err := b.n.r.register(unregisterPbufRing, unsafe.Pointer(reg), 1); err != nil {
			errs = append(errs, fmt.Errorf("IORING_UNREGISTER_PBUF_RING: %w", err))
		}
	}
	for _, m := range [][]byte{b.mem, b.slab} {
		if m != nil {
			if err := unix.Munmap(m); err != nil {
				errs = append(errs, err)
			}
		}
	}
	b.mem, b.slab, b.entries, b.tail = nil, nil, nil, nil
	return errors.Join(errs...)
}

// atomicStoreUint16 stores v at p with release semantics. sync/atomic has
// no 16-bit store; the tail is the second half of an aligned 32-bit word
// (bid and resv of entry 0) that only the program writes (the kernel reads
// entries, never writes them), so the word is read, patched in a copy
// (whatever the byte order) and stored whole.
func atomicStoreUint16(p *uint16, v uint16) {
	w := (*uint32)(unsafe.Add(unsafe.Pointer(p), -2))
	word := atomic.LoadUint32(w)
	*(*uint16)(unsafe.Add(unsafe.Pointer(&word), 2)) = v
	atomic.StoreUint32(w, word)
}

// MsgRing queues an IORING_OP_MSG_RING that posts a completion with res
// and data into the ring whose descriptor is ringFd: it wakes that ring's
// owner if it waits in io_uring_enter. This ring gets a completion only if
// the message fails (IOSQE_CQE_SKIP_SUCCESS), with userData and the error
// in Res: the sender must then wake the target another way, or the wake
// is lost.
func (n *NetRing) MsgRing(ringFd int, res int32, data, userData uint64) error {
	return n.msgRing(ringFd, res, data, userData, 0)
}

// msgRing is MsgRing with msg_ring_flags.
func (n *NetRing) msgRing(ringFd int, res int32, data, userData uint64, flags uint32) error {
	s, err := n.sqe()
	if err != nil {
		return err
	}
	s.opcode = opMsgRing
	s.fd = int32(ringFd)
	s.addr = msgData
	s.len = uint32(res)
	s.off = data
	s.opFlags = flags
	s.flags = sqeCQESkipOK
	s.userData = userData
	return nil
}
