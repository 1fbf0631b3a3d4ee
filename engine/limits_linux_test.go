package engine

import (
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"ringlog/ioring"
)

// diskUse sums st_blocks (in bytes) of the files under dir whose names end
// in one of suffixes (every file when none is given).
func diskUse(t testing.TB, dir string, suffixes ...string) (files int, bytes int64) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		match := len(suffixes) == 0
		for _, s := range suffixes {
			match = match || strings.HasSuffix(path, s)
		}
		if !match {
			return nil
		}
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			return err
		}
		files++
		bytes += st.Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files, bytes
}

// TestManyPartitionsHoldLittleDisk: creating partitions costs their index
// files no disk, and one record in each costs a page per index at most.
// Before index files grew with their entries, each of the 2,000 index
// files below was fallocated to segment.index.bytes (10 MiB): 20 GiB for a
// request any client may send.
func TestManyPartitionsHoldLittleDisk(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, ioring.ModeAuto)
	defer e.Close()
	const parts = 1000
	if _, err := e.CreateTopic("wide", parts, 1, nil, false); err != nil {
		t.Fatal(err)
	}
	n, idx := diskUse(t, dir, ".index", ".timeindex")
	_, all := diskUse(t, dir)
	t.Logf("%d partitions created: %d index files hold %d bytes of disk, the data directory %d", parts, n, idx, all)
	if n != 2*parts || idx != 0 {
		t.Fatalf("%d index files hold %d bytes of disk, want %d holding none", n, idx, 2*parts)
	}
	for p := range int32(parts) {
		if _, err := appendSync(e, TP{"wide", p}, mkBatch(t, 1, "v", 1000, -1, -1, -1)); err != nil {
			t.Fatal(err)
		}
	}
	_, idx = diskUse(t, dir, ".index", ".timeindex")
	_, all = diskUse(t, dir)
	t.Logf("after one record in each: index files hold %d bytes of disk, the data directory %d", idx, all)
	if idx > 2*parts*4096 {
		t.Fatalf("index files hold %d bytes of disk after one record per partition, want at most a page each (%d)", idx, 2*parts*4096)
	}
}
