package mirror

import (
	"strings"
	"testing"
)

func TestLoadMM2Properties(t *testing.T) {
	flows, err := Load(strings.NewReader(`
# an MM2 file
clusters = A, B, C
A.bootstrap.servers = 127.0.0.1:9092
B.bootstrap.servers = 127.0.0.1:9093
C.bootstrap.servers: 127.0.0.1:9094
A->B.enabled = true
A->B.topics = orders.*, payments
topics.exclude = .*-tmp
B->C.enabled = true
B->C.replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy
exactly.once.source.support = disabled
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(flows) != 2 || flows[0].Name() != "A->B" || flows[1].Name() != "B->C" {
		t.Fatalf("flows %v", flows)
	}
	ab, bc := flows[0], flows[1]
	for topic, want := range map[string]bool{
		"orders": true, "orders-eu": true, "payments": true, "payments2": false, "orders-tmp": false,
		"__consumer_offsets": false, "mm2-offsets.A.internal": false, "heartbeats": true,
		"B.orders":   false,                     // came from B, the target: a cycle
		"orders.C.x": true, "orders.B.x": false, // a hop through B
	} {
		if got := ab.Wanted(topic); got != want {
			t.Errorf("A->B wants %q: %v, want %v", topic, got, want)
		}
	}
	if got := ab.Policy.RemoteTopic("A", "orders"); got != "A.orders" {
		t.Errorf("default policy: %s", got)
	}
	if got := bc.Policy.RemoteTopic("B", "orders"); got != "orders" {
		t.Errorf("identity policy: %s", got)
	}
	if got := bc.Policy.RemoteTopic("B", "heartbeats"); got != "B.heartbeats" {
		t.Errorf("identity policy, heartbeats: %s", got)
	}
	if ab.ExactlyOnce || ab.OffsetsTopic() != "mm2-offsets.A.internal" || ab.OffsetSyncsTopic() != "mm2-offset-syncs.A.internal" {
		t.Errorf("A->B: exactly once %v, %s, %s", ab.ExactlyOnce, ab.OffsetsTopic(), ab.OffsetSyncsTopic())
	}
	for _, bad := range []string{
		"clusters = A\nA.bootstrap.servers = x\n",
		"clusters = A, B\nA.bootstrap.servers = x\nA->B.enabled = true\n",
		"clusters = A, B\nA.bootstrap.servers = x\nB.bootstrap.servers = y\nA->B.enabled = true\nA->B.topics = (\n",
		"clusters = A, B\nA.bootstrap.servers = x\nB.bootstrap.servers = y\nA->B.enabled = true\nreplication.policy.class = Nope\n",
		"clusters = A, B\nA.bootstrap.servers = x\nB.bootstrap.servers = y\nA->B.enabled = true\nsync.group.offsets.enabled = true\nemit.offset-syncs.enabled = false\n",
	} {
		if _, err := Load(strings.NewReader(bad)); err == nil {
			t.Errorf("Load accepted %q", bad)
		}
	}
}
