//go:build linux

package ioring

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestDirectWriteFromArenaIsFixed: a direct write from a staging buffer of
// the arena goes to the kernel as a WRITE_FIXED (the ring registered the
// arena's chunks), one from other memory as a plain WRITE, and both put
// their bytes in the file (an O_DIRECT file in t.TempDir(), on the disk).
func TestDirectWriteFromArenaIsFixed(t *testing.T) {
	u, err := newUring(Config{Entries: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "direct"), os.O_RDWR|os.O_CREATE|unix.O_DIRECT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	staged := Stage(8192, 512)
	defer Unstage(staged)
	if _, ok := stageArena.index(staged); !ok {
		t.Fatal("the staging buffer is not in the arena")
	}
	for i := range staged {
		staged[i] = byte(i % 251)
	}
	op := &Op{Kind: OpWrite, File: f, Offset: 0, Bufs: [][]byte{staged}, Direct: true}
	if err := Do(u, op); err != nil {
		t.Fatal(err)
	}
	if u.fixedWrites != 1 || u.r.fixedErr != nil {
		t.Fatalf("after a write from the arena: %d fixed writes (ring: %v), want 1", u.fixedWrites, u.r.fixedErr)
	}

	// Memory outside the arena, aligned as O_DIRECT wants.
	plain := alignedBytes(8192, stageAlign)
	for i := range plain {
		plain[i] = byte(i % 13)
	}
	op = &Op{Kind: OpWrite, File: f, Offset: 8192, Bufs: [][]byte{plain}, Direct: true}
	if err := Do(u, op); err != nil {
		t.Fatal(err)
	}
	if u.fixedWrites != 1 {
		t.Fatalf("a write from outside the arena went fixed (%d fixed writes)", u.fixedWrites)
	}

	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:8192], staged) || !bytes.Equal(got[8192:], plain) {
		t.Fatal("the file does not hold what was written")
	}
}

// TestStageArenaHugePages: the arena's chunks are aligned to a huge page
// and, where the system gives transparent huge pages to memory that asks
// for them (enabled "always" or "madvise"), a chunk touched is backed by
// them (/proc/self/smaps' AnonHugePages for the chunk's mapping); with
// "never" it is still an aligned chunk of its own mapping.
func TestStageArenaHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	// Two chunks' worth of buffers, so that one chunk at least is new to
	// this test and touched here first.
	var held [][]byte
	defer func() {
		for _, b := range held {
			Unstage(b)
		}
	}()
	var chunk []byte
	for range 2 * stageChunkBytes / (1 << 20) {
		b := Stage(1<<20, 512)
		held = append(held, b)
		idx, ok := stageArena.index(b)
		if !ok {
			t.Fatal("a staging buffer of 1 MiB did not come from the arena")
		}
		chunk = stageArena.snapshot()[idx]
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
	}
	at := uintptr(unsafe.Pointer(&chunk[0]))
	if at%hugePage != 0 {
		t.Fatalf("an arena chunk at %#x, not aligned to %d", at, hugePage)
	}
	huge := anonHugeKiB(t, at)
	want := bytes.Contains(mode, []byte("[always]")) || bytes.Contains(mode, []byte("[madvise]"))
	t.Logf("transparent_hugepage/enabled %q: the chunk's mapping has %d KiB of huge pages", bytes.TrimSpace(mode), huge)
	if want && huge < hugePage>>10 {
		t.Fatalf("the chunk's mapping has %d KiB of huge pages, want at least one (%d KiB) with THP %q", huge, hugePage>>10, bytes.TrimSpace(mode))
	}
}

// anonHugeKiB returns AnonHugePages of the mapping holding addr, from
// /proc/self/smaps.
func anonHugeKiB(t *testing.T, addr uintptr) int {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for line := range bytes.Lines(smaps) {
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(string(line), "%x-%x ", &lo, &hi); n == 2 {
			in = addr >= lo && addr < hi
			continue
		}
		var kib int
		if in {
			if n, _ := fmt.Sscanf(string(line), "AnonHugePages: %d kB", &kib); n == 1 {
				return kib
			}
		}
	}
	t.Fatalf("no mapping in /proc/self/smaps holds %#x", addr)
	return 0
}
