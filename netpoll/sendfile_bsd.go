//go:build darwin || freebsd

package netpoll

import "golang.org/x/sys/unix"

// sendfile sends up to n bytes of file src from pos to socket dst and
// returns how many it sent. On the BSDs a non-blocking socket may report
// EAGAIN together with a partial count; the count is what matters, so
// EAGAIN is only reported when nothing was sent.
func sendfile(dst, src int, pos int64, n int) (int, error) {
	off := pos
	k, err := unix.Sendfile(dst, src, &off, n)
	k = max(k, 0)
	if err == unix.EAGAIN && k > 0 {
		err = nil
	}
	return k, err
}
