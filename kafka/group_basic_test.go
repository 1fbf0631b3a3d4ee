package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupBasic: two kgo members share a topic, consume everything and
// commit; the group is described as Stable with both members, and its
// committed offsets are the partitions' ends.
func TestGroupBasic(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	const parts = 3
	e2eCreateTopic(t, b, "basic", parts, nil)
	prod := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	e2eProduce(t, prod, "basic", parts, 0, 100, 16)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := make(chan int, 1000)
	for range 2 {
		cl := b.client(kgo.ConsumerGroup("basic-g"), kgo.ConsumeTopics("basic"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(100*time.Millisecond),
			kgo.FetchMaxWait(100*time.Millisecond))
		go func() {
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch error %s/%d: %v", topic, p, err) })
				fs.EachRecord(func(r *kgo.Record) { seen <- 1 })
			}
		}()
	}
	n := 0
	for n < parts*100 {
		select {
		case <-seen:
			n++
		case <-ctx.Done():
			t.Fatalf("consumed %d of %d", n, parts*100)
		}
	}
	adm := b.admin()
	for {
		offs, err := adm.FetchOffsets(ctx, "basic-g")
		if err != nil {
			t.Fatal(err)
		}
		done := true
		for p := range int32(parts) {
			o, ok := offs.Lookup("basic", p)
			if !ok || o.At != 100 {
				done = false
			}
		}
		if done {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("offsets: %+v", offs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Cooperative-sticky may still be in its second rebalance.
	for {
		groups, err := adm.DescribeGroups(ctx, "basic-g")
		if err != nil {
			t.Fatal(err)
		}
		g := groups["basic-g"]
		if g.State == "Stable" && len(g.Members) == 2 && g.Protocol == "cooperative-sticky" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("described %+v", g)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
