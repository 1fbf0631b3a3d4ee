package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ringlog/ioring"
)

// TestConfigFloors: the topic configs that decide how many files a
// partition makes have Kafka 4.4's minimums, refused with Kafka's words;
// segment.bytes' 1 MiB (KIP-1030) is the one above what the log itself can
// hold. Before, segment.bytes=14 was accepted.
func TestConfigFloors(t *testing.T) {
	for _, c := range []struct {
		name, value string
		want        string // "" accepted
	}{
		{"segment.bytes", "14", "Invalid value 14 for configuration segment.bytes: Value must be at least 1048576"},
		{"segment.bytes", "1048575", "Invalid value 1048575 for configuration segment.bytes: Value must be at least 1048576"},
		{"segment.bytes", "1048576", ""},
		{"segment.bytes", "x", "Invalid value x for configuration segment.bytes: Not a number of type INT"},
		{"segment.bytes", "4294967296", "Invalid value 4294967296 for configuration segment.bytes: Not a number of type INT"},
		{"segment.index.bytes", "3", "Invalid value 3 for configuration segment.index.bytes: Value must be at least 4"},
		{"segment.index.bytes", "4", ""},
		{"segment.ms", "0", "Invalid value 0 for configuration segment.ms: Value must be at least 1"},
		{"segment.ms", "1", ""},
		{"index.interval.bytes", "-1", "Invalid value -1 for configuration index.interval.bytes: Value must be at least 0"},
		{"index.interval.bytes", "0", ""},
	} {
		_, err := ParseTopicConfig(DefaultTopicConfig(), map[string]string{c.name: c.value})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s=%s: %v, want it accepted", c.name, c.value, err)
		case c.want != "" && (!errors.Is(err, ErrInvalidConfig) || err.Error() != c.want):
			t.Errorf("%s=%s: %v, want ErrInvalidConfig %q", c.name, c.value, err, c.want)
		}
	}
}

// TestTopicBelowFloorStillLoads: a topic the cluster accepted before
// segment.bytes had its floor (its overrides come back from the
// controller's metadata and from topics.json) opens and reopens; only new
// values are held to the floor. An engine that refused it would lose the
// topic at an upgrade.
func TestTopicBelowFloorStillLoads(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, ioring.ModePortable)
	old := map[string]string{"segment.bytes": "65536"}
	if _, err := e.CreateTopicWithID("old", [16]byte{1}, 1, old); err != nil {
		t.Fatalf("the cluster's topic with segment.bytes=65536: %v", err)
	}
	if err := e.AlterTopicConfig("old", map[string]string{"segment.bytes": "32768"}, false); err != nil {
		t.Fatalf("the cluster's config change to segment.bytes=32768: %v", err)
	}
	if _, err := e.CreateTopic("new", 1, -1, old, false); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a new topic with segment.bytes=65536: %v, want ErrInvalidConfig", err)
	}
	if err := e.IncrementalAlterTopicConfig("old", []ConfigOp{{Name: "retention.ms", Value: "1000"}}, false); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("an incremental change keeping segment.bytes=32768: %v, want ErrInvalidConfig (Kafka checks the result)", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, dir, ioring.ModePortable)
	defer e.Close()
	info, ok := e.Topic("old")
	if !ok || info.Config.Log.SegmentBytes != 32768 {
		t.Fatalf("after a restart: %+v %v, want the topic with segment.bytes=32768", info, ok)
	}
}

// TestLongTopicNameDeletes: a topic of 249 characters, Kafka's longest,
// has folders of up to 255 bytes (NAME_MAX), and deleting it renames them
// aside before removing them. Before, the rename target was the folder's
// name plus a suffix: ENAMETOOLONG, the data stayed on disk, and the name
// could not be created again (its stale folder was in the way, and moving
// that aside failed the same way).
func TestLongTopicNameDeletes(t *testing.T) {
	dir := t.TempDir()
	e := openEngine(t, dir, ioring.ModeAuto)
	defer e.Close()
	name := strings.Repeat("n", 249)
	for round := range 2 {
		if _, err := e.CreateTopic(name, 2, -1, nil, false); err != nil {
			t.Fatalf("round %d: create: %v", round, err)
		}
		for p := range int32(2) {
			r, err := appendSync(e, TP{name, p}, mkBatch(t, 3, "v", 1000, -1, -1, -1))
			if err != nil || r.BaseOffset != 0 {
				t.Fatalf("round %d: produce to partition %d: %+v %v (a new topic starts at offset 0)", round, p, r, err)
			}
		}
		if err := e.DeleteTopic(name); err != nil {
			t.Fatalf("round %d: delete: %v", round, err)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, ent := range ents {
			if strings.HasPrefix(ent.Name(), name[:200]) {
				t.Fatalf("round %d: %s is still in the data directory after the delete", round, ent.Name())
			}
		}
	}
}

// TestLongTopicNameStaleFolder: a folder left by a deletion that did not
// finish is moved aside when a topic of the name is created again, at the
// longest name too.
func TestLongTopicNameStaleFolder(t *testing.T) {
	dir := t.TempDir()
	name := strings.Repeat("s", 249)
	stale := filepath.Join(dir, name+"-0")
	if err := os.MkdirAll(stale, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "00000000000000000000.log"), []byte("left over"), 0o640); err != nil {
		t.Fatal(err)
	}
	e := openEngine(t, dir, ioring.ModeAuto)
	defer e.Close()
	if _, err := e.CreateTopic(name, 1, -1, nil, false); err != nil {
		t.Fatalf("create over a stale folder: %v", err)
	}
	if r, err := appendSync(e, TP{name, 0}, mkBatch(t, 1, "v", 1000, -1, -1, -1)); err != nil || r.BaseOffset != 0 {
		t.Fatalf("produce: %+v %v, want offset 0 in a new log", r, err)
	}
}

// TestDeletedDirFitsNameMax: the deletion folder's name never passes
// NAME_MAX, and names the partition.
func TestDeletedDirFitsNameMax(t *testing.T) {
	for _, c := range []struct {
		topic     string
		partition int32
		unique    string
	}{
		{"short", 3, "0123456789abcdef"},
		{strings.Repeat("x", 249), 9999, "0123456789abcdef"},
		{strings.Repeat("y", 249), 0, "1764656400123456789"},
	} {
		tp := TP{c.topic, c.partition}
		got := filepath.Base(deletedDir(filepath.Join("/data", fmt.Sprintf("%s-%d", c.topic, c.partition)), tp, c.unique))
		want := fmt.Sprintf("-%d.%s-delete", c.partition, c.unique)
		if len(got) > 255 || !strings.HasSuffix(got, want) || !strings.HasPrefix(c.topic, strings.TrimSuffix(got, want)) {
			t.Errorf("%q: deletion folder %q (%d bytes)", c.topic[:min(len(c.topic), 10)], got, len(got))
		}
	}
}

// TestMaxPartitions: the embedding API's CreateTopic holds the broker to
// Config.MaxPartitions, validate-only included; the cluster's decisions
// (CreateTopicWithID) are the controller's to bound and always apply.
func TestMaxPartitions(t *testing.T) {
	e, err := OpenCore(Config{Dir: t.TempDir(), Shards: 1, IO: ioring.ModePortable, MaxPartitions: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.CreateTopic("a", 3, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	for _, validate := range []bool{true, false} {
		if _, err := e.CreateTopic("b", 3, -1, nil, validate); !errors.Is(err, ErrTooManyPartitions) {
			t.Fatalf("3 more partitions of 5 (validate only %v): %v, want ErrTooManyPartitions", validate, err)
		}
	}
	if _, err := e.CreateTopic("b", 2, -1, nil, false); err != nil {
		t.Fatalf("up to the bound: %v", err)
	}
	if _, err := e.CreateTopic("c", 1, -1, nil, false); !errors.Is(err, ErrTooManyPartitions) {
		t.Fatalf("past the bound: %v", err)
	}
	if _, err := e.CreateTopicWithID("d", [16]byte{4}, 2, nil); err != nil {
		t.Fatalf("the controller's topic: %v", err)
	}
	if e.MaxPartitions() != 5 {
		t.Fatalf("MaxPartitions %d", e.MaxPartitions())
	}
	def, err := OpenCore(Config{Dir: t.TempDir(), Shards: 1, IO: ioring.ModePortable})
	if err != nil {
		t.Fatal(err)
	}
	defer def.Close()
	if def.MaxPartitions() != DefaultMaxPartitions {
		t.Fatalf("default MaxPartitions %d, want %d", def.MaxPartitions(), DefaultMaxPartitions)
	}
}
