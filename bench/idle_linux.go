package bench

import (
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerOpen says whether the other end of c has not closed it, without
// waiting and without taking a byte: a peek that finds nothing to read
// (EAGAIN) is an open connection, one that reads end of file or fails is
// a closed one.
func peerOpen(c net.Conn) (bool, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false, errNoPeek
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, err
	}
	open := false
	var buf [1]byte
	cerr := rc.Control(func(fd uintptr) {
		n, _, err := unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		open = err == unix.EAGAIN || n > 0
	})
	return open, cerr
}

// raiseNoFile raises this process's soft RLIMIT_NOFILE to want, within
// the hard limit (the brokers it starts inherit it; ringlog raises its
// own to the hard limit anyway). A hard limit below want is an error.
func raiseNoFile(want uint64) error {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur >= want {
		return nil
	}
	if l.Max < want {
		return fmt.Errorf("bench: RLIMIT_NOFILE's hard limit is %d, the idle connections need %d (raise it with ulimit -Hn)", l.Max, want)
	}
	l.Cur = want
	return unix.Setrlimit(unix.RLIMIT_NOFILE, &l)
}
