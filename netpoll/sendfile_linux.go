package netpoll

import "golang.org/x/sys/unix"

// sendfile sends up to n bytes of file src from pos to socket dst and
// returns how many it sent; on a non-blocking socket that is what fitted in
// the socket buffer, with EAGAIN when nothing did. It never reports a
// negative count.
func sendfile(dst, src int, pos int64, n int) (int, error) {
	off := pos // Linux advances the offset it is given; ours stays put
	k, err := unix.Sendfile(dst, src, &off, n)
	return max(k, 0), err
}
