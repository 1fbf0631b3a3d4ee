//go:build linux

package ioring

import (
	"os"

	"golang.org/x/sys/unix"
)

var (
	errBadFile = unix.EBADF
	errInvalid = unix.EINVAL
)

// writeAt writes bufs contiguously from off with pwritev, iovMax buffers
// per call, resuming after short writes.
func writeAt(f *os.File, bufs [][]byte, off int64) (int, error) {
	fd := int(f.Fd())
	total := 0
	for len(bufs) > 0 {
		chunk := bufs[:min(len(bufs), iovMax)]
		n, err := unix.Pwritev(fd, chunk, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return total, err
		}
		if n == 0 {
			return total, unix.EIO
		}
		total += n
		off += int64(n)
		// Drop what was written, possibly leaving a partial buffer first.
		for n > 0 && len(bufs) > 0 {
			if n >= len(bufs[0]) {
				n -= len(bufs[0])
				bufs = bufs[1:]
				continue
			}
			head := bufs[0][n:]
			bufs = append([][]byte{head}, bufs[1:]...)
			n = 0
		}
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
	}
	return total, nil
}

// syncFile is fdatasync for SyncData and fsync otherwise.
func syncFile(f *os.File, k SyncKind) error {
	if k == SyncData {
		for {
			err := unix.Fdatasync(int(f.Fd()))
			if err != unix.EINTR {
				return err
			}
		}
	}
	return f.Sync()
}
