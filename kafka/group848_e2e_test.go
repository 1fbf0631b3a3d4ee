package kafka_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine/group"
	"ringlog/internal/testkit"
)

// KIP-848 groups of kgo clients (ServerSideBalancer) against a real
// broker: a restart of the broker in the middle of a group, and topics
// created, grown and deleted under a group's subscriptions.

func fast848(c *group.Config) {
	c.ConsumerSessionTimeout, c.ConsumerHeartbeatInterval = 10*time.Second, 100*time.Millisecond
}

// consumer848 is a kgo member that polls on its own goroutine, counting
// what it consumes and the partitions its callbacks add and remove.
type consumer848 struct {
	cl       *kgo.Client
	mu       sync.Mutex
	records  map[string]int            // topic -> records consumed
	seen     map[string]map[int64]bool // "topic/partition" -> offsets consumed
	changes  int                       // callbacks that added or removed partitions
	assigned map[string][]int32
	done     chan struct{}
}

func startConsumer848(t *testing.T, b *testBroker, groupID string, opts ...kgo.Opt) *consumer848 {
	c := &consumer848{records: map[string]int{}, seen: map[string]map[int64]bool{}, assigned: map[string][]int32{}, done: make(chan struct{})}
	change := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			c.mu.Lock()
			defer c.mu.Unlock()
			for topic, ps := range a {
				if len(ps) == 0 {
					continue
				}
				c.changes++
				if add {
					c.assigned[topic] = append(c.assigned[topic], ps...)
				} else {
					c.assigned[topic] = slices.DeleteFunc(c.assigned[topic], func(p int32) bool { return slices.Contains(ps, p) })
				}
			}
		}
	}
	opts = append([]kgo.Opt{kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup(groupID), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.AutoCommitInterval(100 * time.Millisecond), kgo.MetadataMinAge(100 * time.Millisecond), kgo.MetadataMaxAge(500 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.OnPartitionsAssigned(change(true)), kgo.OnPartitionsRevoked(change(false)), kgo.OnPartitionsLost(change(false))}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	c.cl = cl
	go func() {
		defer close(c.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				c.mu.Lock()
				c.records[r.Topic]++
				k := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
				if c.seen[k] == nil {
					c.seen[k] = map[int64]bool{}
				}
				c.seen[k][r.Offset] = true
				c.mu.Unlock()
			})
		}
	}()
	t.Cleanup(func() { cl.Close(); <-c.done })
	return c
}

func (c *consumer848) stats() (records map[string]int, changes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.records), c.changes
}

func produceN(t *testing.T, cl *kgo.Client, topic string, partitions int32, n int) {
	t.Helper()
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// distinctRecords counts, per topic, the records the members consumed
// between them, each once: a partition that moves is re-read by its new
// owner from the last commit (kgo commits on revoke only what the poll
// before the last handed out, and these members replace the revoke
// callback that would commit at all), so deliveries may exceed records.
func distinctRecords(cs ...*consumer848) map[string]int {
	union := map[string]map[int64]bool{}
	for _, c := range cs {
		c.mu.Lock()
		for k, offs := range c.seen {
			if union[k] == nil {
				union[k] = map[int64]bool{}
			}
			maps.Copy(union[k], offs)
		}
		c.mu.Unlock()
	}
	out := map[string]int{}
	for k, offs := range union {
		out[k[:strings.LastIndexByte(k, '/')]] += len(offs)
	}
	return out
}

// sumRecords counts, per topic, the records the members were handed,
// duplicates included.
func sumRecords(cs ...*consumer848) map[string]int {
	out := map[string]int{}
	for _, c := range cs {
		rs, _ := c.stats()
		for k, v := range rs {
			out[k] += v
		}
	}
	return out
}

// describe848 describes a group over a fresh connection (the broker may
// have restarted).
func describe848(t *testing.T, b *testBroker, groupID string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	return dialAdmin(t, b.Addr).cgDescribe(1, groupID)[0]
}

// TestGroup848Restart: the broker restarts under a stable group of three
// members. The group comes back from __consumer_offsets as it was, with
// its epochs and every member's assignment: no member is told of any
// change (no rebalance), and they go on consuming where they committed.
func TestGroup848Restart(t *testing.T) {
	b := startBroker(t, brokerOpts{Groups: fast848})
	e2eCreateTopic(t, b, "t", 6, nil)
	prod := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceN(t, prod, "t", 6, 600)
	var cs []*consumer848
	for range 3 {
		cs = append(cs, startConsumer848(t, b, "g", kgo.ConsumeTopics("t")))
	}
	testkit.WaitFor(t, 20*time.Second, "600 records and a stable group", func() bool {
		d := describe848(t, b, "g")
		return distinctRecords(cs...)["t"] == 600 && d.State == "Stable" && len(d.Members) == 3
	})
	before := describe848(t, b, "g")
	changes := func() []int {
		var out []int
		for _, c := range cs {
			_, n := c.stats()
			out = append(out, n)
		}
		return out
	}
	// Let the last commits land, any re-read of a moved partition end, and
	// the members' last assignment callbacks run: the group reads Stable
	// once each member's epoch reached the target, and a client may call
	// back for its last increment a little after (a snapshot taken at
	// Stable once counted such a callback as a rebalance at the restart).
	delivered, changed := sumRecords(cs...)["t"], changes()
	testkit.WaitFor(t, 10*time.Second, "deliveries and assignment callbacks to settle", func() bool {
		time.Sleep(300 * time.Millisecond)
		last, lastChanged := delivered, changed
		delivered, changed = sumRecords(cs...)["t"], changes()
		return delivered == last && slices.Equal(changed, lastChanged)
	})

	b.Restart()
	// The members heartbeat through the restart (retrying while the
	// coordinator loads), then consume what comes next.
	time.Sleep(time.Second)
	produceN(t, b.client(kgo.RecordPartitioner(kgo.ManualPartitioner())), "t", 6, 300)
	testkit.WaitFor(t, 20*time.Second, "300 more records", func() bool { return distinctRecords(cs...)["t"] == 900 })

	after := describe848(t, b, "g")
	if after.Epoch != before.Epoch || after.AssignmentEpoch != before.AssignmentEpoch || after.State != "Stable" || len(after.Members) != 3 {
		t.Fatalf("group after the restart: epoch %d/%d assignment epoch %d/%d %s, %d members",
			after.Epoch, before.Epoch, after.AssignmentEpoch, before.AssignmentEpoch, after.State, len(after.Members))
	}
	for i := range before.Members {
		bm, am := before.Members[i], after.Members[i]
		if bm.MemberID != am.MemberID || bm.MemberEpoch != am.MemberEpoch || fmt.Sprint(bm.Assignment) != fmt.Sprint(am.Assignment) {
			t.Fatalf("member %d: %+v before, %+v after", i, bm, am)
		}
	}
	if got := changes(); !slices.Equal(got, changed) {
		t.Fatalf("assignment callbacks during the restart: %v before, %v after (the group rebalanced)", changed, got)
	}
	// No partition moved, so every member went on from where it was:
	// the 300 new records were each handed out once.
	if n := sumRecords(cs...)["t"] - delivered; n != 300 {
		t.Fatalf("%d records handed out after the restart for 300 produced", n)
	}
}

// TestGroup848TopicChanges: a regex subscription picks up a topic created
// after the group formed, a topic growing partitions has them assigned,
// and a deleted topic is taken out of the assignment.
func TestGroup848TopicChanges(t *testing.T) {
	b := startBroker(t, brokerOpts{Groups: fast848})
	adm := b.admin()
	e2eCreateTopic(t, b, "events-a", 2, nil)
	prod := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceN(t, prod, "events-a", 2, 20)
	c := startConsumer848(t, b, "rx", kgo.ConsumeRegex(), kgo.ConsumeTopics("^events-.*"))
	testkit.WaitFor(t, 15*time.Second, "events-a consumed", func() bool { return distinctRecords(c)["events-a"] == 20 })

	// A new topic matching the regex: the broker assigns it.
	e2eCreateTopic(t, b, "events-b", 3, nil)
	e2eCreateTopic(t, b, "unrelated", 1, nil)
	produceN(t, prod, "events-b", 3, 30)
	testkit.WaitFor(t, 15*time.Second, "events-b consumed", func() bool { return distinctRecords(c)["events-b"] == 30 })

	// events-a grows to 4 partitions: the new ones are assigned.
	if _, err := adm.CreatePartitions(context.Background(), 2, "events-a"); err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for i := range 20 {
		rs = append(rs, &kgo.Record{Topic: "events-a", Partition: 2 + int32(i%2), Value: []byte("new")})
	}
	if err := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 15*time.Second, "the new partitions consumed", func() bool { return distinctRecords(c)["events-a"] == 40 })
	d := describe848(t, b, "rx")
	if len(d.Members) != 1 || d.Members[0].SubscribedTopicRegex == nil {
		t.Fatalf("group: %+v", d)
	}
	got := map[string]int{}
	for _, tp := range d.Members[0].Assignment.TopicPartitions {
		got[tp.Topic] = len(tp.Partitions)
	}
	if !maps.Equal(got, map[string]int{"events-a": 4, "events-b": 3}) {
		t.Fatalf("assignment %v", got)
	}

	// A topic subscribed by name is deleted: it leaves the assignment.
	e2eCreateTopic(t, b, "named", 2, nil)
	named := startConsumer848(t, b, "byname", kgo.ConsumeTopics("named", "events-b"))
	testkit.WaitFor(t, 15*time.Second, "named assigned", func() bool {
		d := describe848(t, b, "byname")
		return d.State == "Stable" && len(d.Members) == 1 && len(d.Members[0].Assignment.TopicPartitions) == 2
	})
	if _, err := adm.DeleteTopics(context.Background(), "named"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 15*time.Second, "the deleted topic unassigned", func() bool {
		d := describe848(t, b, "byname")
		return d.State == "Stable" && len(d.Members) == 1 && len(d.Members[0].Assignment.TopicPartitions) == 1 &&
			d.Members[0].Assignment.TopicPartitions[0].Topic == "events-b"
	})
	_ = named
}

// TestGroup848StaticRestart: a static member (group.instance.id) restarts
// within its session: the closing client leaves with epoch -2, its
// partitions are kept for it, and the new instance gets them back at
// once; the other member is told of no change, and the group epoch does
// not move (KIP-848's static membership).
func TestGroup848StaticRestart(t *testing.T) {
	b := startBroker(t, brokerOpts{Groups: fast848})
	e2eCreateTopic(t, b, "t", 4, nil)
	other := startConsumer848(t, b, "g", kgo.ConsumeTopics("t"), kgo.InstanceID("other"))
	first := startConsumer848(t, b, "g", kgo.ConsumeTopics("t"), kgo.InstanceID("bouncing"))
	testkit.WaitFor(t, 15*time.Second, "a stable group", func() bool {
		d := describe848(t, b, "g")
		return d.State == "Stable" && len(d.Members) == 2
	})
	before := describe848(t, b, "g")
	// The group reads Stable once each member's epoch reached the target;
	// a client may call back for its last increment a little after (as in
	// TestGroup848Restart): the count is taken once the callbacks settle.
	_, otherChanges := other.stats()
	testkit.WaitFor(t, 10*time.Second, "the other member's assignment callbacks to settle", func() bool {
		time.Sleep(300 * time.Millisecond)
		last := otherChanges
		_, otherChanges = other.stats()
		return otherChanges == last
	})
	var held string
	for _, m := range before.Members {
		if *m.InstanceID == "bouncing" {
			held = fmt.Sprint(m.Assignment.TopicPartitions[0].Partitions)
		}
	}

	first.cl.Close()
	<-first.done
	if d := describe848(t, b, "g"); len(d.Members) != 2 || d.Epoch != before.Epoch {
		t.Fatalf("after the static member closed: %+v", d)
	}
	again := startConsumer848(t, b, "g", kgo.ConsumeTopics("t"), kgo.InstanceID("bouncing"))
	testkit.WaitFor(t, 15*time.Second, "the new instance's partitions", func() bool {
		again.mu.Lock()
		defer again.mu.Unlock()
		return len(again.assigned["t"]) == 2
	})
	again.mu.Lock()
	got := append([]int32(nil), again.assigned["t"]...)
	again.mu.Unlock()
	slices.Sort(got)
	if fmt.Sprint(got) != held {
		t.Fatalf("the new instance got %v, the old one held %s", got, held)
	}
	after := describe848(t, b, "g")
	if after.Epoch != before.Epoch || after.State != "Stable" || len(after.Members) != 2 {
		t.Fatalf("group after the bounce: %+v (epoch was %d)", after, before.Epoch)
	}
	if _, n := other.stats(); n != otherChanges {
		t.Fatalf("the other member was told of %d changes", n-otherChanges)
	}
}
