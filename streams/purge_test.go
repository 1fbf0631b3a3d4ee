package streams

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRepartitionPurge: once the word count has committed its reading of
// the repartition topic, the records below the committed offsets are
// deleted (the partitions' start offsets reach the group's committed
// offsets), at least once and exactly once, and the repartition topic
// was created to be kept until purged (retention.ms -1), as Kafka
// Streams creates it. The changelog is not purged.
func TestRepartitionPurge(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
			id := fmt.Sprintf("purge-%d", g)
			in, out := id+"-lines", id+"-out"
			createTopic(t, addr, in, 4, nil)
			createTopic(t, addr, out, 4, nil)
			ls, ref := lines(7, 600)
			produceLines(t, newClient(t, addr), in, ls)
			a := startApp(t, wordCount(in, out), Config{ApplicationID: id, Brokers: []string{addr}, StateDir: t.TempDir(),
				Guarantee: g, RepartitionPurgeInterval: 50 * time.Millisecond})
			iso := kgo.ReadUncommitted()
			if g == ExactlyOnce {
				iso = kgo.ReadCommitted()
			}
			checkFinal(t, readCounts(t, addr, out, ref, iso, 30*time.Second), ref)

			adm := kadm.NewClient(newClient(t, addr))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			repart := id + "-words-repartition"
			changelog := id + "-counts-changelog"
			deadline := time.Now().Add(20 * time.Second)
			last := purgeState(ctx, adm, id, repart)
			for last != "" && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
				last = purgeState(ctx, adm, id, repart)
			}
			if last != "" {
				t.Fatalf("%v: repartition topic not purged to the committed offsets: %s", g, last)
			}
			starts, err := adm.ListStartOffsets(ctx, changelog)
			if err != nil {
				t.Fatal(err)
			}
			starts.Each(func(o kadm.ListedOffset) {
				if o.Err != nil || o.Offset != 0 {
					t.Errorf("%v: changelog %s/%d starts at %d (%v): purged", g, o.Topic, o.Partition, o.Offset, o.Err)
				}
			})
			rc, err := adm.DescribeTopicConfigs(ctx, repart)
			if err != nil {
				t.Fatal(err)
			}
			c, err := rc.On(repart, nil)
			if err != nil {
				t.Fatal(err)
			}
			ret := "absent"
			for _, kv := range c.Configs {
				if kv.Key == "retention.ms" && kv.Value != nil {
					ret = *kv.Value
				}
			}
			if ret != "-1" {
				t.Errorf("%v: %s retention.ms %s, want -1", g, repart, ret)
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// purgeState is "" when every partition of topic starts at group's
// committed offset (some records read), or what differs.
func purgeState(ctx context.Context, adm *kadm.Client, group, topic string) string {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return err.Error()
	}
	if len(starts[topic]) == 0 {
		return "no partitions"
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return err.Error()
	}
	for p, s := range starts[topic] {
		c, ok := committed.Lookup(topic, p)
		if s.Err != nil || !ok || c.Err != nil {
			return fmt.Sprintf("partition %d: start %v, committed %v", p, s.Err, c.Err)
		}
		if c.At <= 0 || s.Offset != c.At {
			return fmt.Sprintf("partition %d starts at %d, committed %d", p, s.Offset, c.At)
		}
	}
	return ""
}
