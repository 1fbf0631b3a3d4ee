// Package fsutil holds the few file-system steps that several layers need
// to get exactly right: replacing a small file durably, and syncing a
// directory so that created, renamed and removed entries survive a crash.
package fsutil

import (
	"os"
	"path/filepath"
)

// TmpSuffix marks a file being written by WriteFileAtomic; one left behind
// by a crash can be removed.
const TmpSuffix = ".tmp"

// WriteFileAtomic replaces dir/name with data durably: the data goes to a
// temporary file that is synced, renamed over name, and the directory is
// synced, so that a crash leaves either the old or the new content, never a
// mix or nothing.
func WriteFileAtomic(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+TmpSuffix)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return SyncDir(dir)
}
