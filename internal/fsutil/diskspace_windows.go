//go:build windows

package fsutil

import "golang.org/x/sys/windows"

// DiskSpace returns the size of the volume holding dir and the bytes the
// caller may still use there (GetDiskFreeSpaceEx honours quotas, as Java's
// FileStore.getUsableSpace does).
func DiskSpace(dir string) (total, usable int64, err error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, 0, err
	}
	var avail, size, free uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &size, &free); err != nil {
		return 0, 0, err
	}
	return int64(size), int64(avail), nil
}
