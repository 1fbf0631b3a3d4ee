package kafka

import (
	"testing"
	"time"

	"ringlog/engine"
)

// TestFetchSessionEviction: a full cache makes room as Kafka's
// FetchSessionCache does: the least recently used session idle past the
// eviction time goes; a follower's new session may take a consumer's slot
// (the least recently used); otherwise no session is made (id 0: full
// fetches go on). A closed session's partitions are marked gone.
func TestFetchSessionEviction(t *testing.T) {
	now := time.Unix(1000, 0)
	fs := newFetchSessions(2, time.Minute)
	fs.now = func() time.Time { return now }
	open := func(replica int32) *fetchSession {
		f := &fetch{replica: replica, topics: []fetchTopic{{name: "t", parts: []fetchPart{{tp: engine.TP{Topic: "t"}}}}}}
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return fs.openLocked(f, false)
	}
	a := open(-1)
	now = now.Add(10 * time.Second)
	b := open(-1)
	if a == nil || b == nil || a.id == b.id || a.id <= 0 || b.id <= 0 {
		t.Fatalf("two sessions: %v %v", a, b)
	}
	now = now.Add(30 * time.Second)
	if s := open(-1); s != nil {
		t.Fatal("a consumer's session evicted one used 30 s ago")
	}
	// A follower takes the least recently used consumer's slot (a).
	f := open(1)
	if f == nil || fs.byID[a.id] != nil || fs.byID[b.id] == nil || !a.parts[0].gone {
		t.Fatalf("follower's session: %v; a kept %v, b kept %v", f, fs.byID[a.id] != nil, fs.byID[b.id] != nil)
	}
	now = now.Add(time.Second)
	if s := open(2); s == nil || fs.byID[b.id] != nil {
		t.Fatal("a second follower did not take the last consumer's slot")
	}
	if s := open(3); s != nil {
		t.Fatal("a follower's session evicted another follower's, not stale")
	}
	now = now.Add(2 * time.Minute)
	if s := open(-1); s == nil || fs.byID[f.id] != nil {
		t.Fatal("a stale session was not evicted")
	}
	if len(fs.byID) != 2 {
		t.Fatalf("%d sessions in 2 slots", len(fs.byID))
	}
	off := newFetchSessions(-1, 0)
	off.mu.Lock()
	s := off.openLocked(&fetch{replica: -1}, false)
	off.mu.Unlock()
	if s != nil {
		t.Fatal("a session with the cache off")
	}
}
