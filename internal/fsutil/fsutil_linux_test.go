package fsutil_test

import (
	"os"
	"path/filepath"
	"testing"

	"ringlog/internal/fsutil"
	"ringlog/internal/powerfs"
)

// TestDurableAcrossPowerLoss: a directory tree made with MkdirAllDurable
// and a file written with WriteFileAtomic inside it survive a power loss;
// the same tree made with os.MkdirAll does not (which is what made every
// topic vanish with -flush always, issue 20).
func TestDurableAcrossPowerLoss(t *testing.T) {
	pfs := powerfs.MountT(t, powerfs.Options{})
	durable := filepath.Join(pfs.Dir(), "a", "b", "data")
	plain := filepath.Join(pfs.Dir(), "c", "d", "data")
	if err := fsutil.MkdirAllDurable(durable, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{durable, plain} {
		if err := fsutil.WriteFileAtomic(dir, "topics.json", []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	// Already there: nothing to do, no error.
	if err := fsutil.MkdirAllDurable(durable, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := pfs.PowerLoss(powerfs.Drop); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(durable, "topics.json")); err != nil || string(b) != "{}" {
		t.Fatalf("durable tree after the power loss: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(pfs.Dir(), "c")); !os.IsNotExist(err) {
		t.Fatalf("a tree made with os.MkdirAll survived: the test cannot tell the difference (%v)", err)
	}
}
