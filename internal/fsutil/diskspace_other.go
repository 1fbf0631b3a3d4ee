//go:build !linux && !darwin && !freebsd && !windows

package fsutil

import "errors"

// DiskSpace is unknown on systems without a statfs this package knows;
// callers report it as unknown (DescribeLogDirs answers Kafka's -1).
func DiskSpace(dir string) (total, usable int64, err error) {
	return 0, 0, errors.ErrUnsupported
}
