package main

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/streams"
)

// TestWordCount runs the example's topology on kfake: "the" counted
// three times across two lines, case folded.
func TestWordCount(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "lines", "word-counts"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	topo, err := topology("lines", "word-counts")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("word-counts"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "lines", Value: []byte("The cat and the hat")},
		&kgo.Record{Topic: "lines", Value: []byte("THE end")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	a, err := streams.New(topo, streams.Config{ApplicationID: "wc", Brokers: []string{addr}, StateDir: t.TempDir(), CommitInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// The counts are on two partitions: read until every word's last
	// count is in (one partition's records may come in a later fetch).
	last := map[string]int64{}
	for last["the"] != 3 || last["cat"] != 1 || last["end"] != 1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("counts so far: %v", last)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n, err := streams.Int64.Deserialize(r.Topic, r.Value)
			if err != nil {
				t.Fatal(err)
			}
			last[string(r.Key)] = n
		})
	}
	if last["and"] != 1 || last["hat"] != 1 || len(last) != 5 {
		t.Errorf("counts %v", last)
	}
}
