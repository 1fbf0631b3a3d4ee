package testkit

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// CorruptSegment writes garbage over the second batch of the first
// segment of a partition folder, valid batches following it, and removes
// the clean-shutdown marker as a crash would: recovery then finds
// corruption, not a torn tail (segment/recover.go), and refuses the log.
func CorruptSegment(t testing.TB, dir string) {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no segment in %s: %v", dir, err)
	}
	slices.Sort(logs)
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	first := 12 + int(b[8])<<24 | int(b[9])<<16 | int(b[10])<<8 | int(b[11])
	if len(b) < 3*first {
		t.Fatalf("segment %s of %d bytes has no middle to corrupt", logs[0], len(b))
	}
	// Not zeros: a zeroed run up to a page boundary reads as a page never
	// written back (an unsynced tail), which recovery cuts.
	copy(b[first+20:], bytes.Repeat([]byte{0xA5, 0x5A, 0xC3, 0x3C}, 16))
	if err := os.WriteFile(logs[0], b, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "clean-shutdown")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}
