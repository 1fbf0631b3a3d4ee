package ioring

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on the platforms ringlog
// runs on (x86-64, arm64 with 4 KiB pages).
const hugePage = 2 << 20

// newChunk returns a chunk of the staging arena: stageChunkBytes of an
// anonymous mapping, aligned to hugePage and advised MADV_HUGEPAGE, so that
// the kernel backs it with transparent huge pages as it is first touched
// where the system allows them. Where the mapping fails the chunk comes
// from the Go heap, as on other systems; the advice failing (a kernel
// without THP) only costs the huge pages. A chunk is never unmapped.
func newChunk() []byte {
	m, err := unix.Mmap(-1, 0, stageChunkBytes+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return alignedBytes(stageChunkBytes, stageAlign)
	}
	skip := int((hugePage - uintptr(unsafe.Pointer(&m[0]))%hugePage) % hugePage)
	// The mapping's unaligned head and tail stay mapped and untouched:
	// address space only.
	c := m[skip : skip+stageChunkBytes : skip+stageChunkBytes]
	_ = unix.Madvise(c, unix.MADV_HUGEPAGE)
	return c
}
