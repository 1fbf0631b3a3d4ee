//go:build linux || darwin || freebsd

package fsutil

import "golang.org/x/sys/unix"

// DiskSpace returns the size of the volume holding dir and the bytes an
// unprivileged writer may still use there (f_bavail, what Java's
// FileStore.getUsableSpace reports to Kafka), from statfs(2).
func DiskSpace(dir string) (total, usable int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	// The field types differ between systems and architectures; every
	// one of them converts to int64 without loss for real volumes.
	bsize := int64(st.Bsize)
	return int64(st.Blocks) * bsize, int64(st.Bavail) * bsize, nil
}
