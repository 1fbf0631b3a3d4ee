//go:build linux

package ioring

import "unsafe"

// The io_uring kernel ABI, transcribed from include/uapi/linux/io_uring.h.
// golang.org/x/sys/unix has the syscall numbers but none of these structs or
// constants, so they live here. Only what ringlog uses is listed; the sizes
// are asserted below so that a transcription mistake fails to compile.

// Offsets passed to mmap to select which ring region to map.
const (
	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000
)

// Setup flags (io_uring_params.flags).
const (
	setupCQSize       = 1 << 3
	setupClamp        = 1 << 4
	setupSubmitAll    = 1 << 7
	setupCoopTaskrun  = 1 << 8
	setupSingleIssuer = 1 << 12
	setupDeferTaskrun = 1 << 13
)

// Feature bits reported by the kernel in io_uring_params.features.
const (
	featSingleMmap = 1 << 0
	featNoDrop     = 1 << 1
	featExtArg     = 1 << 8
)

// io_uring_enter flags.
const (
	enterGetEvents      = 1 << 0
	enterExtArg         = 1 << 3
	enterRegisteredRing = 1 << 4
)

// SQE flags.
const (
	sqeIOLink       = 1 << 2
	sqeBufferSelect = 1 << 5
	sqeCQESkipOK    = 1 << 6 // IOSQE_CQE_SKIP_SUCCESS: no completion unless it fails
)

// CQE flags. A CQE that consumed a provided buffer carries its id in the
// upper 16 bits of flags.
const (
	cqeFBuffer     = 1 << 0
	cqeFMore       = 1 << 1
	cqeBufferShift = 16
)

// recv/send flags (sqe.ioprio) and poll, cancel flags.
const (
	recvMultishot  = 1 << 1
	pollAddMulti   = 1 << 0 // in sqe.len
	asyncCancelAll = 1 << 0
	asyncCancelFD  = 1 << 1
)

// Opcodes. The numbering is the kernel's and never changes.
const (
	opNop         = 0
	opReadv       = 1
	opWritev      = 2
	opFsync       = 3
	opWriteFixed  = 5
	opPollAdd     = 6
	opSendmsg     = 9
	opAsyncCancel = 14
	opClose       = 19
	opRead        = 22
	opWrite       = 23
	opSend        = 26
	opRecv        = 27
	opSplice      = 30
	opMsgRing     = 40
)

// MSG_RING command (sqe.addr): post a CQE with the SQE's len and off.
const msgData = 0

// fsync_flags for opFsync.
const fsyncDatasync = 1 << 0

// io_uring_register opcodes.
const (
	registerProbe      = 8
	registerBuffers2   = 15
	registerBufsUpdate = 16
	registerRingFds    = 20
	unregisterRingFds  = 21
	registerPbufRing   = 22
	unregisterPbufRing = 23
)

// rsrcRegisterSparse (io_uring_rsrc_register.flags) registers a table of
// empty slots, filled by updates.
const rsrcRegisterSparse = 1 << 0

// rsrcRegister is struct io_uring_rsrc_register.
type rsrcRegister struct {
	nr    uint32
	flags uint32
	resv2 uint64
	data  uint64
	tags  uint64
}

// rsrcUpdate2 is struct io_uring_rsrc_update2.
type rsrcUpdate2 struct {
	offset uint32
	resv   uint32
	data   uint64
	tags   uint64
	nr     uint32
	resv2  uint32
}

// ioOpSupported is set in io_uring_probe_op.flags for opcodes the kernel knows.
const ioOpSupported = 1 << 0

// iovMax is the kernel's UIO_MAXIOV: a writev takes at most this many iovecs.
const iovMax = 1024

type sqringOffsets struct {
	head        uint32
	tail        uint32
	ringMask    uint32
	ringEntries uint32
	flags       uint32
	dropped     uint32
	array       uint32
	resv1       uint32
	userAddr    uint64
}

type cqringOffsets struct {
	head        uint32
	tail        uint32
	ringMask    uint32
	ringEntries uint32
	overflow    uint32
	cqes        uint32
	flags       uint32
	resv1       uint32
	userAddr    uint64
}

type params struct {
	sqEntries    uint32
	cqEntries    uint32
	flags        uint32
	sqThreadCPU  uint32
	sqThreadIdle uint32
	features     uint32
	wqFd         uint32
	resv         [3]uint32
	sqOff        sqringOffsets
	cqOff        cqringOffsets
}

// sqe is struct io_uring_sqe (64 bytes). Unions are flattened to the member
// ringlog uses: off (also addr2), addr, opFlags (rw_flags, fsync_flags, ...).
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	opFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	pad2        uint64
}

// cqe is struct io_uring_cqe without the CQE32 extension.
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// geteventsArg is struct io_uring_getevents_arg, passed with enterExtArg to
// wait with a timeout (Linux 5.11+).
type geteventsArg struct {
	sigmask     uint64
	sigmaskSz   uint32
	minWaitUsec uint32
	ts          uint64
}

type probeOp struct {
	op    uint8
	resv  uint8
	flags uint16
	resv2 uint32
}

// probe is struct io_uring_probe with room for every opcode up to 255.
type probe struct {
	lastOp uint8
	opsLen uint8
	resv   uint16
	resv2  [3]uint32
	ops    [256]probeOp
}

// bufReg is struct io_uring_buf_reg, the argument of
// IORING_(UN)REGISTER_PBUF_RING.
type bufReg struct {
	ringAddr    uint64
	ringEntries uint32
	bgid        uint16
	pad         uint16
	resv        [3]uint64
}

// rsrcUpdate is struct io_uring_rsrc_update, the argument of
// IORING_REGISTER_RING_FDS.
type rsrcUpdate struct {
	offset uint32
	resv   uint32
	data   uint64
}

// ringBuf is struct io_uring_buf, one entry of a provided buffer ring. The
// ring's tail overlays the resv field of entry 0.
type ringBuf struct {
	addr uint64
	len  uint32
	bid  uint16
	resv uint16
}

// Compile-time size checks against the kernel ABI.
var (
	_ [64]byte  = [unsafe.Sizeof(sqe{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(cqe{})]byte{}
	_ [120]byte = [unsafe.Sizeof(params{})]byte{}
	_ [24]byte  = [unsafe.Sizeof(geteventsArg{})]byte{}
	_ [8]byte   = [unsafe.Sizeof(probeOp{})]byte{}
	_ [40]byte  = [unsafe.Sizeof(bufReg{})]byte{}
	_ [16]byte  = [unsafe.Sizeof(ringBuf{})]byte{}
)
