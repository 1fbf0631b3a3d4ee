//go:build !linux

package segment

import (
	"errors"
	"os"
)

// openDirect: direct writes are built for Linux only.
func openDirect(path string) (f *os.File, align, memAlign int64, why string, err error) {
	return nil, 0, 0, "direct writes are built for Linux only", nil
}

func adviseRandom(f *os.File, on bool) error { return nil }

func willNeed(f *os.File, pos, n int64) {}

// reserve is never reached: openDirect turns direct writes off here.
func reserve(f *os.File, off, n int64) error {
	return errors.New("segment: direct writes are built for Linux only")
}
