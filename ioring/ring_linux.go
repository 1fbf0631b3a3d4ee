//go:build linux

package ioring

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is one io_uring instance: the shared submission and completion
// rings and the SQE array, all mmap'd from the ring's file descriptor.
//
// Memory ordering follows the kernel's contract (io_uring(7)): the
// application writes SQEs, then publishes them with a store-release of the
// SQ tail; the kernel publishes CQEs with a store-release of the CQ tail,
// which the application reads with a load-acquire before reading the CQEs,
// and it frees CQ slots with a store-release of the CQ head. Go's
// sync/atomic operations are sequentially consistent, which is stronger
// than acquire/release and therefore sufficient.
type ring struct {
	fd       int
	features uint32
	// enterFd and enterFlags are what io_uring_enter is called with: the
	// ring's descriptor, or its index among the thread's registered ring
	// descriptors with enterRegisteredRing (registerRing).
	enterFd    int
	enterFlags uint32

	sqMem  []byte // SQ ring mapping (also the CQ ring with featSingleMmap)
	cqMem  []byte // CQ ring mapping when mapped separately
	sqeMem []byte // SQE array mapping

	sqHead    *uint32 // written by the kernel
	sqTail    *uint32 // written by us
	sqMask    uint32
	sqEntries uint32
	sqes      []sqe
	sqeTail   uint32 // next SQE to fill; published to *sqTail by flush
	sqeHead   uint32 // SQEs before this were published to the kernel

	cqHead    *uint32 // written by us
	cqTail    *uint32 // written by the kernel
	cqMask    uint32
	cqEntries uint32
	cqes      []cqe

	// The wait arguments live on the heap so that their addresses, which
	// the kernel dereferences, stay valid and fixed during the syscall.
	waitArg *geteventsArg
	waitTs  *unix.Timespec

	// keepP: the goroutine that waits on this ring counts a P of its own
	// (internal/procs), so its waits keep that P (enter).
	keepP bool

	// fixedN is how many of the staging arena's chunks the ring has
	// registered as fixed buffers (fixedBuffer); fixedErr why it could
	// not, after which it stops trying.
	fixedN   int
	fixedErr error
}

// setupRing creates a ring with at least entries SQEs. Flags that the
// running kernel rejects (EINVAL) are dropped one group at a time.
func setupRing(entries uint32) (*ring, error) {
	var p params
	var fd uintptr
	var errno unix.Errno
	for _, flags := range []uint32{setupClamp | setupSubmitAll | setupCoopTaskrun, setupClamp | setupSubmitAll, setupClamp} {
		p = params{flags: flags}
		fd, _, errno = unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
		if errno != unix.EINVAL {
			break
		}
	}
	if errno != 0 {
		return nil, setupError("io_uring_setup", errno)
	}
	return newRing(int(fd), &p)
}

// setupError is io_uring_setup's errno as an error; ENOMEM says which
// limit ran out: without CAP_IPC_LOCK each ring's memory counts against
// RLIMIT_MEMLOCK, and a broker of several shards (or many rings) can pass
// a low limit with its first rings and fail on a later one.
func setupError(call string, errno unix.Errno) error {
	if errno == unix.ENOMEM {
		var lim unix.Rlimit
		if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) == nil && lim.Cur != unix.RLIM_INFINITY {
			return fmt.Errorf("%s: %w (the locked-memory limit, RLIMIT_MEMLOCK, is %d KiB and every ring counts against it: raise it with ulimit -l, or LimitMEMLOCK= in the service unit)", call, errno, lim.Cur>>10)
		}
	}
	return fmt.Errorf("%s: %w", call, errno)
}

// setupRingWith creates a ring with exactly the setup flags given (and a
// CQ of cqEntries when not 0): no fallback, the caller probed for them.
func setupRingWith(entries, cqEntries, flags uint32) (*ring, error) {
	p := params{flags: flags | setupClamp}
	if cqEntries > 0 {
		p.flags |= setupCQSize
		p.cqEntries = cqEntries
	}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, setupError(fmt.Sprintf("io_uring_setup(flags %#x)", p.flags), errno)
	}
	return newRing(int(fd), &p)
}

func newRing(fd int, p *params) (*ring, error) {
	r := &ring{fd: fd, enterFd: fd, features: p.features, waitArg: new(geteventsArg), waitTs: new(unix.Timespec)}
	if err := r.mapRings(p); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *ring) mapRings(p *params) error {
	sqSize := int(p.sqOff.array) + int(p.sqEntries)*4
	cqSize := int(p.cqOff.cqes) + int(p.cqEntries)*int(unsafe.Sizeof(cqe{}))
	single := p.features&featSingleMmap != 0
	if single && cqSize > sqSize {
		sqSize = cqSize
	}
	var err error
	r.sqMem, err = unix.Mmap(r.fd, offSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap SQ ring: %w", err)
	}
	cqMem := r.sqMem
	if !single {
		r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return fmt.Errorf("mmap CQ ring: %w", err)
		}
		cqMem = r.cqMem
	}
	r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap SQEs: %w", err)
	}

	u32 := func(mem []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }
	r.sqHead = u32(r.sqMem, p.sqOff.head)
	r.sqTail = u32(r.sqMem, p.sqOff.tail)
	r.sqMask = *u32(r.sqMem, p.sqOff.ringMask)
	r.sqEntries = *u32(r.sqMem, p.sqOff.ringEntries)
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&r.sqeMem[0])), r.sqEntries)
	// The SQ ring holds indexes into the SQE array. Mapping slot i to SQE
	// i once, as liburing does, lets submission touch only the tail.
	array := unsafe.Slice(u32(r.sqMem, p.sqOff.array), r.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.sqeTail = atomic.LoadUint32(r.sqTail)
	r.sqeHead = r.sqeTail

	r.cqHead = u32(cqMem, p.cqOff.head)
	r.cqTail = u32(cqMem, p.cqOff.tail)
	r.cqMask = *u32(cqMem, p.cqOff.ringMask)
	r.cqEntries = *u32(cqMem, p.cqOff.ringEntries)
	r.cqes = unsafe.Slice((*cqe)(unsafe.Pointer(&cqMem[p.cqOff.cqes])), r.cqEntries)
	return nil
}

// close unmaps the rings and closes the descriptor. The caller has waited
// for every request in flight.
func (r *ring) close() error {
	var errs []error
	if err := r.unregisterRing(); err != nil {
		errs = append(errs, err)
	}
	for _, m := range [][]byte{r.sqeMem, r.cqMem, r.sqMem} {
		if m != nil {
			if err := unix.Munmap(m); err != nil {
				errs = append(errs, fmt.Errorf("munmap: %w", err))
			}
		}
	}
	r.sqeMem, r.cqMem, r.sqMem = nil, nil, nil
	r.sqes, r.cqes = nil, nil
	if r.fd >= 0 {
		if err := unix.Close(r.fd); err != nil {
			errs = append(errs, fmt.Errorf("close ring: %w", err))
		}
		r.fd = -1
	}
	return errors.Join(errs...)
}

// sqFree is the number of SQEs that can be filled before the SQ is full.
func (r *ring) sqFree() uint32 {
	return r.sqEntries - (r.sqeTail - atomic.LoadUint32(r.sqHead))
}

// next returns the next free SQE, zeroed. The caller has checked sqFree.
func (r *ring) next() *sqe {
	s := &r.sqes[r.sqeTail&r.sqMask]
	*s = sqe{}
	r.sqeTail++
	return s
}

// pending is the number of SQEs filled but not yet consumed by the kernel.
func (r *ring) pending() uint32 {
	return r.sqeTail - atomic.LoadUint32(r.sqHead)
}

// publish makes every filled SQE visible to the kernel.
func (r *ring) publish() {
	if r.sqeHead != r.sqeTail {
		atomic.StoreUint32(r.sqTail, r.sqeTail)
		r.sqeHead = r.sqeTail
	}
}

// enter calls io_uring_enter, retrying on EINTR (the Go runtime preempts
// threads with signals, so EINTR is routine, not an error).
//
// A wait (minComplete > 0) on a ring whose goroutine counts a P of its own
// (keepP) is a raw system call: the runtime does not see it, and the P
// stays with the thread as if it ran Go code. Through an ordinary one,
// sysmon sees a thread in a system call and, once the goroutine has held
// its P for 10 ms without a reschedule (a loop never gives it up) or with
// goroutines in that P's run queue, takes the P away; after each take it
// polls every 20 us for a while. Measured on issue 13's produce load
// (ARCHITECTURE.md, "A P per loop"): sysmon took 11-13% of the broker's
// CPU, 2.8k wakeups a second at about 20 us of CPU each on this VM. The
// runtime still reaches such a thread: a stop of the world, a stack scan
// or sysmon's preemption signals it, the wait returns EINTR, and
// preemptPoint is where the goroutine stops if it was asked to.
func (r *ring) enter(toSubmit, minComplete, flags uint32, arg unsafe.Pointer, argSize uintptr) (int, error) {
	raw := r.keepP && minComplete > 0
	var start time.Time
	if raw {
		start = time.Now()
	}
	for {
		var n uintptr
		var errno unix.Errno
		if raw {
			n, _, errno = unix.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(r.enterFd), uintptr(toSubmit), uintptr(minComplete), uintptr(flags|r.enterFlags), uintptr(arg), argSize)
		} else {
			n, _, errno = unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.enterFd), uintptr(toSubmit), uintptr(minComplete), uintptr(flags|r.enterFlags), uintptr(arg), argSize)
		}
		if errno == unix.EINTR {
			if raw {
				preemptPoint()
				if time.Since(start) >= idleWait {
					// Idle: the rest of the wait gives the P up.
					raw = false
				}
			}
			continue
		}
		if errno != 0 {
			return int(n), errno
		}
		return int(n), nil
	}
}

// idleWait is how long a kept wait lasts before it counts as idle: when a
// signal (sysmon's preemption, every 10 ms for a loop that never parks)
// interrupts it after that, the rest of the wait is an ordinary system
// call, which gives the P up. An idle loop in a raw wait would hold its P
// for nothing and be woken every 10 ms: on an idle broker (`-io uring -net
// uring`, 10 s) 19-20 ticks of CPU and 950-1,070 context switches a
// second, against 14-15 and 710 with ordinary waits, as now. The next wait
// starts raw again: deciding for later waits by how long this one lasted
// (a ring idle until a wait returns sooner) brought sysmon back under
// load, 17-33 ticks and 7k-14k wake-ups per 8 s at a mark of 1 or 5 ms.
// As it is, under issue 13's produce load sysmon takes 12-13 ticks per 8 s
// (52-60 with ordinary waits) and the broker as much CPU per record as
// with every wait raw, within the rounds' spread. A variable for the
// tests.
var idleWait = 5 * time.Millisecond

// submit publishes filled SQEs and asks the kernel to consume them with
// one io_uring_enter. It returns how many the kernel consumed; EBUSY and
// EAGAIN come back to the caller, who must reap completions and retry.
func (r *ring) submit() (int, error) {
	r.publish()
	n := r.pending()
	if n == 0 {
		return 0, nil
	}
	return r.enter(n, 0, 0, nil, 0)
}

// waitCQE blocks until at least one CQE is available or timeout passes
// (timeout < 0: no limit). It returns unix.ETIME on timeout.
func (r *ring) waitCQE(timeout time.Duration) error {
	if r.cqReady() > 0 {
		return nil
	}
	flags := uint32(enterGetEvents)
	var arg unsafe.Pointer
	var argSize uintptr
	if timeout >= 0 {
		*r.waitTs = unix.NsecToTimespec(int64(timeout))
		*r.waitArg = geteventsArg{ts: uint64(uintptr(unsafe.Pointer(r.waitTs)))}
		arg, argSize = unsafe.Pointer(r.waitArg), unsafe.Sizeof(geteventsArg{})
		flags |= enterExtArg
	}
	_, err := r.enter(0, 1, flags, arg, argSize)
	return err
}

// cqReady is the number of CQEs the kernel has posted and we have not
// consumed.
func (r *ring) cqReady() uint32 {
	return atomic.LoadUint32(r.cqTail) - atomic.LoadUint32(r.cqHead)
}

// reap calls fn for every posted CQE, in order, then frees their slots.
func (r *ring) reap(fn func(userData uint64, res int32)) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	for i := head; i != tail; i++ {
		c := &r.cqes[i&r.cqMask]
		fn(c.userData, c.res)
	}
	atomic.StoreUint32(r.cqHead, tail)
	return int(tail - head)
}

// registerRing registers the ring's descriptor with the calling thread
// (IORING_REGISTER_RING_FDS, Linux 5.18), so that io_uring_enter finds
// the ring by index instead of looking the descriptor up and taking a
// reference on it at every call. The registration belongs to the thread:
// only a ring entered from one locked thread may use it. Failure is not
// an error: enter keeps the descriptor.
func (r *ring) registerRing() {
	up := &rsrcUpdate{offset: ^uint32(0), data: uint64(r.fd)}
	if r.register(registerRingFds, unsafe.Pointer(up), 1) == nil {
		r.enterFd, r.enterFlags = int(up.offset), enterRegisteredRing
	}
}

// unregisterRing gives back the thread's registration of the ring's
// descriptor (registerRing), which holds the ring's file for the thread's
// life; on the registering thread, like every enter.
func (r *ring) unregisterRing() error {
	if r.enterFlags&enterRegisteredRing == 0 {
		return nil
	}
	up := &rsrcUpdate{offset: uint32(r.enterFd)}
	r.enterFd, r.enterFlags = r.fd, 0
	if err := r.register(unregisterRingFds, unsafe.Pointer(up), 1); err != nil {
		return fmt.Errorf("IORING_UNREGISTER_RING_FDS: %w", err)
	}
	return nil
}

// fixedBuffer returns the fixed buffer index under n bytes at start when
// they lie in the staging arena (stage.go), registering the arena's chunks
// with the ring first where it has not yet; false when they do not, or
// the ring cannot take them (an old kernel, a memlock limit), which it
// tries once: the chunks registered before keep being used.
func (r *ring) fixedBuffer(start unsafe.Pointer, n int) (uint16, bool) {
	chunks := stageArena.snapshot()
	idx, ok := indexIn(chunks, uintptr(start), n)
	if !ok {
		return 0, false
	}
	if idx >= r.fixedN && r.fixedErr == nil {
		r.fixedErr = r.registerChunks(chunks)
	}
	return uint16(idx), idx < r.fixedN
}

// registerChunks registers the chunks the ring lacks: the first time a
// sparse table with a slot for every chunk the arena may have, then the
// new chunks in their slots. The kernel's update stops at the first chunk
// it cannot register (pin or charge to RLIMIT_MEMLOCK) and returns how
// many it did, with no error when that is some: fixedN counts those, and
// the error says the rest were refused.
func (r *ring) registerChunks(chunks [][]byte) error {
	if r.fixedN == 0 {
		reg := rsrcRegister{nr: stageArenaBytes / stageChunkBytes, flags: rsrcRegisterSparse}
		if err := r.register(registerBuffers2, unsafe.Pointer(&reg), uint32(unsafe.Sizeof(reg))); err != nil {
			return fmt.Errorf("register a fixed buffer table: %w", err)
		}
	}
	iovs := make([]unix.Iovec, 0, len(chunks)-r.fixedN)
	for _, c := range chunks[r.fixedN:] {
		v := unix.Iovec{Base: &c[0]}
		v.SetLen(len(c))
		iovs = append(iovs, v)
	}
	up := rsrcUpdate2{offset: uint32(r.fixedN), data: uint64(uintptr(unsafe.Pointer(&iovs[0]))), nr: uint32(len(iovs))}
	done, err := r.registerN(registerBufsUpdate, unsafe.Pointer(&up), uint32(unsafe.Sizeof(up)))
	runtime.KeepAlive(iovs)
	if err != nil {
		return fmt.Errorf("register staging chunks as fixed buffers: %w", err)
	}
	r.fixedN += done
	if done < len(iovs) {
		return fmt.Errorf("register staging chunks as fixed buffers: the kernel took %d of %d", done, len(iovs))
	}
	return nil
}

// registerN calls io_uring_register and returns what it returned.
func (r *ring) registerN(opcode uint32, arg unsafe.Pointer, nrArgs uint32) (int, error) {
	n, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), uintptr(opcode), uintptr(arg), uintptr(nrArgs), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// register calls io_uring_register.
func (r *ring) register(opcode uint32, arg unsafe.Pointer, nrArgs uint32) error {
	_, err := r.registerN(opcode, arg, nrArgs)
	return err
}

// opName is an io_uring opcode and its name for messages.
type opName struct {
	op   uint8
	name string
}

// lacks asks the kernel (IORING_REGISTER_PROBE) which of ops it does not
// support, and says so ("" when it supports them all).
func (r *ring) lacks(ops ...opName) string {
	p := new(probe)
	if err := r.register(registerProbe, unsafe.Pointer(p), uint32(len(p.ops))); err != nil {
		return fmt.Errorf("IORING_REGISTER_PROBE: %w", err).Error()
	}
	var missing []string
	for _, o := range ops {
		if o.op > p.lastOp || p.ops[o.op].flags&ioOpSupported == 0 {
			missing = append(missing, o.name)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return "kernel lacks io_uring opcodes " + strings.Join(missing, ", ")
}

// preemptPoint is a call with a stack check and nothing else: where the
// runtime asked the goroutine to stop (its stack guard says so), the check
// is where it does; otherwise it costs a call. A raw system call returning
// EINTR goes back into the kernel through no such check, so a goroutine
// asked to stop for a stop of the world would never get there while its
// wait lasted (TestKeptWaitLetsTheWorldStop). The call inside keeps it
// from being a leaf, which the compiler would leave without the check.
//
//go:noinline
func preemptPoint() { preemptLeaf() }

//go:noinline
func preemptLeaf() {}
