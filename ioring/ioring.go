package ioring

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// Kind names an implementation of IO.
type Kind string

const (
	// Uring submits operations through an io_uring instance (Linux only).
	Uring Kind = "uring"
	// Portable performs operations with pwrite/pread and fsync/fdatasync.
	Portable Kind = "portable"
)

// Mode is what the operator asked for at start-up.
type Mode string

const (
	// ModeAuto probes io_uring and falls back to the portable path.
	ModeAuto Mode = "auto"
	// ModeUring insists on io_uring and fails loudly when it is unavailable.
	ModeUring Mode = "uring"
	// ModePortable never touches io_uring.
	ModePortable Mode = "portable"
)

// ParseMode accepts "auto", "uring" and "portable".
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeAuto, ModeUring, ModePortable:
		return Mode(s), nil
	}
	return "", fmt.Errorf("ioring: unknown I/O mode %q (want auto, uring or portable)", s)
}

// OpKind is what an Op does.
type OpKind uint8

const (
	// OpWrite writes Bufs, in order, contiguously from Offset.
	OpWrite OpKind = iota
	// OpRead reads into Bufs[0] from Offset. A short read is not an error.
	OpRead
	// OpSync makes the file durable (fsync, or fdatasync with SyncData).
	OpSync
	// OpNop does nothing; it is used to probe and to test the ring.
	OpNop
)

func (k OpKind) String() string {
	switch k {
	case OpWrite:
		return "write"
	case OpRead:
		return "read"
	case OpSync:
		return "sync"
	case OpNop:
		return "nop"
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

// SyncKind chooses between fsync and fdatasync.
type SyncKind uint8

const (
	// SyncNone: no sync after a write.
	SyncNone SyncKind = iota
	// SyncData is fdatasync: data and the metadata needed to read it back
	// (the file size), not timestamps.
	SyncData
	// SyncFull is fsync.
	SyncFull
)

// Op is one request. The caller fills the request fields, hands the Op to
// Submit and must not touch it (nor the memory Bufs points at) until Wait
// returns it. Results are in N and Err.
type Op struct {
	Kind   OpKind
	File   *os.File
	Offset int64
	Bufs   [][]byte
	// Sync, on an OpWrite, makes the write durable before the op completes:
	// on io_uring the write and its fsync go in one linked chain
	// (IOSQE_IO_LINK), so a failed write cancels its sync. On an OpSync it
	// chooses fsync or fdatasync (SyncNone means SyncFull there).
	Sync SyncKind
	// Direct, on an OpWrite, says File was opened with O_DIRECT: the write
	// bypasses the page cache, so the io_uring implementation submits it
	// to the ring even in WritesInline mode (the kernel completes a direct
	// write without an io-wq worker when it needs no block allocation nor
	// size change). Offset, the buffers' lengths and their addresses must
	// meet the file's direct I/O alignment.
	Direct bool
	// Tag is the caller's own; ioring never reads it.
	Tag any

	// N is the number of bytes written or read.
	N int
	// Err is nil on success. A short write is retried until it is complete
	// or fails, so a successful OpWrite always has N equal to the sum of
	// len(Bufs).
	Err error

	state opState
}

// Len is the number of bytes an OpWrite writes (or OpRead may read).
func (o *Op) Len() int {
	n := 0
	for _, b := range o.Bufs {
		n += len(b)
	}
	return n
}

// IO performs file operations. An IO is owned by one goroutine (a shard):
// none of its methods may be called concurrently.
type IO interface {
	// Kind tells which implementation this is.
	Kind() Kind
	// Submit hands ops to the kernel, all in one submission when they fit
	// in the ring, and returns without waiting for them to complete, except
	// that with the ring full it first waits for earlier ops to make room
	// (back-pressure: a full ring is never an error). Ops without a linked
	// relation may complete in any order; a write and its Sync are ordered.
	// The error is for the submission as a whole (the ring is broken);
	// individual failures arrive in Op.Err.
	Submit(ops ...*Op) error
	// Wait appends completed ops to out and returns it. It waits until at
	// least min ops have completed (min is capped at InFlight), or until
	// timeout has passed; a negative timeout waits without limit, zero only
	// collects what is already complete.
	Wait(out []*Op, min int, timeout time.Duration) ([]*Op, error)
	// InFlight is the number of ops submitted and not yet returned by Wait.
	InFlight() int
	// Close waits for every op in flight and releases the IO.
	Close() error
}

// KeepP says that the goroutine that waits on io counts a P of its own
// (internal/procs): an io_uring's waits then keep that P through the
// system call rather than offer it to the runtime's sysmon, which takes
// such a P back and then polls every 20 us for a while (ARCHITECTURE.md,
// "A P per loop"). It does nothing where io has no such waits: the
// portable path, or an IO an embedder wrapped (engine's WrapIO).
func KeepP(io IO) {
	if k, ok := io.(interface{ keepP() }); ok {
		k.keepP()
	}
}

// Do submits ops and waits for all of them. It returns the ring error if
// there was one, else the first op error.
func Do(io IO, ops ...*Op) error {
	if len(ops) == 0 {
		return nil
	}
	if err := io.Submit(ops...); err != nil {
		return err
	}
	var buf [16]*Op
	out := buf[:0]
	remaining := len(ops)
	for remaining > 0 {
		var err error
		out, err = io.Wait(out[:0], remaining, -1)
		if err != nil {
			return err
		}
		remaining -= len(out)
	}
	for _, o := range ops {
		if o.Err != nil {
			return o.Err
		}
	}
	return nil
}

// Config sizes an IO.
type Config struct {
	// Entries is the submission queue size of an io_uring (rounded up to a
	// power of two by the kernel); 0 means 256.
	Entries uint32
	// Writes chooses how the io_uring implementation performs buffered
	// writes; see WriteMode.
	Writes WriteMode
}

// WriteMode chooses where the io_uring implementation performs the write
// part of an OpWrite.
type WriteMode uint8

const (
	// WritesInline (the default) copies the data into the page cache with
	// pwritev during Submit and leaves only the sync to the ring. File
	// systems that cannot complete a buffered write without blocking (ext4
	// on Linux 6.18 among them) hand every io_uring write to an io-wq
	// worker thread, which costs a thread switch per write: measured here,
	// 4 KiB buffered writes through io_uring run at a fifth of pwrite's
	// rate (fio's own io_uring engine shows the same). The sync, which
	// blocks for hundreds of microseconds, still runs asynchronously.
	WritesInline WriteMode = iota
	// WritesInRing submits writes as SQEs, linked to their sync: right
	// where the file system takes buffered writes without blocking (XFS,
	// for instance), or with O_DIRECT files.
	WritesInRing
)

func (c Config) entries() uint32 {
	if c.Entries == 0 {
		return 256
	}
	return c.Entries
}

// Choice records which implementation Open picked and why.
type Choice struct {
	Kind   Kind
	Reason string
}

func (c Choice) String() string { return string(c.Kind) + ": " + c.Reason }

// ErrUnavailable is returned by Open in ModeUring when the probe fails.
var ErrUnavailable = errors.New("ioring: io_uring unavailable")

// ErrClosed is returned when an IO is used after Close.
var ErrClosed = errors.New("ioring: closed")

// Open returns the IO that mode asks for, probing io_uring when needed.
// The Choice says what was picked and why; log it at start-up.
func Open(mode Mode, cfg Config) (IO, Choice, error) {
	switch mode {
	case ModePortable:
		return NewPortable(), Choice{Portable, "forced by -io=portable"}, nil
	case ModeUring, ModeAuto, "":
		if reason := Probe(); reason != "" {
			if mode == ModeUring {
				return nil, Choice{}, fmt.Errorf("%w: %s", ErrUnavailable, reason)
			}
			return NewPortable(), Choice{Portable, "io_uring probe failed: " + reason}, nil
		}
		r, err := newUring(cfg)
		if err != nil {
			if mode == ModeUring {
				return nil, Choice{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
			}
			return NewPortable(), Choice{Portable, "io_uring setup failed: " + err.Error()}, nil
		}
		why := "probe passed"
		if mode == ModeUring {
			why = "forced by -io=uring, probe passed"
		}
		return r, Choice{Uring, why}, nil
	}
	return nil, Choice{}, fmt.Errorf("ioring: unknown I/O mode %q", mode)
}
