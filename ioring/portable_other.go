//go:build !linux

package ioring

import (
	"errors"
	"os"
)

var (
	errBadFile = os.ErrInvalid
	errInvalid = errors.New("invalid argument")
)

// writeAt writes each buffer with WriteAt, which itself loops over short
// writes.
func writeAt(f *os.File, bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		n, err := f.WriteAt(b, off)
		total += n
		off += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// syncFile uses the OS's full sync: there is no fdatasync outside Linux in
// the standard library (darwin's F_FULLFSYNC is what os.File.Sync does).
func syncFile(f *os.File, _ SyncKind) error { return f.Sync() }
