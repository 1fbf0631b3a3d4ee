package segment

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"ringlog/ioring"
)

// fileUse returns a file's size and the bytes of disk it holds (st_blocks).
func fileUse(t testing.TB, path string) (size, disk int64) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Size, st.Blocks * 512
}

// TestIndexFilesGrowWithEntries: with the default segment.index.bytes
// (10 MiB), a new log's index files hold no disk, and they grow with the
// entries in steps (never to the maximum at once). A crash leaves the
// grown files untrimmed; the reopen rebuilds them, and a clean close trims
// them to their entries. Before index files grew, each was fallocated to
// 10 MiB when the segment opened.
func TestIndexFilesGrowWithEntries(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	l := openLog(t, dir, cfg, Options{IO: ioring.NewPortable()})
	idx, tidx := l.active.path(indexSuffix), l.active.path(timeIndexSuffix)
	for _, p := range []string{idx, tidx} {
		if size, disk := fileUse(t, p); size != 0 || disk != 0 {
			t.Fatalf("%s of a new log: %d bytes, %d on disk; want none", filepath.Base(p), size, disk)
		}
	}

	// Batches of about 5 KB: each one after the first adds an entry to
	// both indexes (index.interval.bytes is 4096).
	var acked []byte
	sizes := map[int64]bool{}
	for i := range 600 {
		b := mkBatch(t, 1, 5000, int64(1000+i), i)
		if _, err := l.Append([][]byte{b}, AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, b...)
		size, _ := fileUse(t, idx)
		sizes[size] = true
		if n := int64(l.active.offsets.count.Load()) * offsetEntrySize; size < n {
			t.Fatalf("after batch %d: .index is %d bytes, its %d entries need %d", i, size, n/offsetEntrySize, n)
		}
	}
	if n := l.active.offsets.count.Load(); n != 599 {
		t.Fatalf("%d offset index entries, want 599", n)
	}
	if len(sizes) < 3 {
		t.Fatalf(".index took the sizes %v: want it to grow in steps", sizes)
	}
	for _, p := range []string{idx, tidx} {
		if size, disk := fileUse(t, p); size > 64<<10 || disk > 64<<10 {
			t.Fatalf("%s with 599 entries: %d bytes, %d on disk; want at most 64 KiB", filepath.Base(p), size, disk)
		}
	}

	crash(l)
	l = openLog(t, dir, cfg, Options{IO: ioring.NewPortable()})
	sameBytes(t, readAll(t, l), acked, "log after a crash")
	if n := l.active.offsets.count.Load(); n != 599 {
		t.Fatalf("rebuilt offset index has %d entries, want 599", n)
	}
	b := mkBatch(t, 1, 5000, 5000, 9999)
	if _, err := l.Append([][]byte{b}, AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	acked = append(acked, b...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if size, _ := fileUse(t, idx); size != 600*offsetEntrySize {
		t.Fatalf(".index after a clean close: %d bytes, want its 600 entries (%d)", size, 600*offsetEntrySize)
	}
	l = openLog(t, dir, cfg, Options{IO: ioring.NewPortable()})
	defer l.Close()
	sameBytes(t, readAll(t, l), acked, "log after a clean close")
	for off := int64(0); off < l.LEO(); off += 97 {
		got, err := l.ReadBatches(off, 1, l.LEO())
		if err != nil {
			t.Fatal(err)
		}
		if hs := splitBatches(t, got); len(hs) == 0 || hs[0].BaseOffset > off || hs[0].LastOffset() < off {
			t.Fatalf("read at %d found %v", off, hs)
		}
	}
}

// TestFullIndexRolls: a segment rolls when either index holds
// segment.index.bytes of entries, whatever the page size the mapping is
// rounded to, and every entry it holds is in the file (none past its end,
// where a store is not persisted). Before, a 48-byte time index took
// entries up to the end of its 4 KiB mapping and never rolled.
func TestFullIndexRolls(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentIndexBytes = 48 // 6 offset entries, 4 time entries
	cfg.IndexIntervalBytes = 0
	l := openLog(t, dir, cfg, Options{IO: ioring.NewPortable()})
	var acked []byte
	for i := range 40 {
		b := mkBatch(t, 2, 100, int64(1000+10*i), i)
		if _, err := l.Append([][]byte{b}, AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, b...)
	}
	// Every batch but a segment's first adds a time entry: 4 entries make
	// the time index full, so a segment holds 5 batches.
	if n := len(l.segs); n != 8 {
		t.Fatalf("%d segments, want 8 (5 batches each)", n)
	}
	for _, s := range l.segs[:len(l.segs)-1] {
		if n := s.times.count.Load(); n != 4 {
			t.Fatalf("segment %d: %d time entries, want 4", s.base, n)
		}
		for _, c := range []struct {
			suffix string
			want   int64
		}{{indexSuffix, 4 * offsetEntrySize}, {timeIndexSuffix, 4 * timeEntrySize}} {
			if size, _ := fileUse(t, s.path(c.suffix)); size != c.want {
				t.Fatalf("rolled segment %d: %s is %d bytes, want %d", s.base, c.suffix, size, c.want)
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg, Options{IO: ioring.NewPortable()})
	defer l.Close()
	sameBytes(t, readAll(t, l), acked, "log after reopening")
	for off := range l.LEO() {
		got, err := l.ReadBatches(off, 1, l.LEO())
		if err != nil {
			t.Fatal(err)
		}
		if hs := splitBatches(t, got); len(hs) == 0 || hs[0].BaseOffset > off || hs[0].LastOffset() < off {
			t.Fatalf("read at %d found %v", off, hs)
		}
	}
}

// TestIndexGrowOnFullDisk fills a small tmpfs, then appends a batch that
// needs an index entry: the index file cannot grow, and the append fails
// with ENOSPC (nothing written, the log goes on) instead of a SIGBUS from
// a store into a page past the file's end. Once space is freed the same
// append succeeds. Before index files grew, the log's 10 MiB of
// preallocated index did not even open on this file system.
func TestIndexGrowOnFullDisk(t *testing.T) {
	forEachIO(t, func(t *testing.T, x ioring.IO) {
		dir := mountTmpfs(t, "size=1m")
		l := openLog(t, filepath.Join(dir, "p-0"), DefaultConfig(), Options{IO: x})
		defer l.Close()
		first := mkBatch(t, 1, 5000, 1000, 1)
		if _, err := l.Append([][]byte{first}, AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		filler := fillDisk(t, dir)
		second := mkBatch(t, 1, 100, 1001, 2)
		_, err := l.Append([][]byte{second}, AppendOptions{})
		if !errors.Is(err, unix.ENOSPC) || !strings.Contains(err.Error(), "index") {
			t.Fatalf("append needing an index entry on a full disk: %v, want ENOSPC growing an index", err)
		}
		if l.Failed() != nil || l.LEO() != 1 {
			t.Fatalf("after the failed grow: log failed %v, LEO %d; want a usable log at LEO 1", l.Failed(), l.LEO())
		}
		if size, _ := fileUse(t, l.active.path(logSuffix)); size != int64(len(first)) {
			t.Fatalf(".log is %d bytes after the failed append, want %d", size, len(first))
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append([][]byte{second}, AppendOptions{}); err != nil {
			t.Fatalf("append after freeing space: %v", err)
		}
		sameBytes(t, readAll(t, l), append(first, second...), "log after the retry")
	})
}

// mountTmpfs mounts a tmpfs of the given options on a new temporary
// directory for the test's life. The test fails when it cannot (it runs
// as root here, and a skipped full-disk test proves nothing).
func mountTmpfs(t *testing.T, opts string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		t.Fatalf("mount a tmpfs (%s) on %s: %v", opts, dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillDisk writes a file in dir until the file system is full and returns
// its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Fatal(err)
			}
			return path
		}
	}
}

// TestIndexOfNoEntryRolls: segment.index.bytes=4, Kafka's minimum, holds
// no entry: every append after a segment's first starts a segment, and the
// log reads back whole after a reopen.
func TestIndexOfNoEntryRolls(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentIndexBytes = 4
	l := openLog(t, dir, cfg, Options{IO: ioring.NewPortable()})
	var acked []byte
	for i := range 6 {
		b := mkBatch(t, 1, 5000, int64(1000+i), i)
		if _, err := l.Append([][]byte{b}, AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, b...)
	}
	if n := len(l.segs); n != 6 {
		t.Fatalf("%d segments, want one per append", n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, cfg, Options{IO: ioring.NewPortable()})
	defer l.Close()
	sameBytes(t, readAll(t, l), acked, "log after reopening")
}
