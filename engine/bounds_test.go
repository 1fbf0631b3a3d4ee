package engine

import (
	"errors"
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
