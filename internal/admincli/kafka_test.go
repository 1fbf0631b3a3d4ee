package admincli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"ringlog/internal/kafkaref"
)

// TestAgainstKafka runs the commands against Apache Kafka 4.4 itself
// (three KRaft nodes, internal/kafkaref), so that they are proven against
// the reference and not only against ringlog: topic create, describe and
// alter; a classic and a KIP-848 group described with their lag, an
// offset reset, and offsets set for a group that does not exist yet; cluster status and quorum (DescribeQuorum, which ringlog
// does not serve); a reassignment from a plan file that swaps a
// partition's replicas, then a preferred election that moves its
// leadership; a generated plan moving everything off broker 1, executed
// and waited for with --list; then --spread bringing broker 1 back into
// use. One cluster for all of it: a start takes 20 to 40 s.
func TestAgainstKafka(t *testing.T) {
	c := kafkaref.StartT(t, kafkaref.Options{Nodes: 3, Heap: "512m", Props: map[string]string{"group.initial.rebalance.delay.ms": "0"}})
	addr := c.Nodes[0].Addr

	// Topics.
	adminOK(t, addr, "topic", "create", "ref", "-p", "3", "-r", "2", "-c", "retention.ms=3600000")
	if _, _, err := admin(t, addr, "topic", "create", "ref", "-p", "3"); err == nil || !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("second create: %v", err)
	}
	adminOK(t, addr, "topic", "alter", "ref", "--set", "max.message.bytes=2000000", "--partitions", "4")
	// Kafka's brokers apply metadata from the quorum's log on their own
	// time: a describe right after an alter may see the old partitions.
	var described struct {
		Topics []topicDescription `json:"topics"`
	}
	var d topicDescription
	// The alter reaches Kafka's other nodes a moment later (a describe may
	// go to one that has not applied it yet): asked again until it shows.
	eventually(t, func() error {
		adminJSON(t, addr, &described, "topic", "describe", "ref")
		if d = described.Topics[0]; len(d.Partitions) != 4 {
			return fmt.Errorf("%d partitions", len(d.Partitions))
		}
		sources := make(map[string]string)
		for _, cf := range d.Configs {
			sources[cf.Key] = cf.Source + "=" + deref(cf.Value)
		}
		if sources["retention.ms"] != "DYNAMIC_TOPIC_CONFIG=3600000" || sources["max.message.bytes"] != "DYNAMIC_TOPIC_CONFIG=2000000" {
			return fmt.Errorf("configs: %v", sources)
		}
		return nil
	})
	if d.ReplicationFactor != 2 || d.ID == "" {
		t.Fatalf("describe: %+v", d)
	}
	for _, p := range d.Partitions {
		if len(p.Replicas) != 2 || len(p.ISR) != 2 || !slices.Contains(p.Replicas, p.Leader) {
			t.Fatalf("partition %+v", p)
		}
	}

	// Groups: a classic one with lag, then reset; a KIP-848 one.
	produce(t, addr, "ref", 4, 5)
	member := consumeAndCommit(t, addr, "refgroup", "ref", 20)
	produce(t, addr, "ref", 1, 2) // two more on partition 0
	var groups struct {
		Groups []groupDescription `json:"groups"`
	}
	adminJSON(t, addr, &groups, "group", "describe", "refgroup")
	g := groups.Groups[0]
	if g.Type != "classic" || g.State != "Stable" || len(g.Members) != 1 || len(g.Offsets) != 4 {
		t.Fatalf("group describe: %+v", g)
	}
	for _, o := range g.Offsets {
		wantLag := int64(0)
		if o.Partition == 0 {
			wantLag = 2
		}
		if o.CommittedOffset == nil || *o.CommittedOffset != 5 || o.Lag == nil || *o.Lag != wantLag {
			t.Fatalf("offsets of partition %d: %+v", o.Partition, o)
		}
	}
	if _, _, err := admin(t, addr, "group", "reset-offsets", "refgroup", "--all-topics", "--to-earliest"); err == nil || !strings.Contains(err.Error(), "Stable") {
		t.Fatalf("reset-offsets on a Stable group: %v", err)
	}
	member.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, err := admin(t, addr, "group", "reset-offsets", "refgroup", "--all-topics", "--to-earliest", "--execute")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reset-offsets once the member left: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	adminJSON(t, addr, &groups, "group", "describe", "refgroup")
	for _, o := range groups.Groups[0].Offsets {
		if o.CommittedOffset == nil || *o.CommittedOffset != 0 {
			t.Fatalf("after the reset, partition %d: %+v", o.Partition, o)
		}
	}
	checkNewGroupReset(t, addr, "fresh", "ref", 4)
	adminOK(t, addr, "topic", "create", "ref848", "-p", "2", "-r", "1")
	produce(t, addr, "ref848", 2, 3)
	checkKIP848Group(t, addr, "ref848group", "ref848", 2, 3)

	// Cluster.
	var st clusterStatusOut
	adminJSON(t, addr, &st, "cluster", "status")
	if st.ClusterID == "" || len(st.Brokers) != 3 || st.Partitions < 6 || st.OfflinePartitions != 0 {
		t.Fatalf("cluster status: %+v", st)
	}
	var q quorumOut
	adminJSON(t, addr, &q, "cluster", "quorum")
	roles := map[string]int{}
	for _, r := range q.Replicas {
		roles[r.Role]++
	}
	if q.LeaderID < 1 || q.LeaderID > 3 || q.HighWatermark <= 0 || roles["Leader"] != 1 || roles["Follower"] != 2 {
		t.Fatalf("cluster quorum: %+v", q)
	}

	// A plan file swapping ref/0's replicas: the leader stays (it is in
	// the new set), so the preferred election then moves it.
	adminJSON(t, addr, &described, "topic", "describe", "ref")
	p0 := described.Topics[0].Partitions[0]
	swapped := []int32{p0.Replicas[1], p0.Replicas[0]}
	if p0.Leader != p0.Replicas[0] {
		t.Fatalf("ref/0 is not led by its preferred replica: %+v", p0)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	b, _ := json.Marshal(Plan{Version: 1, Partitions: []Assignment{{Topic: "ref", Partition: 0, Replicas: swapped}}})
	if err := os.WriteFile(planFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var re reassignOut
	adminJSON(t, addr, &re, "partition", "reassign", "--file", planFile, "--execute")
	if !re.Executed || len(re.Results) != 1 || re.Results[0].Status != "started" || fmt.Sprint(re.Current.Partitions[0].Replicas) != fmt.Sprint(p0.Replicas) {
		t.Fatalf("reassign --file: %+v", re)
	}
	waitReassigned(t, addr)
	var elect struct {
		Partitions []partitionResult `json:"partitions"`
	}
	adminJSON(t, addr, &elect, "partition", "elect", "--topic", "ref:0", "--type", "preferred")
	if len(elect.Partitions) != 1 || elect.Partitions[0].Status != "elected" {
		t.Fatalf("preferred election after the swap: %+v", elect)
	}
	eventually(t, func() error {
		adminJSON(t, addr, &described, "topic", "describe", "ref")
		if p := described.Topics[0].Partitions[0]; p.Leader != swapped[0] {
			return fmt.Errorf("ref/0 after the election: %+v, want leader %d", p, swapped[0])
		}
		return nil
	})
	adminJSON(t, addr, &elect, "partition", "elect", "--topic", "ref", "--type", "preferred")
	for _, p := range elect.Partitions {
		if p.Status != "already-elected" {
			t.Fatalf("second election: %+v", elect)
		}
	}

	// Everything of ref off broker 1, then spread back.
	adminJSON(t, addr, &re, "partition", "reassign", "--move-off", "1", "--topic", "ref", "--execute")
	if !re.Executed || len(re.Results) == 0 {
		t.Fatalf("move-off 1: %+v", re)
	}
	waitReassigned(t, addr)
	load := func() map[int32]int {
		adminJSON(t, addr, &described, "topic", "describe", "ref")
		m := map[int32]int{}
		for _, p := range described.Topics[0].Partitions {
			for _, r := range p.Replicas {
				m[r]++
			}
		}
		return m
	}
	eventually(t, func() error {
		if l := load(); l[1] != 0 || l[2]+l[3] != 8 {
			return fmt.Errorf("replicas per broker after move-off 1: %v", l)
		}
		return nil
	})
	adminJSON(t, addr, &re, "partition", "reassign", "--spread", "--topic", "ref", "--execute")
	waitReassigned(t, addr)
	eventually(t, func() error {
		if l := load(); l[1] < 2 || l[2] < 2 || l[3] < 2 || l[1] > 3 || l[2] > 3 || l[3] > 3 {
			return fmt.Errorf("replicas per broker after --spread: %v (8 over 3: 2 or 3 each)", l)
		}
		return nil
	})

	// Quotas and dynamic broker configs (the replication throttle).
	adminOK(t, addr, "quota", "alter", "--user", "alice", "--set", "producer_byte_rate=1048576")
	eventually(t, func() error { // Kafka's brokers apply the change after answering
		var quotas []quotaOut
		adminJSON(t, addr, &quotas, "quota", "describe", "--user", "alice")
		if len(quotas) != 1 || quotas[0].Quotas["producer_byte_rate"] != 1048576 {
			return fmt.Errorf("quota describe --user alice: %+v", quotas)
		}
		return nil
	})
	adminOK(t, addr, "broker", "config-alter", "--id", "1", "--set", "leader.replication.throttled.rate=1000000")
	eventually(t, func() error {
		var cfgs []brokerConfigOut
		adminJSON(t, addr, &cfgs, "broker", "config-describe", "--id", "1", "--dynamic")
		for _, c := range cfgs {
			if c.Name == "leader.replication.throttled.rate" && c.Value != nil && *c.Value == "1000000" && c.Source == "DYNAMIC_BROKER_CONFIG" {
				return nil
			}
		}
		return fmt.Errorf("config-describe --id 1 --dynamic: %+v", cfgs)
	})
}

// eventually retries check for up to 30 s.
func eventually(t *testing.T, check func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitReassigned waits until `partition reassign --list` shows none in
// progress.
func waitReassigned(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var l struct {
			Reassignments []ongoing `json:"reassignments"`
		}
		adminJSON(t, addr, &l, "partition", "reassign", "--list")
		if len(l.Reassignments) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("reassignments still in progress: %+v", l.Reassignments)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
