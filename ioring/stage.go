package ioring

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// Staging buffers hold a direct write's bytes, aligned as O_DIRECT wants
// (segment stages each direct append in one). They come in size classes
// of powers of two from 64 KiB, shared by all logs and rings: a log holds
// one only while its append is in flight or its tail cache keeps it, so
// their memory follows the bytes being written, not the number of logs.
//
// Up to stageArenaBytes of them are carved from the staging arena: chunks
// of memory that every io_uring with direct writes registers as fixed
// buffers (IORING_REGISTER_BUFFERS2, sparse, then BUFFERS_UPDATE as chunks
// are added), so that a write from one is a WRITE_FIXED, whose pages the
// kernel pinned once, not at every write (get_user_pages: 5% of the
// broker's CPU on issue 13's produce loads, ARCHITECTURE.md, "Direct
// writes"). A buffer the arena cannot give (it is full, or the class is
// larger than a chunk) comes from the Go heap, through a sync.Pool, and is
// written as before. The arena's chunks are never freed: after a burst it
// keeps up to stageArenaBytes.
//
// On Linux the chunks are anonymous mappings of their own, aligned to 2
// MiB and advised MADV_HUGEPAGE (newChunk, stage_linux.go): backed by
// transparent huge pages where the system allows them (enabled "always"
// or "madvise"), a chunk is four pages for the processor's TLB and the
// kernel's registered buffer, not 2048. Measured on issue 13's produce
// load (ARCHITECTURE.md, "Direct writes"): records/s 8-13% up, CPU per GB
// level to a few percent down, against chunks from the Go heap, which gets
// no huge pages under "madvise".
const (
	stageMinShift   = 16
	stageClasses    = 16 // up to 2 GiB, beyond any append
	stageAlign      = 4096
	stageChunkBytes = 8 << 20
	stageArenaBytes = 128 << 20
)

// StageArenaBytes is the most memory of the staging arena, which every
// ring that makes direct writes registers as fixed buffers: locked memory
// the kernel charges to RLIMIT_MEMLOCK of a process without CAP_IPC_LOCK,
// once per ring. A ring the limit refuses writes without fixed buffers.
const StageArenaBytes = stageArenaBytes

var stagePools [stageClasses]sync.Pool

// directWrites counts the direct writes the process's io_uring rings
// submitted, by their buffer (DirectWrites).
var directWrites [2]atomic.Uint64

const (
	directFixed = iota
	directPlain
)

// DirectWrites returns how many direct writes the process's io_uring rings
// have submitted: fixed, from the staging arena a ring registered
// (WRITE_FIXED, pages pinned once), and plain, from other memory (the
// kernel pins the pages at each write): stages beyond the arena, and
// arena chunks a ring could not register (RLIMIT_MEMLOCK of a process
// without CAP_IPC_LOCK, StageArenaBytes). Both stay 0 on the portable
// path, whose direct writes are pwritev.
func DirectWrites() (fixed, plain uint64) {
	return directWrites[directFixed].Load(), directWrites[directPlain].Load()
}

// stageArena is the process's staging arena.
var stageArena arena

type arena struct {
	mu   sync.Mutex
	free [stageClasses][][]byte
	// chunks is every chunk so far, in the order of their fixed buffer
	// indexes; the slice is replaced, never changed, so that readers
	// (WRITE_FIXED's lookup, rings registering chunks) load it without
	// the lock.
	chunks atomic.Pointer[[][]byte]
	used   int // bytes of the last chunk handed out
}

func stageClass(n int64) int {
	c := 0
	for int64(1)<<(stageMinShift+c) < n {
		c++
	}
	return c
}

// Stage returns a staging buffer of n bytes whose address is aligned for
// direct I/O (memAlign, at least a page). Unstage gives it back.
func Stage(n, memAlign int64) []byte {
	c := stageClass(n)
	align := max(memAlign, stageAlign)
	if c < stageClasses && align <= stageAlign {
		if b := stageArena.get(c); b != nil {
			return b[:n]
		}
	}
	if c < stageClasses {
		if p, ok := stagePools[c].Get().(*[]byte); ok && int64(uintptr(unsafe.Pointer(&(*p)[0])))%align == 0 {
			return (*p)[:n]
		}
	}
	size := max(n, int64(1)<<(stageMinShift+min(c, stageClasses-1)))
	return alignedBytes(int(size), int(align))[:n]
}

// alignedBytes returns size bytes from the Go heap whose address is a
// multiple of align, with no capacity past them.
func alignedBytes(size, align int) []byte {
	raw := make([]byte, size+align)
	skip := (align - int(uintptr(unsafe.Pointer(&raw[0])))%align) % align
	return raw[skip : skip+size : skip+size]
}

// Unstage gives back a buffer Stage returned, once nothing reads it any
// more (its write completed, no cache keeps it).
func Unstage(b []byte) {
	b = b[:cap(b)]
	c := stageClass(int64(len(b)))
	if c >= stageClasses || int64(1)<<(stageMinShift+c) != int64(len(b)) {
		return
	}
	if _, ok := stageArena.index(b); ok {
		stageArena.put(c, b)
		return
	}
	stagePools[c].Put(&b)
}

// get returns a buffer of class c from the arena, or nil when the arena
// has none to give.
func (a *arena) get(c int) []byte {
	size := 1 << (stageMinShift + c)
	if size > stageChunkBytes {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if f := a.free[c]; len(f) > 0 {
		b := f[len(f)-1]
		a.free[c] = f[:len(f)-1]
		return b
	}
	var chunks [][]byte
	if p := a.chunks.Load(); p != nil {
		chunks = *p
	}
	if len(chunks) == 0 || a.used+size > stageChunkBytes {
		if (len(chunks)+1)*stageChunkBytes > stageArenaBytes {
			return nil
		}
		next := append(chunks[:len(chunks):len(chunks)], newChunk())
		a.chunks.Store(&next)
		chunks, a.used = next, 0
	}
	chunk := chunks[len(chunks)-1]
	b := chunk[a.used : a.used+size : a.used+size]
	a.used += size
	return b
}

func (a *arena) put(c int, b []byte) {
	a.mu.Lock()
	a.free[c] = append(a.free[c], b)
	a.mu.Unlock()
}

// index returns the chunk b lies in, by its fixed buffer index.
func (a *arena) index(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	return indexIn(a.snapshot(), uintptr(unsafe.Pointer(&b[0])), len(b))
}

// indexIn returns which of chunks holds the n bytes at start.
func indexIn(chunks [][]byte, start uintptr, n int) (int, bool) {
	for i, chunk := range chunks {
		base := uintptr(unsafe.Pointer(&chunk[0]))
		if start >= base && start+uintptr(n) <= base+uintptr(len(chunk)) {
			return i, true
		}
	}
	return 0, false
}

// snapshot returns the arena's chunks so far.
func (a *arena) snapshot() [][]byte {
	if p := a.chunks.Load(); p != nil {
		return *p
	}
	return nil
}
