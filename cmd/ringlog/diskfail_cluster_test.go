//go:build linux

package main

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestClusterDiskFailureMovesLeadership: three brokers on powerfs, a topic
// of RF 3 with min.insync.replicas 2, an idempotent acks=all producer, and
// -flush always. While it produces, the disk under one partition's log on
// its leader starts failing every write and fsync with EIO. That broker
// takes the partition offline (and only it), reports it to the quorum,
// which moves the leadership to an in-sync replica and lists the broker in
// the partition's offline replicas; the producer goes on through the new
// leader, every acknowledged record reads back, and the broker's other
// partitions keep their leader.
func TestClusterDiskFailureMovesLeadership(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	c := newPowerCluster(t, "always")
	c.startAll()
	c.createTopic()
	adm := c.admin()
	defer adm.Close()
	leaders := func() map[int32]kadm.PartitionDetail {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		topics, err := adm.ListTopics(ctx, powerTopic)
		if err != nil {
			t.Fatal(err)
		}
		return topics[powerTopic].Partitions
	}
	// waitHealthy saw the topic through one broker; the broker this client
	// asks may not have applied the image that made it yet and answer
	// UNKNOWN_TOPIC_OR_PARTITION (as a Kafka broker may right after
	// CreateTopics): ask until every partition shows a leader.
	before := leaders()
	for deadline := time.Now().Add(30 * time.Second); ; before = leaders() {
		complete := len(before) == clusterPartitions
		for _, d := range before {
			complete = complete && d.Leader >= 0
		}
		if complete {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s not visible with a leader for each partition: %+v", powerTopic, before)
		}
		time.Sleep(100 * time.Millisecond)
	}
	const victim = int32(0)
	owner := before[victim].Leader
	var n *powerNode
	for _, node := range c.nodes {
		if int32(node.id) == owner {
			n = node
		}
	}
	var others []int32 // other partitions the same broker leads
	for p, d := range before {
		if p != victim && d.Leader == owner {
			others = append(others, p)
		}
	}
	t.Logf("partition %d led by broker %d, which also leads %v", victim, owner, others)

	var after map[int32]kadm.PartitionDetail
	c.produceFor(time.Second, func() {
		if err := n.fs.Fail(filepath.Join(n.dataDir, powerTopic+"-"+strconv.Itoa(int(victim)))); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			after = leaders()
			d := after[victim]
			if d.Leader >= 0 && d.Leader != owner && slices.Contains(d.OfflineReplicas, owner) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("partition %d after its leader's disk failed: %+v", victim, d)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(time.Second) // the producer goes on through the new leader
	})
	n.p.waitFor(t, "offline")
	for _, p := range others {
		if d := after[p]; d.Leader != owner || len(d.OfflineReplicas) != 0 {
			t.Errorf("partition %d, on the same broker's sound logs: %+v", p, d)
		}
	}
	kept, _ := c.check(clusterPartitions, false)
	c.mu.Lock()
	onVictim := len(c.acked[victim])
	c.mu.Unlock()
	t.Logf("leadership of partition %d moved from %d to %d; %d records acknowledged (%d on it), all read back", victim, owner, after[victim].Leader, kept, onVictim)
	if onVictim == 0 {
		t.Fatal("nothing was acknowledged on the failed partition")
	}
}
