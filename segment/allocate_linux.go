package segment

import (
	"os"

	"golang.org/x/sys/unix"
)

// allocate reserves disk blocks for [off, off+n) of f and extends its size.
func allocate(f *os.File, off, n int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, off, n)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EOPNOTSUPP {
			// A file system without fallocate: fall back to a sparse size.
			return f.Truncate(off + n)
		}
		return err
	}
}
