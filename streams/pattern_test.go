package streams

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPatternSourceNewTopics: a word count whose source is the pattern
// <g>-in-.* reads in-a; in-b, created after Start with more partitions
// (the source subtopology is stateless: its extra partition makes a task
// of its own), joins it within a few metadata refreshes and its lines are
// counted; in-a deleted then leaves it while the tasks it shared with
// in-b keep counting in-b's lines. Both guarantees.
func TestPatternSourceNewTopics(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
			t.Run(map[Guarantee]string{AtLeastOnce: "alo", ExactlyOnce: "eos"}[g], func(t *testing.T) {
				testPatternSourceNewTopics(t, addr, g)
			})
		}
	})
}

func testPatternSourceNewTopics(t *testing.T, addr string, g Guarantee) {
	pre := map[Guarantee]string{AtLeastOnce: "alo", ExactlyOnce: "eos"}[g]
	inA, inB, out := pre+"-in-a", pre+"-in-b", pre+"-pat-out"
	iso := kgo.ReadUncommitted()
	if g == ExactlyOnce {
		iso = kgo.ReadCommitted()
	}
	createTopic(t, addr, inA, 2, nil)
	createTopic(t, addr, out, 2, nil)
	b := NewBuilder()
	ls := SourcePattern(b, regexp.MustCompile(regexp.QuoteMeta(pre)+`-in-.*`), String, String)
	words := FlatMapValues(ls, strings.Fields)
	byWord := GroupBy(words, func(_, w string) string { return w }, KeySerde(String), ValueSerde(String), Named("words"))
	Count(byWord, Named("counts")).ToStream().To(out)
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, addr)
	la, ref := lines(1, 300)
	produceLines(t, prod, inA, la)
	a := startApp(t, topo, Config{ApplicationID: pre + "-pat", Brokers: []string{addr}, StateDir: t.TempDir(), Guarantee: g, MetadataMaxAge: 300 * time.Millisecond})
	checkFinal(t, readCounts(t, addr, out, ref, iso, 20*time.Second), ref)

	// A topic created after Start, matching, with 3 partitions.
	createTopic(t, addr, inB, 3, nil)
	lb, refB := lines(2, 300)
	produceLines(t, prod, inB, lb)
	addRef(ref, refB)
	checkFinal(t, readCounts(t, addr, out, ref, iso, 30*time.Second), ref)
	checkStore(t, ref, a)

	// in-a deleted: tasks 0_0 and 0_1 lose its partitions but keep
	// in-b's, whose new lines are counted.
	adm := kadm.NewClient(newClient(t, addr))
	resp, err := adm.DeleteTopics(context.Background(), inA)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // a few refreshes: the deletion is noticed first
	lc, refC := lines(3, 300)
	produceLines(t, prod, inB, lc)
	addRef(ref, refC)
	checkFinal(t, readCounts(t, addr, out, ref, iso, 30*time.Second), ref)
	checkStore(t, ref, a)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPatternSourceCopartition: a subtopology with a store over the
// pattern st-.* takes st-b, created after Start with st-a's 2 partitions
// (its keys counted in the same store), and stops with ErrCopartition
// when st-c, with 3, appears: its partition 2 would be a task without a
// changelog partition, and its keys' tasks other than the store's.
func TestPatternSourceCopartition(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "st-a", 2, nil)
		createTopic(t, addr, "out-st", 2, nil)
		b := NewBuilder()
		Count(GroupByKey(SourcePattern(b, regexp.MustCompile(`st-.*`), String, String)), Named("counts")).ToStream().To("out-st")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		prod := newClient(t, addr)
		ref := map[string]int64{}
		produceKeys := func(topic string, n int) {
			var rs []*kgo.Record
			for i := range n {
				k := fmt.Sprintf("k%02d", i%17)
				ref[k]++
				rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte("v")})
			}
			if err := prod.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		produceKeys("st-a", 100)
		a := startApp(t, topo, Config{ApplicationID: "patst", Brokers: []string{addr}, StateDir: t.TempDir(), MetadataMaxAge: 300 * time.Millisecond})
		checkFinal(t, readCounts(t, addr, "out-st", ref, kgo.ReadUncommitted(), 20*time.Second), ref)

		createTopic(t, addr, "st-b", 2, nil)
		produceKeys("st-b", 60)
		checkFinal(t, readCounts(t, addr, "out-st", ref, kgo.ReadUncommitted(), 30*time.Second), ref)
		checkStore(t, ref, a)

		createTopic(t, addr, "st-c", 3, nil)
		stopped := make(chan error, 1)
		go func() { stopped <- a.Wait() }()
		select {
		case err := <-stopped:
			if !errors.Is(err, ErrCopartition) || !strings.Contains(err.Error(), `"st-c"`) {
				t.Fatalf("stopped with %v, want ErrCopartition naming st-c", err)
			}
			t.Log(err)
		case <-time.After(30 * time.Second):
			t.Fatal("the application still runs 30 s after st-c (3 partitions) was created")
		}
	})
}

// TestBalancerPlacesUnlistedPatternTopic: the group's leader has not
// listed in-b yet (its topicSub knows in-a only), but a member subscribed
// to it; in-b's partition p must still go to the member running task
// 0_p, with in-a's partition p, and its partition 2 (in-a has 2) be a
// task of its own: a topic placed by itself would give two members one
// task's partitions.
func TestBalancerPlacesUnlistedPatternTopic(t *testing.T) {
	b := NewBuilder()
	words := FlatMapValues(SourcePattern(b, regexp.MustCompile(`in-.*`), String, String), strings.Fields)
	Count(GroupBy(words, func(_, w string) string { return w }, KeySerde(String), ValueSerde(String), Named("words")), Named("counts")).ToStream().To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(topo, Config{ApplicationID: "x", Brokers: []string{"127.0.0.1:1"}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rep := "x-words-repartition"
	a.topicSub = map[string]int{"in-a": 0, rep: 1}
	a.internalTopics = map[string]bool{rep: true, "x-counts-changelog": true}
	topics := map[string]int32{"in-a": 2, "in-b": 3, rep: 2}
	for _, n := range []int{2, 3} {
		var members []kmsg.JoinGroupResponseMember
		for i := range n {
			subs := []string{"in-a", rep}
			if i == 0 {
				subs = append(subs, "in-b")
			}
			members = append(members, memberMeta(fmt.Sprintf("m%d", i), subs, nil))
		}
		bal := &taskBalancer{app: a}
		cb, err := kgo.NewConsumerBalancer(bal, members)
		if err != nil {
			t.Fatal(err)
		}
		owner := map[string]map[int32]string{}
		for _, sa := range bal.Balance(cb, topics).IntoSyncAssignment() {
			var ma kmsg.ConsumerMemberAssignment
			if err := ma.ReadFrom(sa.MemberAssignment); err != nil {
				t.Fatal(err)
			}
			for _, tp := range ma.Topics {
				for _, p := range tp.Partitions {
					if owner[tp.Topic] == nil {
						owner[tp.Topic] = map[int32]string{}
					}
					owner[tp.Topic][p] = sa.MemberID
				}
			}
		}
		for p := int32(0); p < 3; p++ {
			if owner["in-b"][p] == "" {
				t.Errorf("%d members: in-b/%d assigned to nobody", n, p)
			}
			if p < 2 && owner["in-b"][p] != owner["in-a"][p] {
				t.Errorf("%d members: in-b/%d on %q, in-a/%d (task 0_%d) on %q", n, p, owner["in-b"][p], p, p, owner["in-a"][p])
			}
		}
	}
}

// TestPatternSourceNewTopicOtherInstance: of two instances, only one
// lists the topics often (the other's MetadataMaxAge is an hour): the
// first subscribes to in-b, and the group's leader gives in-b's
// partitions to the tasks of both, so the second learns in-b from its
// assignment, before it processes any of its records, and every word is
// output once. One stateless subtopology: each instance runs its tasks.
func TestPatternSourceNewTopicOtherInstance(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "two-in-a", 4, nil)
		createTopic(t, addr, "two-out", 2, nil)
		topo := func() *Topology {
			b := NewBuilder()
			FlatMapValues(SourcePattern(b, regexp.MustCompile(`two-in-.*`), String, String), strings.Fields, ValueSerde(String)).To("two-out")
			tp, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			return tp
		}
		out := newClient(t, addr, kgo.ConsumeTopics("two-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
		got := map[string]int64{}
		readWords := func(want map[string]int64) {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for !maps.Equal(got, want) && ctx.Err() == nil {
				out.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)]++ })
			}
			if !maps.Equal(got, want) {
				t.Fatalf("words out %v, want %v", got, want)
			}
		}
		prod := newClient(t, addr)
		la, ref := lines(1, 300)
		produceLines(t, prod, "two-in-a", la)
		slow := startApp(t, topo(), Config{ApplicationID: "two", Brokers: []string{addr}, StateDir: t.TempDir(), InstanceID: "slow", MetadataMaxAge: time.Hour})
		startApp(t, topo(), Config{ApplicationID: "two", Brokers: []string{addr}, StateDir: t.TempDir(), InstanceID: "fast", MetadataMaxAge: 300 * time.Millisecond})
		readWords(ref)
		processed := func() (n int64) {
			for _, ts := range slow.Stats().Tasks {
				n += ts.Processed
			}
			return n
		}
		before := processed()

		createTopic(t, addr, "two-in-b", 4, nil)
		lb, refB := lines(2, 300)
		produceLines(t, prod, "two-in-b", lb)
		addRef(ref, refB)
		readWords(ref)
		// in-a has no new lines: what the slow instance processed since
		// is in-b's, assigned to it before it listed in-b.
		if after := processed(); after <= before {
			t.Errorf("the slow instance processed %d lines before in-b, %d after: none of in-b's", before, after)
		}
	})
}

// TestPatternSourceFirstTopicAfterStart: a word count whose pattern
// matches nothing at Start has no repartition topic or changelog (Start
// sizes them by their subtopology's input). The first matching topic has
// them created with its partition count, down the topology (the
// counting subtopology reads the repartition topic), and the running
// instance counts everything, on both sides of a rebalance: a second
// instance joins afterwards. Before, the application stopped with
// ErrMissingTopic and needed a restart.
func TestPatternSourceFirstTopicAfterStart(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "first-out", 2, nil)
		topo := func() *Topology {
			b := NewBuilder()
			words := FlatMapValues(SourcePattern(b, regexp.MustCompile(`first-in-.*`), String, String), strings.Fields)
			Count(GroupBy(words, func(_, w string) string { return w }, KeySerde(String), ValueSerde(String), Named("words")), Named("counts")).ToStream().To("first-out")
			tp, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			return tp
		}
		cfg := Config{ApplicationID: "first", Brokers: []string{addr}, StateDir: t.TempDir(), MetadataMaxAge: 300 * time.Millisecond}
		a := startApp(t, topo(), cfg)
		createTopic(t, addr, "first-in-a", 3, nil)
		ls, ref := lines(1, 200)
		produceLines(t, newClient(t, addr), "first-in-a", ls)
		got := readCounts(t, addr, "first-out", ref, kgo.ReadUncommitted(), 30*time.Second)
		select {
		case <-a.done:
			t.Fatalf("the application stopped: %v", a.Wait())
		default:
		}
		checkFinal(t, got, ref)
		checkStore(t, ref, a)
		// The internal topics have the new topic's partitions.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		td, err := kadm.NewClient(newClient(t, addr)).ListTopics(ctx, "first-words-repartition", "first-counts-changelog")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"first-words-repartition", "first-counts-changelog"} {
			if n := len(td[name].Partitions); n != 3 || td[name].Err != nil {
				t.Errorf("%s: %d partitions (%v), want 3", name, n, td[name].Err)
			}
		}
		// A second instance shares the tasks; more lines are counted once.
		cfg2 := cfg
		cfg2.StateDir = t.TempDir()
		a2 := startApp(t, topo(), cfg2)
		more, ref2 := lines(201, 400)
		produceLines(t, newClient(t, addr), "first-in-a", more)
		for w, n := range ref2 {
			ref[w] += n
		}
		checkFinal(t, readCounts(t, addr, "first-out", ref, kgo.ReadUncommitted(), 30*time.Second), ref)
		checkStore(t, ref, a, a2)
	})
}
