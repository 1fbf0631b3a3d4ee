package bench

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

const directIOName = "O_DIRECT"

// openDirect opens path for writing around the page cache.
func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|syscall.O_DIRECT, 0o644)
}

// alignedBlock returns n bytes aligned to 4096, as O_DIRECT requires.
func alignedBlock(n int) []byte {
	b := make([]byte, n+4096)
	off := int(4096-uintptr(unsafe.Pointer(&b[0]))%4096) % 4096
	return b[off : off+n]
}

func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
