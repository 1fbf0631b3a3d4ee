//go:build unix && !linux

package segment

import "os"

// allocate extends f; other Unix systems have no portable fallocate, so
// the file may stay sparse.
func allocate(f *os.File, off, n int64) error { return f.Truncate(off + n) }
