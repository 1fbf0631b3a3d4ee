package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"ringlog/ioring"
)

func openDirs(t testing.TB, dirs ...string) (*Core, error) {
	t.Helper()
	return OpenCore(Config{Dir: dirs[0], LogDirs: dirs[1:], Shards: 2, IO: ioring.ModePortable})
}

// partitionDirs maps each partition folder found in dirs to the directory
// holding it.
func partitionDirs(t testing.TB, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, ent := range ents {
			if ent.IsDir() && isPartitionDir(ent.Name()) {
				if other, ok := out[ent.Name()]; ok {
					t.Fatalf("%s in %s and %s", ent.Name(), other, d)
				}
				out[ent.Name()] = d
			}
		}
	}
	return out
}

// TestLogDirsSpreadPartitions: with three log directories, nine new
// partitions (a topic of 4, then one of 5) go three to each directory, the
// fewest-partitions rule; each directory gets a meta.properties with its
// own directory.id; after a restart every partition opens from where it
// is, with its records.
func TestLogDirsSpreadPartitions(t *testing.T) {
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "c")}
	e, err := openDirs(t, dirs...)
	mustOK(t, err)
	if _, err := e.CreateTopic("x", 4, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateTopic("y", 5, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	fillPartitions(t, e, "x", 4, 2)
	fillPartitions(t, e, "y", 5, 2)
	placed := partitionDirs(t, dirs...)
	per := map[string]int{}
	for _, d := range placed {
		per[d]++
	}
	for _, d := range dirs {
		if per[d] != 3 {
			t.Fatalf("partitions per directory %v, want 3 in each", per)
		}
	}
	ids := map[string]bool{}
	for i, ld := range e.LogDirs() {
		if ld.Err != nil || ld.ID == ([16]byte{}) || ids[formatDirID(ld.ID)] {
			t.Fatalf("dir %d: %+v", i, ld)
		}
		ids[formatDirID(ld.ID)] = true
		props, err := readProps(filepath.Join(dirs[i], metaFile))
		mustOK(t, err)
		if props["directory.id"] != formatDirID(ld.ID) || props["cluster.id"] != e.ClusterID() {
			t.Fatalf("%s meta.properties %v", dirs[i], props)
		}
	}
	for _, ps := range e.Sizes() {
		name := ps.TP.Topic + "-" + itoa(ps.TP.Partition)
		if abs, _ := filepath.Abs(placed[name]); ps.Dir != abs {
			t.Fatalf("Sizes says %s is in %s, it is in %s", name, ps.Dir, placed[name])
		}
	}
	mustOK(t, e.Close())

	e, err = openDirs(t, dirs...)
	mustOK(t, err)
	defer e.Close()
	if got := partitionDirs(t, dirs...); len(got) != 9 {
		t.Fatalf("after the restart: %v", got)
	}
	for _, topic := range []string{"x", "y"} {
		n := int32(4)
		if topic == "y" {
			n = 5
		}
		for p := range n {
			if got := len(readAll(t, e, TP{topic, p})); got != 2 {
				t.Fatalf("%s-%d holds %d batches after the restart, want 2", topic, p, got)
			}
		}
	}
	if off := e.OfflinePartitions(); len(off) != 0 {
		t.Fatalf("offline: %v", off)
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// TestLogDirsPartitionInTwoDirsRefused: a partition folder found in two
// directories fails the start with an error naming both, rather than
// serving either copy.
func TestLogDirsPartitionInTwoDirsRefused(t *testing.T) {
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b")}
	e, err := openDirs(t, dirs...)
	mustOK(t, err)
	if _, err := e.CreateTopic("t", 1, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	mustOK(t, e.Close())
	where := partitionDirs(t, dirs...)["t-0"]
	other := dirs[0]
	if where == dirs[0] {
		other = dirs[1]
	}
	mustOK(t, os.Mkdir(filepath.Join(other, "t-0"), 0o750))
	_, err = openDirs(t, dirs...)
	if err == nil || !strings.Contains(err.Error(), "two log directories") {
		t.Fatalf("open with t-0 twice: %v", err)
	}
}

// TestLogDirsMissingDirTakesItsPartitionsOffline: a directory missing at a
// start (a disk that did not mount) takes only the partitions that lived
// there offline (ErrStorage), is not created again, and the others serve;
// new partitions go to the directories that are online. Once it is back,
// its partitions serve again with their records.
func TestLogDirsMissingDirTakesItsPartitionsOffline(t *testing.T) {
	root := t.TempDir()
	dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "c")}
	e, err := openDirs(t, dirs...)
	mustOK(t, err)
	if _, err := e.CreateTopic("t", 6, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	fillPartitions(t, e, "t", 6, 3)
	if _, err := e.CreateTopic("d", 3, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	mustOK(t, e.Close())
	placed := partitionDirs(t, dirs...)
	gone := filepath.Join(root, "c.unmounted")
	mustOK(t, os.Rename(dirs[2], gone))

	e, err = openDirs(t, dirs...)
	mustOK(t, err)
	if _, err := os.Stat(dirs[2]); !os.IsNotExist(err) {
		t.Fatalf("the missing directory was created again: %v", err)
	}
	if ld := e.LogDirs()[2]; !errors.Is(ld.Err, ErrStorage) {
		t.Fatalf("LogDirs[2] = %+v, want offline", ld)
	}
	for p := range int32(6) {
		tp := TP{"t", p}
		name := "t-" + itoa(p)
		err := e.Offline(tp)
		if placed[name] == dirs[2] {
			if !errors.Is(err, ErrStorage) {
				t.Fatalf("%s lived in the missing directory: Offline = %v", name, err)
			}
			if _, err := appendSync(e, tp, mkBatch(t, 1, "v", 1, -1, 0, 0)); !errors.Is(err, ErrStorage) {
				t.Fatalf("append to %s: %v, want ErrStorage", name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s (in %s) offline: %v", name, placed[name], err)
		}
		if got := len(readAll(t, e, tp)); got != 3 {
			t.Fatalf("%s holds %d batches, want 3", name, got)
		}
	}
	if off := e.OfflinePartitions(); len(off) != 3 {
		t.Fatalf("offline %v, want the three of the missing directory", off)
	}
	if _, err := e.CreateTopic("u", 2, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	// A topic with a partition offline with its directory can be deleted
	// (the folder there is left).
	mustOK(t, e.DeleteTopic("d"))
	for name, d := range partitionDirs(t, dirs[0], dirs[1]) {
		if strings.HasPrefix(name, "u-") && d == dirs[2] {
			t.Fatalf("%s placed in the offline directory", name)
		}
	}
	mustOK(t, e.Close())

	mustOK(t, os.Rename(gone, dirs[2]))
	e, err = openDirs(t, dirs...)
	mustOK(t, err)
	defer e.Close()
	if off := e.OfflinePartitions(); len(off) != 0 {
		t.Fatalf("offline after the directory came back: %v", off)
	}
	for p := range int32(6) {
		if got := len(readAll(t, e, TP{"t", p})); got != 3 {
			t.Fatalf("t-%d holds %d batches, want 3", p, got)
		}
	}
}

// FuzzMetaProperties: meta.properties as read from a log directory (and the
// names of the folders a start scans) never panic the parsers; a
// directory.id that parses formats back to the same text, and a folder
// name taken as a partition's or a future log's belongs to a valid topic.
func FuzzMetaProperties(f *testing.F) {
	f.Add([]byte("version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=1\ndirectory.id=7Nw0o8k6RYqHyf3rtj6k1Q\n"), "t-0")
	f.Add([]byte("#comment\n\n=\nx\ndirectory.id=\n"), "t-0.abc-future")
	f.Add([]byte("directory.id=AAAAAAAAAAAAAAAAAAAAAA==\n"), "-1")
	f.Add([]byte{0xff, '=', '\n'}, "a.b-12.x-delete")
	f.Fuzz(func(t *testing.T, b []byte, name string) {
		props := parseProps(b)
		if id, ok := parseDirID(props["directory.id"]); ok && formatDirID(id) != props["directory.id"] {
			t.Fatalf("directory.id %q formats back as %q", props["directory.id"], formatDirID(id))
		}
		if isPartitionDir(name) {
			i := strings.LastIndexByte(name, '-')
			if ValidateTopicName(name[:i]) != nil {
				t.Fatalf("%q taken as a partition folder", name)
			}
		}
		if p, ok := futureOf(name); ok && !isPartitionDir(p) {
			t.Fatalf("%q taken as the future log of %q", name, p)
		}
		segmentFile(name)
	})
}
