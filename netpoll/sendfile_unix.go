//go:build linux || freebsd || darwin

package netpoll

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// sendfileUnsupported reports errors that mean "this pair of descriptors
// cannot use sendfile" (a file system or file type without splice support),
// as opposed to a broken connection.
func sendfileUnsupported(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) ||
		errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP)
}

// sendfileRegion sends n bytes of f from pos to the non-blocking socket fd
// with sendfile until they are sent or the socket is full (errWouldBlock),
// counting them in st. It returns the bytes written; a file or socket
// that sendfile refuses before anything was sent is errSendfileUnsupported,
// for the caller to copy instead.
func sendfileRegion(fd int, f *os.File, pos, n int64, st *counters) (int64, error) {
	src, err := f.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("netpoll: region of %s: %w", f.Name(), err)
	}
	var sent int64
	var serr error
	// Control holds the file open meanwhile: a concurrent Close cannot
	// hand its descriptor number to another file under us.
	cerr := src.Control(func(ffd uintptr) {
		for sent < n && serr == nil {
			k, e := sendfile(fd, int(ffd), pos+sent, int(min(n-sent, sendfileChunkMax)))
			sent += int64(k)
			st.sendfileBytes.Add(int64(k))
			switch {
			case e == unix.EINTR:
			case e == unix.EAGAIN:
				serr = errWouldBlock
			case e != nil:
				serr = os.NewSyscallError("sendfile", e)
			case k == 0:
				serr = fmt.Errorf("netpoll: %s at %d: %w", f.Name(), pos+sent, ErrShortRegion)
			}
		}
	})
	if serr == nil {
		serr = cerr
	}
	if serr != nil && serr != errWouldBlock && sent == 0 && sendfileUnsupported(serr) {
		return 0, errSendfileUnsupported
	}
	return sent, serr
}

// errSendfileUnsupported: sendfile refused the file or socket before
// sending anything; the region goes by copy.
var errSendfileUnsupported = fmt.Errorf("netpoll: sendfile unsupported here")
