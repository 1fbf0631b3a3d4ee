//go:build linux

package ioring

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// directRing returns a ring and an O_DIRECT file in t.TempDir(), on the
// disk, both closed when t ends.
func directRing(t *testing.T) (*uringIO, *os.File) {
	t.Helper()
	u, err := newUring(Config{Entries: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "direct"), os.O_RDWR|os.O_CREATE|unix.O_DIRECT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return u, f
}

// TestDirectWriteFromArenaIsFixed: a direct write from a staging buffer of
// the arena goes to the kernel as a WRITE_FIXED (the ring registered the
// arena's chunks), one from other memory as a plain WRITE, and both put
// their bytes in the file (an O_DIRECT file in t.TempDir(), on the disk).
func TestDirectWriteFromArenaIsFixed(t *testing.T) {
	u, f := directRing(t)
	fixed0, _ := DirectWrites()

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
	if fixed, _ := DirectWrites(); fixed-fixed0 != 1 || u.r.fixedErr != nil {
		t.Fatalf("after a write from the arena: %d fixed writes (ring: %v), want 1", fixed-fixed0, u.r.fixedErr)
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
	if fixed, _ := DirectWrites(); fixed-fixed0 != 1 {
		t.Fatalf("a write from outside the arena went fixed (%d fixed writes)", fixed-fixed0)
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

const partialChildEnv = "RINGLOG_IORING_PARTIAL_CHILD"

// TestFixedBuffersPartlyRegistered: when the kernel registers some of the
// chunks a ring asks for and refuses the rest (BUFFERS_UPDATE stops at the
// first chunk it cannot pin or charge to RLIMIT_MEMLOCK and returns how
// many it took), writes from the chunks it took go fixed, writes from the
// others go plain, and every write puts its bytes in the file. Taking the
// update for all the chunks made writes from the refused ones WRITE_FIXED
// from an empty slot, which the kernel fails with EFAULT: a partition's
// append error. The refused chunk here is read-only memory (the kernel
// pins a fixed buffer for writing into it too); in a deployment it is the
// memlock limit of a process without CAP_IPC_LOCK, which this machine's
// hard limit of 8 MiB, one chunk, cannot show. It runs in a child process
// (this test again): the chunk is put in the arena by hand, and the
// arena is the process's.
func TestFixedBuffersPartlyRegistered(t *testing.T) {
	if os.Getenv(partialChildEnv) != "" {
		partialChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFixedBuffersPartlyRegistered$", "-test.v")
	cmd.Env = append(os.Environ(), partialChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestFixedBuffersPartlyRegistered")) {
		t.Fatalf("the child: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

func partialChild(t *testing.T) {
	u, f := directRing(t)

	// Two chunks, a buffer filling each: the arena is new in this
	// process, so they are its chunks 0 and 1.
	var bufs [][]byte
	for i := range 2 {
		b := Stage(stageChunkBytes, 512)
		if idx, ok := stageArena.index(b); !ok || idx != i {
			t.Fatalf("staging buffer %d: chunk %d (in the arena: %v)", i, idx, ok)
		}
		for j := range b {
			b[j] = byte(i*7 + j%251)
		}
		bufs = append(bufs, b)
	}
	// Chunk 2: read-only, as full as the others so that nothing is carved
	// from it.
	ro, err := unix.Mmap(-1, 0, stageChunkBytes, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	stageArena.mu.Lock()
	chunks := append(stageArena.snapshot()[:2:2], ro)
	stageArena.chunks.Store(&chunks)
	stageArena.used = stageChunkBytes
	stageArena.mu.Unlock()
	bufs = append(bufs, ro)

	// The read-only chunk first: the ring asks for all three at once.
	for _, i := range []int{2, 0, 1} {
		before, _ := DirectWrites()
		op := &Op{Kind: OpWrite, File: f, Offset: int64(i) * stageChunkBytes, Bufs: [][]byte{bufs[i]}, Direct: true}
		if err := Do(u, op); err != nil {
			t.Fatalf("the write from chunk %d: %v (ring: %d chunks registered, %v)", i, err, u.r.fixedN, u.r.fixedErr)
		}
		if after, _ := DirectWrites(); (after > before) != (i < 2) {
			t.Errorf("the write from chunk %d went fixed: %v, want %v (ring: %d chunks registered, %v)", i, after > before, i < 2, u.r.fixedN, u.r.fixedErr)
		}
	}
	t.Logf("the ring registered %d chunks: %v", u.r.fixedN, u.r.fixedErr)
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range bufs {
		if !bytes.Equal(got[i*stageChunkBytes:(i+1)*stageChunkBytes], b) {
			t.Errorf("the file does not hold what chunk %d wrote", i)
		}
	}
}
