//go:build !linux

package bench

import "os"

// Without O_DIRECT the built-in disk writer goes through the cache and
// syncs at the end, which the report names.
const directIOName = "buffered, fsync at the end (no O_DIRECT on this OS)"

func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
}

func alignedBlock(n int) []byte { return make([]byte, n) }

func datasync(f *os.File) error { return f.Sync() }
