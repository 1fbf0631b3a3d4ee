package testkit

import (
	"os"
	"testing"
)

// IORings counts the io_uring instances the process holds open: the
// descriptors in /proc/self/fd that are anon_inode:[io_uring].
func IORings(t testing.TB) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && l == "anon_inode:[io_uring]" {
			n++
		}
	}
	return n
}
