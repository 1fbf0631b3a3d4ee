//go:build linux

package powerfs_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"ringlog/internal/powerfs"
	"ringlog/ioring"
)

// mount serves a fresh powerfs for one test; FUSE must work here.
func mount(t *testing.T) *powerfs.FS { return powerfs.MountT(t, powerfs.Options{Seed: 1}) }

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes data to path, syncing it when sync says so.
func writeFile(t *testing.T, path string, data []byte, sync bool) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func powerLoss(t *testing.T, p *powerfs.FS, mode powerfs.Mode) {
	t.Helper()
	if err := p.PowerLoss(mode); err != nil {
		t.Fatal(err)
	}
}

func readOrMissing(t *testing.T, path string) ([]byte, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return b, true
}

func TestUnsyncedWriteIsLostSyncedWriteKept(t *testing.T) {
	p := mount(t)
	synced, unsynced := filepath.Join(p.Dir(), "synced"), filepath.Join(p.Dir(), "unsynced")
	writeFile(t, synced, []byte("kept"), true)
	writeFile(t, unsynced, []byte("lost"), false)
	syncDir(t, p.Dir())
	// Appended after the sync: lost, while what was synced stays.
	f, err := os.OpenFile(synced, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(" and more")
	f.Close()
	if b, _ := readOrMissing(t, synced); string(b) != "kept and more" {
		t.Fatalf("before the loss: %q", b)
	}

	powerLoss(t, p, powerfs.Drop)
	if b, ok := readOrMissing(t, synced); !ok || string(b) != "kept" {
		t.Fatalf("synced file after the loss: %q (exists %v), want \"kept\"", b, ok)
	}
	if b, ok := readOrMissing(t, unsynced); !ok || len(b) != 0 {
		t.Fatalf("unsynced file after the loss: %q (exists %v), want an empty file", b, ok)
	}
}

func TestCreateWithoutDirSyncVanishes(t *testing.T) {
	p := mount(t)
	path := filepath.Join(p.Dir(), "f")
	writeFile(t, path, []byte("data"), true) // the file is synced, its directory is not
	powerLoss(t, p, powerfs.Drop)
	if _, ok := readOrMissing(t, path); ok {
		t.Fatal("a file created in a directory never synced survived")
	}

	writeFile(t, path, []byte("data"), true)
	syncDir(t, p.Dir())
	powerLoss(t, p, powerfs.Drop)
	if b, ok := readOrMissing(t, path); !ok || string(b) != "data" {
		t.Fatalf("after syncing the file and its directory: %q (exists %v)", b, ok)
	}
}

func TestMkdirNeedsParentSync(t *testing.T) {
	p := mount(t)
	sub := filepath.Join(p.Dir(), "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(sub, "f"), []byte("x"), true)
	syncDir(t, sub)
	syncDir(t, filepath.Join(p.Dir(), "a")) // but not the root: a is not durable
	powerLoss(t, p, powerfs.Drop)
	if _, err := os.Stat(filepath.Join(p.Dir(), "a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a directory whose parent was never synced: stat says %v", err)
	}

	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(sub, "f"), []byte("x"), true)
	for _, d := range []string{sub, filepath.Join(p.Dir(), "a"), p.Dir()} {
		syncDir(t, d)
	}
	powerLoss(t, p, powerfs.Drop)
	if b, ok := readOrMissing(t, filepath.Join(sub, "f")); !ok || string(b) != "x" {
		t.Fatalf("after syncing every parent: %q (exists %v)", b, ok)
	}
}

// The write-to-temp, fsync, rename pattern: the rename is only durable
// once the directory is synced; until then the old content is what a
// power loss leaves.
func TestRenameNeedsDirSync(t *testing.T) {
	p := mount(t)
	dst, tmp := filepath.Join(p.Dir(), "meta"), filepath.Join(p.Dir(), "meta.tmp")
	writeFile(t, dst, []byte("old"), true)
	syncDir(t, p.Dir())

	writeFile(t, tmp, []byte("new"), true)
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
	powerLoss(t, p, powerfs.Drop)
	if b, _ := readOrMissing(t, dst); string(b) != "old" {
		t.Fatalf("rename without a directory sync: %q, want the old content", b)
	}
	if _, ok := readOrMissing(t, tmp); ok {
		t.Fatal("the temporary file was never in a synced directory, yet it survived")
	}

	writeFile(t, tmp, []byte("new"), true)
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
	syncDir(t, p.Dir())
	powerLoss(t, p, powerfs.Drop)
	if b, _ := readOrMissing(t, dst); string(b) != "new" {
		t.Fatalf("rename then directory sync: %q, want the new content", b)
	}
}

// A file removed without syncing its directory comes back, with the
// content it had at its last sync.
func TestUnlinkWithoutDirSyncComesBack(t *testing.T) {
	p := mount(t)
	path := filepath.Join(p.Dir(), "seg")
	writeFile(t, path, []byte("durable"), true)
	syncDir(t, p.Dir())
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	powerLoss(t, p, powerfs.Drop)
	if b, ok := readOrMissing(t, path); !ok || string(b) != "durable" {
		t.Fatalf("removed without a directory sync: %q (exists %v)", b, ok)
	}
}

// Writes through a shared mapping reach the file system when the kernel
// writes the pages back; they are durable after msync or fsync only.
func TestMmapWrites(t *testing.T) {
	p := mount(t)
	path := filepath.Join(p.Dir(), "index")
	for _, sync := range []bool{false, true} {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Fallocate(int(f.Fd()), 0, 0, 1<<20); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		syncDir(t, p.Dir())
		mem, err := syscall.Mmap(int(f.Fd()), 0, 1<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		copy(mem[8192:], "entry")
		if sync {
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		syscall.Munmap(mem)
		f.Close()

		powerLoss(t, p, powerfs.Drop)
		b, ok := readOrMissing(t, path)
		if !ok || len(b) != 1<<20 {
			t.Fatalf("sync %v: the fallocated, synced file has %d bytes (exists %v)", sync, len(b), ok)
		}
		if got := string(b[8192:8197]); (got == "entry") != sync {
			t.Fatalf("sync %v: the mapped write reads %q after the loss", sync, got)
		}
	}
}

// ringlog's two I/O paths write and sync through ioring: a write whose
// linked sync completed survives, a write without one does not.
func TestIoringPaths(t *testing.T) {
	p := mount(t)
	paths := map[string]func() (ioring.IO, ioring.Choice, error){
		"portable": func() (ioring.IO, ioring.Choice, error) { return ioring.Open(ioring.ModePortable, ioring.Config{}) },
		"uring":    func() (ioring.IO, ioring.Choice, error) { return ioring.Open(ioring.ModeUring, ioring.Config{}) },
		"uring-writes": func() (ioring.IO, ioring.Choice, error) {
			return ioring.Open(ioring.ModeUring, ioring.Config{Writes: ioring.WritesInRing})
		},
	}
	for mode, open := range paths {
		t.Run(mode, func(t *testing.T) {
			io, _, err := open()
			if err != nil {
				t.Fatal(err)
			}
			defer io.Close()
			path := filepath.Join(p.Dir(), mode)
			f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			synced := &ioring.Op{Kind: ioring.OpWrite, File: f, Offset: 0, Bufs: [][]byte{[]byte("synced.")}, Sync: ioring.SyncData}
			if err := ioring.Do(io, synced); err != nil {
				t.Fatal(err)
			}
			unsynced := &ioring.Op{Kind: ioring.OpWrite, File: f, Offset: 7, Bufs: [][]byte{[]byte("unsynced")}}
			if err := ioring.Do(io, unsynced); err != nil {
				t.Fatal(err)
			}
			f.Close()
			syncDir(t, p.Dir())
			powerLoss(t, p, powerfs.Drop)
			if b, _ := readOrMissing(t, path); string(b) != "synced." {
				t.Fatalf("after the loss: %q, want only the synced write", b)
			}
		})
	}
}

// Torn and Reorder keep part of the unsynced writes, never anything that
// was not written, and always everything that was synced.
func TestTornAndReorderKeepPartOfTheUnsynced(t *testing.T) {
	p := mount(t)
	path := filepath.Join(p.Dir(), "log")
	synced := bytes.Repeat([]byte("s"), 3*4096)
	page := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 4096) }
	sawPartial := map[powerfs.Mode]bool{}
	for round := 0; round < 20; round++ {
		for _, mode := range []powerfs.Mode{powerfs.Torn, powerfs.Reorder} {
			writeFile(t, path, synced, true)
			syncDir(t, p.Dir())
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 8 {
				f.Write(page(i))
			}
			f.Close()
			powerLoss(t, p, mode)
			b, _ := readOrMissing(t, path)
			if !bytes.HasPrefix(b, synced) {
				t.Fatalf("%v: the synced prefix was damaged", mode)
			}
			rest := b[len(synced):]
			if len(rest) > 8*4096 {
				t.Fatalf("%v: %d bytes past the synced part, more than was written", mode, len(rest))
			}
			for i := 0; i*4096 < len(rest); i++ {
				chunk := rest[i*4096 : min(len(rest), (i+1)*4096)]
				zero, want := bytes.Repeat([]byte{0}, len(chunk)), page(i)[:len(chunk)]
				switch {
				case bytes.Equal(chunk, want):
				case mode == powerfs.Reorder && bytes.Equal(chunk, zero):
				default:
					t.Fatalf("%v: page %d holds bytes never written there", mode, i)
				}
				if mode == powerfs.Torn && !bytes.Equal(chunk, want) {
					t.Fatalf("torn: page %d is not a prefix of what was written", i)
				}
			}
			var all []byte
			for i := range 8 {
				all = append(all, page(i)...)
			}
			if len(rest) > 0 && !bytes.Equal(rest, all) {
				sawPartial[mode] = true
			}
		}
	}
	for _, mode := range []powerfs.Mode{powerfs.Torn, powerfs.Reorder} {
		if !sawPartial[mode] {
			t.Errorf("%v: 20 power losses never kept part of the unsynced writes", mode)
		}
	}
}

// TestFail: under a failing directory writes and fsyncs answer EIO while
// reads still serve; files elsewhere are untouched; healing ends it.
func TestFail(t *testing.T) {
	p := mount(t)
	bad, good := filepath.Join(p.Dir(), "bad"), filepath.Join(p.Dir(), "badness")
	for _, d := range []string{bad, good} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(d, "f"), []byte("before"), true)
	}
	if err := p.Fail(bad); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(bad, "f"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("x"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("write under the failing directory: %v, want EIO", err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync under the failing directory: %v, want EIO", err)
	}
	if b, _ := readOrMissing(t, filepath.Join(bad, "f")); string(b) != "before" {
		t.Fatalf("read under the failing directory: %q", b)
	}
	writeFile(t, filepath.Join(good, "f"), []byte("after"), true) // a sibling whose name shares the prefix
	if err := p.Fail(""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("y"); err != nil {
		t.Fatalf("write after healing: %v", err)
	}
}
