//go:build !linux && !darwin && !freebsd && !windows

package kafka

import "errors"

// diskSpace is unknown on systems without a statfs this package knows;
// DescribeLogDirs then answers Kafka's -1 for both.
func diskSpace(dir string) (total, usable int64, err error) {
	return 0, 0, errors.ErrUnsupported
}
