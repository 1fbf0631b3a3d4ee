package streams

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPatternSourceNewTopics: a word count whose source is the pattern
// in-.* reads in-a; in-b, created after Start with more partitions (the
// source subtopology is stateless: its extra partitions make tasks of
// their own), joins it within a few metadata refreshes and its lines are
// counted; in-a deleted then leaves it while in-b's tasks, which were
// in-a's too, keep counting; and the application's own internal topics
// and out, which the pattern .* of nothing here would take, stay out.
func TestPatternSourceNewTopics(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "in-a", 2, nil)
		createTopic(t, addr, "pat-out", 2, nil)
		b := NewBuilder()
		ls := SourcePattern(b, regexp.MustCompile(`in-.*`), String, String)
		words := FlatMapValues(ls, strings.Fields)
		byWord := GroupBy(words, func(_, w string) string { return w }, KeySerde(String), ValueSerde(String), Named("words"))
		Count(byWord, Named("counts")).ToStream().To("pat-out")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		prod := newClient(t, addr)
		la, ref := lines(1, 300)
		produceLines(t, prod, "in-a", la)
		a := startApp(t, topo, Config{ApplicationID: "pat", Brokers: []string{addr}, StateDir: t.TempDir(), MetadataMaxAge: 300 * time.Millisecond})
		checkFinal(t, readCounts(t, addr, "pat-out", ref, kgo.ReadUncommitted(), 20*time.Second), ref)

		// A topic created after Start, matching, with 3 partitions.
		createTopic(t, addr, "in-b", 3, nil)
		lb, refB := lines(2, 300)
		produceLines(t, prod, "in-b", lb)
		addRef(ref, refB)
		checkFinal(t, readCounts(t, addr, "pat-out", ref, kgo.ReadUncommitted(), 30*time.Second), ref)
		checkStore(t, ref, a)

		// in-a deleted: tasks 0_0 and 0_1 lose its partitions but keep
		// in-b's, whose new lines are counted.
		adm := kadm.NewClient(newClient(t, addr))
		resp, err := adm.DeleteTopics(context.Background(), "in-a")
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // a few refreshes: the deletion is noticed first
		lc, refC := lines(3, 300)
		produceLines(t, prod, "in-b", lc)
		addRef(ref, refC)
		checkFinal(t, readCounts(t, addr, "pat-out", ref, kgo.ReadUncommitted(), 30*time.Second), ref)
		checkStore(t, ref, a)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	})
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
