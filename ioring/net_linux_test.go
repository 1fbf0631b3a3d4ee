//go:build linux

package ioring

import (
	"bytes"
	"net"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestProbeNet(t *testing.T) {
	if why := ProbeNet(); why != "" {
		t.Skipf("io_uring network path unavailable: %s", why)
	}
}

// tcpPair returns the two ends of a TCP connection on 127.0.0.1 as raw
// non-blocking descriptors (what netpoll hands a loop).
func tcpPair(t *testing.T) (int, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	dup := func(nc net.Conn) int {
		f, err := nc.(*net.TCPConn).File()
		if err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Dup(int(f.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		_ = nc.Close()
		if err := unix.SetNonblock(fd, true); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Close(fd) })
		return fd
	}
	return dup(c), dup(s)
}

// A multishot receive on a non-blocking TCP socket stays armed across
// arrivals, spreads a large write over several provided buffers, and
// waits (ENOBUFS ends it) when the program holds every buffer; a sendmsg
// of two iovecs goes out whole.
func TestNetRingRecvSend(t *testing.T) {
	if why := ProbeNet(); why != "" {
		t.Skipf("io_uring network path unavailable: %s", why)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n, err := NewNetRing(16, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Close(); err != nil { // unregisters the ring descriptor too
			t.Error(err)
		}
	}()
	if n.r.enterFlags&enterRegisteredRing == 0 {
		t.Error("the ring's descriptor was not registered (IORING_REGISTER_RING_FDS)")
	}
	bufs, err := n.RegisterBufRing(3, 4, 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer bufs.Close()
	cli, srv := tcpPair(t)

	want := bytes.Repeat([]byte("0123456789abcdef"), 160) // 2560 bytes: 3 buffers
	if _, err := unix.Write(cli, want); err != nil {
		t.Fatal(err)
	}
	if err := n.RecvMultishot(srv, bufs.Group(), 7); err != nil {
		t.Fatal(err)
	}
	var got []byte
	armed := true
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		if err := n.EnterTimeout(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		n.Reap(func(c NetCQE) {
			if c.Res < 0 {
				t.Fatalf("recv: %v", unix.Errno(-c.Res))
			}
			id, ok := c.Buffer()
			if !ok {
				t.Fatalf("completion without a buffer: %+v", c)
			}
			got = append(got, bufs.Bytes(id, int(c.Res))...)
			bufs.Recycle(id)
			armed = c.More()
		})
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("received %d bytes, want %d equal", len(got), len(want))
	}
	if !armed {
		t.Fatal("multishot receive ended")
	}

	// sendmsg of two iovecs, server to client.
	a, b := []byte("hello, "), []byte("ring")
	iov := []unix.Iovec{{Base: &a[0]}, {Base: &b[0]}}
	iov[0].SetLen(len(a))
	iov[1].SetLen(len(b))
	msg := &unix.Msghdr{Iov: &iov[0]}
	msg.SetIovlen(len(iov))
	if err := n.Sendmsg(srv, msg, unix.MSG_NOSIGNAL, 9); err != nil {
		t.Fatal(err)
	}
	var sent int32 = -1
	for sent < 0 && time.Now().Before(deadline) {
		if err := n.EnterTimeout(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		n.Reap(func(c NetCQE) {
			if c.UserData == 9 {
				sent = c.Res
			}
		})
	}
	runtime.KeepAlive(msg)
	runtime.KeepAlive(iov)
	if sent != int32(len(a)+len(b)) {
		t.Fatalf("sendmsg: %d", sent)
	}
	rb := make([]byte, 64)
	_ = unix.SetNonblock(cli, false)
	k, err := unix.Read(cli, rb)
	if err != nil || string(rb[:k]) != "hello, ring" {
		t.Fatalf("client read %q, %v", rb[:k], err)
	}

	// Cancel the receive; its last completion has no More.
	if err := n.CancelFD(srv, 8); err != nil {
		t.Fatal(err)
	}
	for armed && time.Now().Before(deadline) {
		if err := n.EnterTimeout(100 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		n.Reap(func(c NetCQE) {
			if c.UserData == 7 && !c.More() {
				armed = false
			}
		})
	}
	if armed {
		t.Fatal("receive not cancelled")
	}
}
