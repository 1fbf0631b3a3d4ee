package segment

import (
	"testing"

	"golang.org/x/sys/unix"
)

// cachedPages is the number of pages of [off, off+n) of s's file in the
// page cache (cachestat, Linux 6.5).
func cachedPages(t *testing.T, s *segment, off, n int64) uint64 {
	t.Helper()
	var st unix.Cachestat_t
	if err := unix.Cachestat(uint(s.log.Fd()), &unix.CachestatRange{Off: uint64(off), Len: uint64(n)}, &st, 0); err != nil {
		t.Fatalf("cachestat: %v", err)
	}
	return st.Cache
}

// TestDirectWritesReadahead: direct writes leave the page cache empty;
// reading the active segment's batches back brings them in, and not the
// blocks reserved past them (the kernel's readahead, 128 KiB to 8 MiB past
// a read, is off on that file while it runs ahead of its data); once the
// segment rolls (cut to its data), readahead is back on. Without the
// advice, the read fills the cache with zeros past the data.
func TestDirectWritesReadahead(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 32 << 20
	l := openLog(t, t.TempDir(), cfg, Options{DirectWrites: true})
	defer l.Close()
	for i := range 64 {
		if _, err := l.Append([][]byte{mkBatch(t, 4, 1000, 1, i)}, AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a := l.active
	size, allocated := a.size(), a.direct.allocated
	if allocated-size < 1<<20 {
		t.Fatalf("%d bytes of data, file of %d: want blocks reserved past the data", size, allocated)
	}
	page := int64(4096)
	tailFrom := (size + page - 1) / page * page
	if n := cachedPages(t, a, 0, allocated); n > 1 {
		t.Fatalf("%d pages cached after direct writes alone", n)
	}
	// Read as a consumer reads, in pieces in order: what makes the
	// kernel read ahead, further at each piece.
	buf := make([]byte, 4096)
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := a.log.ReadAt(buf[:min(int64(len(buf)), size-off)], off); err != nil {
			t.Fatal(err)
		}
	}
	readAll(t, l)
	if n := cachedPages(t, a, 0, size); n == 0 {
		t.Fatalf("no page cached after reading the segment back")
	}
	// A read may take a little past what it asks for (the header
	// reader's window); readahead takes from 32 pages up.
	if n := cachedPages(t, a, tailFrom, allocated-tailFrom); n > 4 {
		t.Fatalf("%d pages of the reserved blocks past the data cached by the read: readahead is on", n)
	}
	if !a.noReadahead.Load() {
		t.Fatal("the active segment does not ask Read for willNeed")
	}
	if err := a.trimDirect(); err != nil {
		t.Fatal(err)
	}
	if a.noReadahead.Load() {
		t.Fatal("readahead still off after the reserved blocks were cut")
	}
}

// TestDirectWritesBlockAligned: a log's direct writes keep the file
// system's block in their offsets and lengths, not only what the device
// takes (512 bytes here, under ext4's 4 KiB blocks): ext4 runs a write
// aligned to the sector but not to the block as unaligned, which io_uring
// hands to a worker thread that waits for the device, one per append.
func TestDirectWritesBlockAligned(t *testing.T) {
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, dir, smallConfig(), Options{DirectWrites: true})
	defer l.Close()
	if why := l.DirectWritesOff(); why != "" {
		t.Fatalf("direct writes off in %s: %s", dir, why)
	}
	for i := range 3 {
		if _, err := l.Append([][]byte{mkBatch(t, 2, 100, 1, i)}, AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d := l.active.direct
	if d == nil {
		t.Fatal("the active segment has no direct file after direct appends")
	}
	if d.align%fs.Bsize != 0 {
		t.Fatalf("direct writes aligned to %d bytes, the file system's block is %d", d.align, fs.Bsize)
	}
}

func TestDirectAlign(t *testing.T) {
	for _, c := range []struct{ dio, blk, want int64 }{
		{512, 4096, 4096},          // ext4 on a 512-byte-sector disk
		{4096, 4096, 4096},         // a 4Kn disk
		{512, 512, 512},            // 512-byte blocks
		{4096, 1024, 4096},         // a block smaller than the device's unit
		{512, 1 << 20, 512},        // a preferred I/O size, not a block
		{512, 12288, 512},          // not a power of two
		{4096, 64 << 10, 64 << 10}, // 64 KiB blocks
	} {
		if got := directAlign(c.dio, c.blk); got != c.want {
			t.Errorf("directAlign(%d, %d) = %d, want %d", c.dio, c.blk, got, c.want)
		}
	}
}
