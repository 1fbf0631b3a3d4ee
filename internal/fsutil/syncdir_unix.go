//go:build unix

package fsutil

import "os"

// SyncDir makes a directory's entries (created, renamed, removed files)
// durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
