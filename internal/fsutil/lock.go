package fsutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// LockFile is the file in a data directory that its owner holds locked
// (Kafka's log directories have the same ".lock").
const LockFile = ".lock"

// ErrDirLocked means another process holds a data directory.
var ErrDirLocked = errors.New("data directory in use by another process")

// LockDir takes the exclusive lock of dir, so that a second process on the
// same directory (a broker started twice) fails at once instead of
// recovering, truncating or rewriting files the first one has open. The
// lock is the operating system's (released when the process dies, however
// it dies); unlock releases it.
func LockDir(dir string) (unlock func() error, err error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE, FilePerm)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		if errors.Is(err, ErrDirLocked) {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return f.Close, nil // closing the descriptor releases the lock
}
