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
