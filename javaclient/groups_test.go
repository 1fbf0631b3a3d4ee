package javaclient

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConsumerGroupClassic: two Java consumers in one group with the
// classic protocol (JoinGroup/SyncGroup, the client's default range
// assignor, eager revocation) consume every record once, committing as
// they go, through a join and a leave.
func TestConsumerGroupClassic(t *testing.T) { testConsumerGroup(t, "classic") }

// TestConsumerGroupCooperative: the classic protocol with the
// cooperative-sticky assignor (KIP-429): members give up only the
// partitions that move, in a second rebalance.
func TestConsumerGroupCooperative(t *testing.T) {
	testConsumerGroup(t, "classic", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor")
}

// TestConsumerGroupConsumer: the same with KIP-848's consumer protocol
// (ConsumerGroupHeartbeat, the broker's uniform assignor, revocations
// acknowledged before partitions move).
func TestConsumerGroupConsumer(t *testing.T) { testConsumerGroup(t, "consumer") }

// testConsumerGroup runs ringlog.Groups: member a alone consumes what the
// topic holds, b joins and the two split the partitions and consume new
// records, b leaves and a consumes the rest. Every record is consumed
// exactly once, with the value written at its offset; both members
// consume while they share the group; the group's committed offsets end
// at the log end offsets.
func testConsumerGroup(t *testing.T, protocol string, assignor ...string) {
	t.Parallel()
	b := startBroker(t)
	topic, group := "orders-"+protocol, "billing-"+protocol
	const parts, before, phase2, phase3 = 6, 600, 600, 300
	b.createTopic(t, topic, parts)

	// written[p][offset] is the value there; the first records come from
	// franz-go, the rest from the program's own producer.
	written := make([]map[int64]string, parts)
	for p := range written {
		written[p] = map[int64]string{}
	}
	cl := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := range before {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % parts), Value: fmt.Appendf(nil, "p1-%d", i)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		written[r.Partition][r.Offset] = string(r.Value)
	}

	r := runJava(t, 120*time.Second, "Groups", append([]string{b.addr, topic, strconv.Itoa(parts), group, protocol,
		strconv.Itoa(before), strconv.Itoa(phase2), strconv.Itoa(phase3)}, assignor...)...)
	r.noErrors(t)
	r.want(t, "consumed", strconv.Itoa(before+phase2+phase3))
	t.Cleanup(func() {
		if t.Failed() {
			for _, e := range r.events {
				if e[0] != "rec" && e[0] != "sent" {
					t.Logf("%s", strings.Join(e, " "))
				}
			}
		}
	})

	// consumedBy[phase][member] counts records of a phase (the prefix of
	// their values) by who consumed them.
	consumedBy := map[string]map[string]int{}
	revoked := map[string][]string{} // member -> the partitions of each revocation
	seen := map[[2]int64]string{}
	for _, e := range r.events {
		switch e[0] {
		case "sent":
			p, _ := strconv.Atoi(e[1])
			o, _ := strconv.ParseInt(e[2], 10, 64)
			written[p][o] = e[3]
		case "rec":
			member, value := e[1], e[4]
			p, _ := strconv.Atoi(e[2])
			o, _ := strconv.ParseInt(e[3], 10, 64)
			if prev, dup := seen[[2]int64{int64(p), o}]; dup {
				t.Errorf("partition %d offset %d consumed twice: by %s, then by %s", p, o, prev, member)
			}
			seen[[2]int64{int64(p), o}] = member
			phase, _, _ := strings.Cut(value, "-")
			if consumedBy[phase] == nil {
				consumedBy[phase] = map[string]int{}
			}
			consumedBy[phase][member]++
		case "split":
			t.Logf("%s", strings.Join(e, " "))
		case "revoked":
			revoked[e[1]] = append(revoked[e[1]], e[2])
		}
	}
	// Every record consumed has the value written there (checked once all
	// sent lines are read: a record may be consumed before its ack prints).
	for _, e := range r.events {
		if e[0] != "rec" {
			continue
		}
		p, _ := strconv.Atoi(e[2])
		o, _ := strconv.ParseInt(e[3], 10, 64)
		if want, ok := written[p][o]; !ok || want != e[4] {
			t.Errorf("member %s consumed %q at partition %d offset %d, where %q was written", e[1], e[4], p, o, want)
		}
	}
	for p := range parts {
		for o := range written[p] {
			if _, ok := seen[[2]int64{int64(p), o}]; !ok {
				t.Errorf("partition %d offset %d (%s) never consumed", p, o, written[p][o])
			}
		}
	}
	if consumedBy["p2"]["a"] == 0 || consumedBy["p2"]["b"] == 0 {
		t.Errorf("records produced while both members were in the group were consumed by a: %d, b: %d; want both",
			consumedBy["p2"]["a"], consumedBy["p2"]["b"])
	}
	if len(assignor) > 0 {
		// Cooperative: when b joins, a gives up only what b gets, never
		// everything at once; a revokes all at its own close, the last
		// revocation.
		t.Logf("revocations: a %v, b %v", revoked["a"], revoked["b"])
		if len(revoked["a"]) < 2 {
			t.Errorf("member a revoked %v: want b's share when b joined, then everything at its close", revoked["a"])
		}
		for _, rv := range revoked["a"][:max(len(revoked["a"])-1, 0)] {
			if strings.Count(rv, ",")+1 == parts {
				t.Errorf("member a revoked every partition (%s) before it closed: an eager rebalance, not a cooperative one", rv)
			}
		}
	}
	if consumedBy["p3"]["b"] != 0 {
		t.Errorf("member b consumed %d records after it left", consumedBy["p3"]["b"])
	}
	t.Logf("consumed: before %v, both members %v, after b left %v; commits retried: a %s, b %s",
		consumedBy["p1"], consumedBy["p2"], consumedBy["p3"], r.kv["a.commitRetries"], r.kv["b.commitRetries"])

	// The committed offsets are the log end offsets.
	adm := kadm.NewClient(cl)
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(end kadm.ListedOffset) {
		c, ok := committed.Lookup(topic, end.Partition)
		if !ok || c.Err != nil || c.At != end.Offset {
			t.Errorf("partition %d: committed %+v, log end offset %d", end.Partition, c, end.Offset)
		}
	})
}
