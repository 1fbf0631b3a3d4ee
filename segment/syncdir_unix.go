//go:build unix

package segment

import "os"

// syncDir makes a directory's entries (created, renamed, removed files)
// durable.
func syncDir(dir string) error {
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
