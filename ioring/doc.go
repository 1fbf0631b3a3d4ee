// Package ioring performs ringlog's file I/O: writes, reads and syncs of
// segment files, submitted in batches.
//
// Two implementations sit behind the IO interface:
//
//   - uring (Linux): our own binding of io_uring over golang.org/x/sys/unix.
//     A batch of ops becomes SQEs written into the mmap'd submission ring and
//     handed to the kernel with one io_uring_enter; a write that must be
//     durable is a linked chain (WRITEV -> FSYNC with IOSQE_IO_LINK), so the
//     write and its sync cost one submission and the sync never runs ahead of
//     the write. Completions are matched to their op by user data.
//   - portable (every OS): pwritev/pwrite and fsync/fdatasync, performed
//     synchronously inside Submit.
//
// A third piece serves the network path (netpoll's uring loops): NetRing,
// a ring created with SINGLE_ISSUER and DEFER_TASKRUN for one locked
// thread, with multishot RECV into a BufRing of provided buffers
// (IORING_REGISTER_PBUF_RING), SENDMSG, READ (an eventfd, to be woken),
// POLL_ADD and ASYNC_CANCEL. ProbeNet checks all of it with a real multishot receive on a socket pair.
//
// An Owner is a NetRing and the locked goroutine that owns it, shared by
// layers that do not know each other (an engine shard and netpoll's
// connections): handlers register on it and get a tag, carried in the top
// byte of their requests' user data, and each Turn runs posted work and
// hooks, submits and waits in one io_uring_enter (with a timeout through
// IORING_ENTER_EXT_ARG) and dispatches completions by tag. A post from an
// owner of the same OwnerGroup wakes a sleeping owner with an
// IORING_OP_MSG_RING queued in the poster's own ring (submitted with its
// next turn); from any other goroutine, with an eventfd the owner always
// has a read of in its ring. ProbeOwner adds MSG_RING to ProbeNet.
//
// Owner concurrency: NewOwner, Turn, Register, AddHook, SkipWait, Close,
// Ring and DiskIO (and every method of the IO it returns) on the owner's
// goroutine only; Post, Wake, Current and Stats on
// any. OwnerGroup.Close once every owner's goroutine has ended: a ring's
// descriptor outlives its owner until then, so that a doorbell queued by
// another member never reaches a descriptor number reused by another file.
//
//	provided buffer ring: entries x io_uring_buf {addr u64, len u32, bid u16, resv u16}
//	                      the tail (u16) overlays resv of entry 0; the kernel moves the head
//	a receive completion: flags = bid << 16 | F_BUFFER | F_MORE (while armed), res = bytes
//
// Open picks one at start-up: ModeAuto probes io_uring (Probe) and falls
// back to the portable path with the reason; ModeUring fails loudly instead.
//
// The rings, as the kernel lays them out (one mapping when the kernel offers
// IORING_FEAT_SINGLE_MMAP):
//
//	SQ ring: head (kernel) | tail (us) | mask | entries | flags | dropped | array[entries]u32
//	SQEs:    entries x 64-byte io_uring_sqe       (array[i] == i, set once)
//	CQ ring: head (us) | tail (kernel) | mask | entries | overflow | cqes[entries] x 16 bytes
//
//	user_data of an SQE = slot of its Op << 16 | index of the SQE in the Op's chain
//
// # Concurrency contract
//
// An IO belongs to one goroutine (a shard): Submit, Wait, InFlight and Close
// must not be called concurrently. An Op, and the memory its Bufs point at,
// belong to the IO from Submit until Wait returns the Op; the kernel reads
// from (or writes to) that memory in between.
//
// A NetRing and its BufRing belong to the goroutine that created them,
// which is locked to its OS thread until Close: the kernel refuses
// submissions from any other thread (SINGLE_ISSUER) and runs completion
// work only when that thread waits (DEFER_TASKRUN). A buffer's bytes are
// the program's from the completion that names it until Recycle.
//
// # Non-obvious invariants
//
//   - A linked chain must reach the kernel in one io_uring_enter: if the SQ
//     cannot hold the whole chain, what is queued is submitted first. A chain
//     split across submissions loses its link and the fsync may overtake the
//     write.
//   - SQEs in flight never exceed the CQ size, so the CQ cannot overflow; a
//     caller faster than the disk is held in Submit until completions arrive
//     (back-pressure), and EBUSY/EAGAIN from the kernel are answered the same
//     way.
//   - A short write cancels the rest of its chain with ECANCELED; the op is
//     resubmitted from where it stopped (with its sync), so a successful
//     write is always whole. A resubmission that makes no progress is an
//     error, never a loop.
//   - io_uring_enter returns EINTR whenever the Go runtime preempts the
//     thread with a signal; it is retried, not reported.
//   - Close waits for every op in flight: after a ring is torn down the
//     kernel must not touch Go memory that may have been reused.
//   - A NetRing passes GETEVENTS on every io_uring_enter, waiting or not:
//     with DEFER_TASKRUN the kernel posts completions only then.
//   - The buffer ring's tail is a 16-bit field with no 16-bit atomic store
//     in Go: the aligned 32-bit word holding it (with entry 0's bid) is
//     read, patched in a copy and stored whole; the kernel never writes
//     that word.
//   - The wait timeout (struct io_uring_getevents_arg and its timespec) lives
//     on the heap: the kernel dereferences a pointer hidden in a uint64 that
//     Go's stack copying would not update.
//   - A doorbell (MSG_RING) is sent only by the poster that took its
//     target's sleeping flag, so its failure must not be dropped: the
//     sender's failure completion carries the target's place in the group
//     and the sender writes the target's eventfd. On Linux 6.18 a full CQ
//     does not fail a MSG_RING to a DEFER_TASKRUN ring (the completion
//     goes to the target's overflow list: 120 doorbells into a 2-entry CQ
//     all arrived); ENOMEM and EOWNERDEAD can, and older kernels' EOVERFLOW.
//   - A closed NetRing queues and reaps nothing (ErrClosed, 0): its queues
//     are unmapped, and a hook may still run in the turn that closed it.
//   - An owner whose turn fails records the error (Err) before its caller
//     closes it, so that its closers (OnClose) tell a failed ring from a
//     stop.
package ioring
