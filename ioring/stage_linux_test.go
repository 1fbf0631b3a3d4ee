//go:build linux

package ioring

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

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
