package netpoll

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// writeRegion sends a file region on a portable connection with sendfile,
// through the socket's RawConn so that waiting for room in the socket buffer
// parks the goroutine on Go's poller (RawConn.Write calls us again once the
// socket is writable) instead of blocking a thread. A file or socket that
// sendfile refuses is copied instead.
func writeRegion(pc *pconn, f *os.File, pos, n int64) (int64, error) {
	st := &pc.p.s.st
	sc, ok := pc.nc.(syscall.Conn)
	if !ok {
		return copyRegion(pc.nc, f, pos, n, pc.c)
	}
	dst, err := sc.SyscallConn()
	if err != nil {
		return 0, err
	}
	src, err := f.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("netpoll: region of %s: %w", f.Name(), err)
	}
	var sent int64
	var serr error
	// Control holds the file open for the duration: a concurrent Close
	// cannot hand its descriptor number to another file under us.
	cerr := src.Control(func(ffd uintptr) {
		werr := dst.Write(func(sfd uintptr) bool {
			for sent < n {
				k, e := sendfile(int(sfd), int(ffd), pos+sent, int(min(n-sent, sendfileChunkMax)))
				if k > 0 {
					sent += int64(k)
					st.sendfileBytes.Add(int64(k))
					pc.c.markWrite()
				}
				switch {
				case e == unix.EINTR:
				case e == unix.EAGAIN:
					return false // wait until writable, then call again
				case e != nil:
					serr = os.NewSyscallError("sendfile", e)
					return true
				case k == 0:
					serr = fmt.Errorf("netpoll: %s at %d: %w", f.Name(), pos+sent, ErrShortRegion)
					return true
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
	})
	if serr == nil {
		serr = cerr
	}
	if serr != nil && sent == 0 && sendfileUnsupported(serr) {
		return copyRegion(pc.nc, f, pos, n, pc.c)
	}
	return sent, serr
}
