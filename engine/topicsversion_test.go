package engine

import (
	"testing"

	"ringlog/ioring"
)

// TestTopicsVersion: every topic change moves TopicsVersion, which the
// group coordinator compares at each KIP-848 heartbeat to notice topics
// created, deleted or grown; nothing else moves it.
func TestTopicsVersion(t *testing.T) {
	e := openEngine(t, t.TempDir(), ioring.ModePortable)
	defer e.Close()
	last := e.TopicsVersion()
	step := func(what string, err error, moves bool) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		v := e.TopicsVersion()
		if (v != last) != moves {
			t.Fatalf("%s: version %d -> %d", what, last, v)
		}
		last = v
	}
	_, err := e.CreateTopic("t", 2, -1, nil, false)
	step("create", err, true)
	_, err = e.CreateTopic("u", 2, -1, nil, true)
	step("create, validate only", err, false)
	step("grow, validate only", e.CreatePartitions("t", 3, true), false)
	step("grow", e.CreatePartitions("t", 3, false), true)
	step("alter config", e.AlterTopicConfig("t", map[string]string{"retention.ms": "1000"}, false), true)
	e.Topic("t")
	e.Topics()
	step("reads", nil, false)
	step("delete", e.DeleteTopic("t"), true)
}
