package controller

import (
	"io/fs"
	"path/filepath"
	"testing"
	"time"
)

// TestStoreModes: the quorum's folder, its raft store and its snapshots
// (folders and files raft makes 0755 and 0644) are for the broker's user
// and group only, as everything in the data directory: files 0640 or
// stricter, folders 0750 or stricter.
func TestStoreModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "controller")
	nd := &testNode{cfg: Config{
		NodeID: 1, Voters: LocalQuorum(1), Dir: dir,
		BrokerSessionTimeout: time.Minute, BrokerHeartbeatInterval: 100 * time.Millisecond, LeaderRebalanceInterval: -1,
		SnapshotInterval: time.Hour, Logger: testLogger(),
	}}
	nd.open(t)
	defer nd.close(t)
	ctx := ctxTimeout(t, 30*time.Second)
	if err := nd.c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := nd.c.RegisterBroker(ctx, BrokerInfo{ID: 1, Addr: "127.0.0.1:9092"}); err != nil {
		t.Fatal(err)
	}
	if _, err := nd.c.CreateTopic(ctx, CreateTopicRequest{Name: "t", Partitions: 1, ReplicationFactor: -1}); err != nil {
		t.Fatal(err)
	}
	if err := nd.c.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	files := 0
	err := filepath.WalkDir(filepath.Dir(dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		allowed := fs.FileMode(0o640)
		if d.IsDir() {
			allowed = 0o750
		} else {
			files++
		}
		if extra := info.Mode().Perm() &^ allowed; extra != 0 {
			t.Errorf("%s: mode %v, want at most %v", path, info.Mode().Perm(), allowed)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 3 {
		t.Fatalf("%d files: want the store and a snapshot's two", files)
	}
}
