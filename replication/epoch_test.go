package replication

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"ringlog/segment"
)

func TestEndOffsetForEpoch(t *testing.T) {
	entries := []segment.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 100}, {Epoch: 4, StartOffset: 150}, {Epoch: 7, StartOffset: 300}}
	for _, tc := range []struct {
		requested int32
		want      EpochEndOffset
	}{
		{segment.UndefinedEpoch, Undefined},
		{7, EpochEndOffset{7, 400}}, // the latest epoch ends at the LEO
		{4, EpochEndOffset{4, 300}}, // ends where the next one starts
		{5, EpochEndOffset{4, 300}}, // unknown: the largest below it (KIP-279)
		{2, EpochEndOffset{1, 100}},
		{1, EpochEndOffset{1, 100}},
		{0, EpochEndOffset{0, 0}}, // older than all: itself, ending at the first start
		{8, Undefined},            // newer than all
	} {
		if got := EndOffsetForEpoch(entries, 400, tc.requested); got != tc.want {
			t.Errorf("EndOffsetForEpoch(%d) = %v, want %v", tc.requested, got, tc.want)
		}
	}
	if got := EndOffsetForEpoch(nil, 10, 3); got != Undefined {
		t.Errorf("empty cache: %v", got)
	}
}

// The pure function and the segment log's answer must never differ: the
// leader answers followers from its log, followers decide with the
// function. Histories come from real appends, leader epochs assigned
// without appends, truncations and reopens.
func TestEndOffsetForEpochMatchesSegment(t *testing.T) {
	c := &cluster{t: t, now: t0}
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 99))
		dir := t.TempDir()
		log, err := segment.Open(dir, logConfig(), segment.Options{})
		if err != nil {
			t.Fatal(err)
		}
		epoch := int32(rng.IntN(3))
		compare := func(when string) {
			for r := int32(-2); r <= epoch+2; r++ {
				got := EndOffsetForEpoch(log.Epochs(), log.LEO(), r)
				e, o := log.EndOffsetForEpoch(r)
				if got.Epoch != e || got.EndOffset != o {
					t.Fatalf("seed %d %s: epochs %v LEO %d: EndOffsetForEpoch(%d) = %v, segment %d %d", seed, when, log.Epochs(), log.LEO(), r, got, e, o)
				}
			}
		}
		for step := range 60 {
			switch x := rng.IntN(10); {
			case x < 6:
				if _, err := log.Append([][]byte{c.mkBatch(1 + rng.IntN(3))}, segment.AppendOptions{LeaderEpoch: epoch}); err != nil {
					t.Fatal(err)
				}
			case x < 8:
				epoch += int32(1 + rng.IntN(2))
				if err := log.AssignEpoch(epoch, log.LEO()); err != nil {
					t.Fatal(err)
				}
			case x < 9:
				if err := log.TruncateTo(rng.Int64N(log.LEO() + 1)); err != nil {
					t.Fatal(err)
				}
			default:
				if err := log.Close(); err != nil {
					t.Fatal(err)
				}
				if log, err = segment.Open(dir, logConfig(), segment.Options{}); err != nil {
					t.Fatal(err)
				}
			}
			compare(fmt.Sprint("step ", step))
		}
		log.Close()
	}
}

func TestDivergingEpoch(t *testing.T) {
	// The leader's log: epoch 1 from 0, epoch 3 from 100, LEO 150, log start 20.
	entries := []segment.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 3, StartOffset: 100}}
	for _, tc := range []struct {
		name      string
		offset    int64
		lastEpoch int32
		want      EpochEndOffset
		diverging bool
		err       error
	}{
		{"same epoch, within it", 150, 3, EpochEndOffset{}, false, nil},
		{"older epoch, up to its end", 100, 1, EpochEndOffset{}, false, nil},
		{"older epoch, past its end", 120, 1, EpochEndOffset{1, 100}, true, nil},
		{"epoch the leader never had", 110, 2, EpochEndOffset{1, 100}, true, nil},
		{"epoch newer than the leader's", 150, 4, EpochEndOffset{}, false, ErrOffsetOutOfRange},
		{"below the log start", 10, 1, EpochEndOffset{}, false, ErrOffsetOutOfRange},
	} {
		got, div, err := DivergingEpoch(entries, 20, 150, tc.offset, tc.lastEpoch)
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || div != tc.diverging || (div && got != tc.want) {
			t.Errorf("%s: %v %v %v, want %v %v %v", tc.name, got, div, err, tc.want, tc.diverging, tc.err)
		}
	}
}
