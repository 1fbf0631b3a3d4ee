package mirror

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMirrorFromKfake: the source is franz-go's kfake, a Kafka that
// ringlog did not write, with a transaction aborted among committed
// records; B holds the committed records only, once, in order.
func TestMirrorFromKfake(t *testing.T) {
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "events"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	a := src.ListenAddrs()[0]
	b := startBroker(t)
	ctx := context.Background()
	txn := client(t, a, kgo.TransactionalID("kfake-writer"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	want := map[int32][]string{}
	for round := range 4 {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		commit := round != 2 // the third transaction is aborted
		for i := range 20 {
			p := int32(i % 2)
			v := fmt.Sprintf("r%d-%d", round, i)
			if err := txn.ProduceSync(ctx, &kgo.Record{Topic: "events", Partition: p, Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if commit {
				want[p] = append(want[p], v)
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	runMirror(t, map[string]string{
		"clusters": "K, B", "K.bootstrap.servers": a, "B.bootstrap.servers": b,
		"K->B.enabled": "true", "K->B.topics": "events",
	})
	got := readAll(t, b, "K.events", 60, 15*time.Second)
	for p := range int32(2) {
		if len(got[p]) != len(want[p]) {
			t.Fatalf("K.events/%d: %d records, want %d", p, len(got[p]), len(want[p]))
		}
		for i, r := range got[p] {
			if string(r.Value) != want[p][i] {
				t.Fatalf("K.events/%d at %d: %s, want %s", p, i, r.Value, want[p][i])
			}
		}
	}
}
