package mirror

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit"
)

// TestMirrorGroupFailoverAggregate: issue 16's aggregate, A and B both
// feeding agg a topic of the same name t. A group consuming t on A moves
// to agg's A.t through offsets translated by A->agg alone: B->agg's offset
// syncs (also for "t", partition for partition, at other offsets) must not
// be taken for A's. MM2 keeps each flow's syncs apart: with
// offset-syncs.topic.location=target the topic is named after the
// source, mm2-offset-syncs.A.internal. Named after the target, both flows
// wrote mm2-offset-syncs.agg.internal and A's group was translated
// through B's syncs.
func TestMirrorGroupFailoverAggregate(t *testing.T) {
	t.Parallel()
	a, b, agg := startBroker(t), startBroker(t), startBroker(t)
	admA, admAgg := kadm.NewClient(client(t, a)), kadm.NewClient(client(t, agg))
	ctx := context.Background()
	// B's t is busier than A's: its syncs name other offsets.
	for addr, n := range map[string]int{a: 100, b: 400} {
		createTopic(t, kadm.NewClient(client(t, addr)), "t", 2, nil)
		prod := client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		for i := range n {
			prod.Produce(ctx, &kgo.Record{Topic: "t", Partition: int32(i % 2), Value: fmt.Appendf(nil, "%d", i)}, nil)
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// And agg's B.t already holds records (the mirror started over on a
	// fresh offsets topic, say): B's syncs map its offsets 250 further
	// on than A's map A's.
	createTopic(t, admAgg, "B.t", 2, nil)
	pre := client(t, agg, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 500 {
		pre.Produce(ctx, &kgo.Record{Topic: "B.t", Partition: int32(i % 2), Value: []byte("before")}, nil)
	}
	if err := pre.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Group g consumed t/0 up to 30 and t/1 up to 45 on A.
	committedA := map[int32]int64{0: 30, 1: 45}
	var offs kadm.Offsets
	for p, o := range committedA {
		offs.AddOffset("t", p, o, -1)
	}
	if rs, err := admA.CommitOffsets(ctx, "g", offs); err != nil || rs.Error() != nil {
		t.Fatalf("commit g on A: %v %v", err, rs.Error())
	}
	const granularity = 10
	runMirrorOpt(t, map[string]string{
		"clusters": "A, B, agg", "A.bootstrap.servers": a, "B.bootstrap.servers": b, "agg.bootstrap.servers": agg,
		"A->agg.enabled": "true", "B->agg.enabled": "true", "groups": "g",
		"emit.checkpoints.interval.seconds": "0.2", "sync.group.offsets.enabled": "true",
		"offset.lag.max": strconv.Itoa(granularity),
	}, Options{})
	mirrored := readAll(t, agg, "A.t", 100, 15*time.Second)
	readAll(t, agg, "B.t", 900, 15*time.Second)
	// Record i went to t/(i%2) at source offset i/2. From g's offset on
	// agg, the group would read again what it had consumed on A and must
	// miss nothing it had not.
	check := func(p int32, at int64) (again, missed int) {
		for _, r := range mirrored[p] {
			var i int
			fmt.Sscan(string(r.Value), &i)
			consumed := int64(i/2) < committedA[p]
			switch {
			case r.Offset >= at && consumed:
				again++
			case r.Offset < at && !consumed:
				missed++
			}
		}
		return again, missed
	}
	var last string
	testkit.WaitFor(t, 15*time.Second, "g's offsets on agg within the translation granularity", func() bool {
		got, err := admAgg.FetchOffsets(ctx, "g")
		if err != nil {
			return false
		}
		ok := true
		last = ""
		for p := range int32(2) {
			o, found := got.Lookup("A.t", p)
			if !found {
				last += fmt.Sprintf(" A.t/%d: none;", p)
				ok = false
				continue
			}
			again, missed := check(p, o.At)
			last += fmt.Sprintf(" A.t/%d: offset %d, %d again, %d missed;", p, o.At, again, missed)
			if missed > 0 {
				t.Fatalf("g on agg at A.t/%d offset %d skips %d records it never consumed on A (%s)", p, o.At, missed, last)
			}
			ok = ok && again <= granularity
		}
		return ok
	})
	t.Logf("g on agg:%s", last)
}
