//go:build linux

package controller

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"ringlog/internal/powerfs"
)

// TestLocalQuorumSurvivesPowerLoss: what the quorum committed survives a
// power loss, with its store in a directory the controller created and a
// snapshot taken (the log compacted behind it). Before issue 20's fix the
// store's name was never synced: the quorum came back fresh and empty.
func TestLocalQuorumSurvivesPowerLoss(t *testing.T) {
	pfs := powerfs.MountT(t, powerfs.Options{Seed: 1})
	nd := &testNode{cfg: Config{
		NodeID: 1, Voters: LocalQuorum(1), Dir: filepath.Join(pfs.Dir(), "data", "controller"),
		BrokerSessionTimeout: time.Minute, BrokerHeartbeatInterval: 100 * time.Millisecond, LeaderRebalanceInterval: -1,
		// Compacting right behind each snapshot: the log alone cannot
		// rebuild the state if the snapshot is lost.
		SnapshotThreshold: 2, SnapshotInterval: time.Hour, Logger: testLogger(),
	}}
	nd.open(t)
	defer nd.close(t)
	ctx := ctxTimeout(t, 30*time.Second)
	for round := range 3 {
		if err := nd.c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := nd.c.RegisterBroker(ctx, BrokerInfo{ID: 1, Addr: "127.0.0.1:9092"}); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			if _, err := nd.c.CreateTopic(ctx, CreateTopicRequest{Name: fmt.Sprintf("t%d-%d", round, i), Partitions: 2, ReplicationFactor: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := nd.c.raft.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
		if _, err := nd.c.CreateTopic(ctx, CreateTopicRequest{Name: fmt.Sprintf("after-snapshot-%d", round), Partitions: 1, ReplicationFactor: 1}); err != nil {
			t.Fatal(err)
		}
		before := stateOf(nd.c.Image())
		nd.close(t)
		if err := pfs.PowerLoss(powerfs.Drop); err != nil {
			t.Fatal(err)
		}
		nd.open(t)
		if err := nd.c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if nd.c.Fresh() {
			t.Fatalf("round %d: the quorum came back fresh after a power loss", round)
		}
		for r := range round + 1 {
			if nd.c.Image().Topic(fmt.Sprintf("t%d-3", r)) == nil || nd.c.Image().Topic(fmt.Sprintf("after-snapshot-%d", r)) == nil {
				t.Fatalf("round %d: topics of round %d lost", round, r)
			}
		}
		if after := stateOf(nd.c.Image()); !bytes.Equal(before, after) {
			t.Fatalf("round %d: the state changed across the power loss", round)
		}
	}
}
