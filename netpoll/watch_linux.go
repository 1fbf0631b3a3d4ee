package netpoll

import (
	"fmt"
	"log/slog"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// drainWatcher tells gnet connections when their socket has room again.
// gnet has no writable-event hook (its own EPOLLOUT only flushes its
// outbound buffer), so a connection whose sendfile hit EAGAIN registers its
// socket here, in an epoll set of our own, for one EPOLLOUT (EPOLLONESHOT);
// one goroutine waits on it and wakes the connection's loop, which resumes
// the sendfile where it stopped. See doc.go, "sendfile on gnet".
type drainWatcher struct {
	epfd int
	evfd int // written to stop the goroutine
	log  *slog.Logger

	mu    sync.Mutex
	conns map[int]*loopConn // by socket fd
	done  chan struct{}
}

func newDrainWatcher(log *slog.Logger) (*drainWatcher, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("netpoll: drain watcher: %w", os.NewSyscallError("epoll_create1", err))
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = unix.Close(epfd)
		return nil, fmt.Errorf("netpoll: drain watcher: %w", os.NewSyscallError("eventfd", err))
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd)}); err != nil {
		_ = unix.Close(evfd)
		_ = unix.Close(epfd)
		return nil, fmt.Errorf("netpoll: drain watcher: %w", os.NewSyscallError("epoll_ctl", err))
	}
	w := &drainWatcher{epfd: epfd, evfd: evfd, log: log, conns: make(map[int]*loopConn), done: make(chan struct{})}
	go w.run()
	return w, nil
}

// arm asks for one wake-up of lc's loop when its socket is writable
// (immediately if it already is). Called on lc's loop, while gnet keeps the
// socket open.
func (w *drainWatcher) arm(lc *loopConn) error {
	w.mu.Lock()
	w.conns[lc.fd] = lc
	w.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLONESHOT, Fd: int32(lc.fd)}
	op := unix.EPOLL_CTL_MOD
	if !lc.watched {
		op = unix.EPOLL_CTL_ADD
	}
	err := unix.EpollCtl(w.epfd, op, lc.fd, &ev)
	if err == unix.EEXIST {
		err = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_MOD, lc.fd, &ev)
	} else if err == unix.ENOENT {
		err = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, lc.fd, &ev)
	}
	if err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	lc.watched = true
	return nil
}

// disarm forgets lc. Called on lc's loop in OnClose, before gnet closes the
// socket, so the descriptor cannot have been reused by then.
func (w *drainWatcher) disarm(lc *loopConn) {
	w.mu.Lock()
	if w.conns[lc.fd] == lc {
		delete(w.conns, lc.fd)
	}
	w.mu.Unlock()
	if lc.watched {
		_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, lc.fd, nil)
		lc.watched = false
	}
}

func (w *drainWatcher) run() {
	defer close(w.done)
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(w.epfd, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			// Only a bug gets here (EBADF, EINVAL). Connections waiting for
			// room would stall from now on: say so loudly.
			w.log.Error("netpoll: drain watcher stopped; stalled writes will not resume",
				"err", os.NewSyscallError("epoll_wait", err))
			return
		}
		for i := range n {
			fd := int(events[i].Fd)
			if fd == w.evfd {
				return
			}
			w.mu.Lock()
			lc := w.conns[fd]
			w.mu.Unlock()
			if lc != nil {
				lc.wakeNow()
			}
		}
	}
}

// close stops the goroutine and releases the epoll set. Called after every
// connection closed.
func (w *drainWatcher) close() {
	one := [8]byte{1} // any non-zero count, whatever the byte order
	_, _ = unix.Write(w.evfd, one[:])
	<-w.done
	_ = unix.Close(w.evfd)
	_ = unix.Close(w.epfd)
}
