//go:build linux || freebsd || darwin

package netpoll

import (
	"errors"

	"golang.org/x/sys/unix"
)

// sendfileUnsupported reports errors that mean "this pair of descriptors
// cannot use sendfile" (a file system or file type without splice support),
// as opposed to a broken connection.
func sendfileUnsupported(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) ||
		errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP)
}
