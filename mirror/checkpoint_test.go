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

// TestMirrorGroupFailover: a consumer group's offsets on A are translated
// through the offset syncs into checkpoints on B and committed for the
// same group on B (sync.group.offsets.enabled), so the group can move to
// B and reprocess no more than offset.lag.max records (the translation
// granularity: syncs are written every offset.lag.max records, inside
// transactions of any size).
func TestMirrorGroupFailover(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	admA, admB := kadm.NewClient(client(t, a)), kadm.NewClient(client(t, b))
	createTopic(t, admA, "t", 2, nil)
	ctx := context.Background()
	prod := client(t, a, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 100 {
		prod.Produce(ctx, &kgo.Record{Topic: "t", Partition: int32(i % 2), Value: fmt.Appendf(nil, "%d", i)}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Group g consumed t/0 up to 30 and all of t/1 (50 records) on A.
	var offs kadm.Offsets
	offs.AddOffset("t", 0, 30, -1)
	offs.AddOffset("t", 1, 50, -1)
	if rs, err := admA.CommitOffsets(ctx, "g", offs); err != nil || rs.Error() != nil {
		t.Fatalf("commit g on A: %v %v", err, rs.Error())
	}
	const granularity = 10
	runMirrorOpt(t, map[string]string{
		"clusters": "A, B", "A.bootstrap.servers": a, "B.bootstrap.servers": b,
		"A->B.enabled": "true", "emit.checkpoints.interval.seconds": "0.2", "sync.group.offsets.enabled": "true",
		"offset.lag.max": strconv.Itoa(granularity),
	}, Options{})
	mirrored := readAll(t, b, "A.t", 100, 15*time.Second)
	// Record i went to t/(i%2) at source offset i/2; on B its offset is
	// larger (transaction markers take offsets too). From g's offset on
	// B, the group would read again the records it had consumed on A
	// (source offset below A's commit) and must miss none it had not.
	committedA := map[int32]int64{0: 30, 1: 50}
	check := func(p int32, at int64) (again int, missed int) {
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
	var got kadm.OffsetResponses
	testkit.WaitFor(t, 15*time.Second, "g's offsets translated onto B", func() bool {
		var err error
		got, err = admB.FetchOffsets(ctx, "g")
		if err != nil {
			return false
		}
		for p := range int32(2) {
			o, ok := got.Lookup("A.t", p)
			if !ok {
				return false
			}
			again, missed := check(p, o.At)
			if missed > 0 {
				t.Fatalf("g on B at A.t/%d offset %d skips %d records it never consumed on A", p, o.At, missed)
			}
			if again > granularity {
				return false
			}
		}
		return true
	})
	// The checkpoints say the same, in MM2's format.
	cps := readAll(t, b, "A.checkpoints.internal", 1, 10*time.Second)
	found := false
	for _, r := range cps[0] {
		c, err := DecodeCheckpoint(r.Key, r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := got.Lookup("A.t", 1); c.Group == "g" && c.Topic == "A.t" && c.Partition == 1 && c.Upstream == 50 && c.Downstream == o.At {
			found = true
		}
	}
	if !found {
		t.Fatalf("no checkpoint of g for A.t/1 from 50 to the offset committed on B in A.checkpoints.internal")
	}
}
