//go:build darwin || freebsd

package netpoll

import (
	"fmt"
	"log/slog"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// drainWatcher tells gnet connections when their socket has room again: a
// kqueue of our own with one-shot EVFILT_WRITE filters, waited on by one
// goroutine that wakes the connection's loop. See watch_linux.go and
// doc.go, "sendfile on gnet".
type drainWatcher struct {
	kq   int
	pipe [2]int // a byte written to pipe[1] stops the goroutine
	log  *slog.Logger

	mu    sync.Mutex
	conns map[int]*loopConn // by socket fd
	done  chan struct{}
}

func newDrainWatcher(log *slog.Logger) (*drainWatcher, error) {
	kq, err := unix.Kqueue()
	if err != nil {
		return nil, fmt.Errorf("netpoll: drain watcher: %w", os.NewSyscallError("kqueue", err))
	}
	unix.CloseOnExec(kq)
	w := &drainWatcher{kq: kq, log: log, conns: make(map[int]*loopConn), done: make(chan struct{})}
	if err := unix.Pipe(w.pipe[:]); err != nil {
		_ = unix.Close(kq)
		return nil, fmt.Errorf("netpoll: drain watcher: %w", os.NewSyscallError("pipe", err))
	}
	unix.CloseOnExec(w.pipe[0])
	unix.CloseOnExec(w.pipe[1])
	var ev [1]unix.Kevent_t
	unix.SetKevent(&ev[0], w.pipe[0], unix.EVFILT_READ, unix.EV_ADD)
	if _, err := unix.Kevent(kq, ev[:], nil, nil); err != nil {
		w.closeFds()
		return nil, fmt.Errorf("netpoll: drain watcher: %w", os.NewSyscallError("kevent", err))
	}
	go w.run()
	return w, nil
}

// arm asks for one wake-up of lc's loop when its socket is writable. Called
// on lc's loop while gnet keeps the socket open.
func (w *drainWatcher) arm(lc *loopConn) error {
	w.mu.Lock()
	w.conns[lc.fd] = lc
	w.mu.Unlock()
	var ev [1]unix.Kevent_t
	unix.SetKevent(&ev[0], lc.fd, unix.EVFILT_WRITE, unix.EV_ADD|unix.EV_ENABLE|unix.EV_ONESHOT)
	if _, err := unix.Kevent(w.kq, ev[:], nil, nil); err != nil {
		return os.NewSyscallError("kevent", err)
	}
	lc.watched = true
	return nil
}

// disarm forgets lc. Called on lc's loop in OnClose, before gnet closes the
// socket (closing it would drop the filter anyway).
func (w *drainWatcher) disarm(lc *loopConn) {
	w.mu.Lock()
	if w.conns[lc.fd] == lc {
		delete(w.conns, lc.fd)
	}
	w.mu.Unlock()
	if lc.watched {
		var ev [1]unix.Kevent_t
		unix.SetKevent(&ev[0], lc.fd, unix.EVFILT_WRITE, unix.EV_DELETE)
		_, _ = unix.Kevent(w.kq, ev[:], nil, nil) // ENOENT once the one shot fired
		lc.watched = false
	}
}

func (w *drainWatcher) run() {
	defer close(w.done)
	events := make([]unix.Kevent_t, 128)
	for {
		n, err := unix.Kevent(w.kq, nil, events, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			w.log.Error("netpoll: drain watcher stopped; stalled writes will not resume",
				"err", os.NewSyscallError("kevent", err))
			return
		}
		for i := range n {
			fd := int(events[i].Ident)
			if fd == w.pipe[0] {
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

// close stops the goroutine and releases its descriptors. Called after
// every connection closed.
func (w *drainWatcher) close() {
	_, _ = unix.Write(w.pipe[1], []byte{1})
	<-w.done
	w.closeFds()
}

func (w *drainWatcher) closeFds() {
	_ = unix.Close(w.pipe[0])
	_ = unix.Close(w.pipe[1])
	_ = unix.Close(w.kq)
}
