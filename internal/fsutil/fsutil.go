// Package fsutil holds the few file-system steps that several layers need
// to get exactly right: replacing a small file durably, and syncing a
// directory so that created, renamed and removed entries survive a crash.
package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
)

// TmpSuffix marks a file being written by WriteFileAtomic; one left behind
// by a crash can be removed.
const TmpSuffix = ".tmp"

// FilePerm and DirPerm are the modes of every file and directory the
// broker creates in its data directory: records, offsets and the
// cluster's metadata are for the broker's user and group only (others
// could read every record otherwise; the process umask may only take more
// away).
const (
	FilePerm os.FileMode = 0o640
	DirPerm  os.FileMode = 0o750
)

// WriteFileAtomic replaces dir/name with data durably: the data goes to a
// temporary file that is synced, renamed over name, and the directory is
// synced, so that a crash leaves either the old or the new content, never a
// mix or nothing.
func WriteFileAtomic(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+TmpSuffix)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, FilePerm)
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

// MkdirAllDurable creates dir and any missing parents, like os.MkdirAll,
// and makes every directory it created durable (the parent of each is
// synced after the mkdir), so that a power loss cannot remove a directory
// (and with it everything later synced inside it) that a caller went on
// to rely on. Kafka's LogManager syncs the parent of a new log directory
// for the same reason.
func MkdirAllDurable(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	// The missing levels, deepest first.
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !os.IsNotExist(err) {
			return err
		}
		missing = append(missing, d)
		if parent := filepath.Dir(d); parent == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	// Top-down: a directory's entry in its parent is durable once the
	// parent is synced after the mkdir.
	for i := len(missing) - 1; i >= 0; i-- {
		if err := SyncDir(filepath.Dir(missing[i])); err != nil {
			return fmt.Errorf("sync %s: %w", filepath.Dir(missing[i]), err)
		}
	}
	return nil
}
