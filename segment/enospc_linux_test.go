package segment

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"ringlog/ioring"
)

// TestAppendOnFullDisk fills a small tmpfs: the append that does not fit
// fails with ENOSPC, is rolled back (LEO and file size unchanged), and
// once space is freed appends continue after the acknowledged data.
func TestAppendOnFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	forEachIO(t, func(t *testing.T, x ioring.IO) {
		dir := t.TempDir()
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=640k"); err != nil {
			t.Skipf("mount tmpfs: %v", err)
		}
		defer unix.Unmount(dir, unix.MNT_DETACH)
		filler := filepath.Join(dir, "filler")
		os.WriteFile(filler, make([]byte, 128<<10), 0o644)
		cfg := DefaultConfig()
		cfg.SegmentIndexBytes = 4096
		l := openLog(t, filepath.Join(dir, "p-0"), cfg, Options{IO: x})
		var acked []byte
		var failed error
		for i := range 200 {
			b := mkBatch(t, 4, 5000, 1, i)
			if _, err := l.Append([][]byte{b}, AppendOptions{}); err != nil {
				failed = err
				break
			}
			acked = append(acked, b...)
		}
		if !errors.Is(failed, unix.ENOSPC) {
			t.Fatalf("append on a full disk: %v, want ENOSPC", failed)
		}
		if l.Failed() != nil {
			t.Fatalf("a failed write (not a failed sync) stopped the log: %v", l.Failed())
		}
		if st, _ := os.Stat(l.active.path(logSuffix)); st.Size() != int64(len(acked)) || l.Size() != int64(len(acked)) {
			t.Fatalf("file %d bytes, committed %d, acknowledged %d", st.Size(), l.Size(), len(acked))
		}
		sameBytes(t, readAll(t, l), acked, "log after ENOSPC")
		os.Remove(filler)
		b := mkBatch(t, 1, 100, 1, 999)
		if _, err := l.Append([][]byte{b}, AppendOptions{}); err != nil {
			t.Fatalf("append after freeing space: %v", err)
		}
		acked = append(acked, b...)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = openLog(t, filepath.Join(dir, "p-0"), cfg, Options{IO: x})
		defer l.Close()
		sameBytes(t, readAll(t, l), acked, "log after restart")
	})
}
