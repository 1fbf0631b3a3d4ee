package replication

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"ringlog/segment"
)

func TestStartTruncation(t *testing.T) {
	if got := StartTruncation(nil, 30, 15); got != (Truncation{TruncateTo: 15, Done: true}) {
		t.Errorf("without epochs: %+v, want truncation to the HW", got)
	}
	if got := StartTruncation(nil, 10, 15); got != (Truncation{TruncateTo: 10, Done: true}) {
		t.Errorf("without epochs, HW above LEO: %+v", got)
	}
	entries := []segment.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 3, StartOffset: 20}}
	if got := StartTruncation(entries, 30, 15); got != (Truncation{TruncateTo: 30, Ask: 3}) {
		t.Errorf("with epochs: %+v, want to ask about the latest", got)
	}
}

func TestTruncationStep(t *testing.T) {
	// The follower: epoch 0 from 0, 1 from 10, 3 from 20; LEO 30, HW 15.
	follower := []segment.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 10}, {Epoch: 3, StartOffset: 20}}
	for _, tc := range []struct {
		name    string
		entries []segment.EpochEntry
		asked   int32
		answer  EpochEndOffset
		want    Truncation
		err     error
	}{
		{"leader knows nothing: the HW", follower, 3, Undefined, Truncation{TruncateTo: 15, Done: true}, nil},
		{"v0 answer without epoch: its offset", follower, 3, EpochEndOffset{segment.UndefinedEpoch, 25}, Truncation{TruncateTo: 25, Done: true}, nil},
		{"same epoch, leader's end first", follower, 3, EpochEndOffset{3, 25}, Truncation{TruncateTo: 25, Done: true}, nil},
		{"same epoch, leader has more", follower, 3, EpochEndOffset{3, 40}, Truncation{TruncateTo: 30, Done: true}, nil},
		// KIP-279: the leader's epoch 1 ends at 25, the follower's at 20.
		// KIP-101 alone kept 20-24, written in epoch 3 on the follower and
		// epoch 1 on the leader.
		{"smaller epoch, follower's end first", follower, 3, EpochEndOffset{1, 25}, Truncation{TruncateTo: 20, Done: true}, nil},
		{"smaller epoch, leader's end first", follower, 3, EpochEndOffset{1, 18}, Truncation{TruncateTo: 18, Done: true}, nil},
		// The leader's epoch 2 is unknown here: drop everything from the
		// follower's next epoch on and ask about epoch 1.
		{"epoch unknown to the follower: walk back", follower, 3, EpochEndOffset{2, 22}, Truncation{TruncateTo: 20, Ask: 1}, nil},
		{"walk back from a cache with a hole", follower, 1, EpochEndOffset{0, 12}, Truncation{TruncateTo: 10, Done: true}, nil},
		// The follower's history starts after the leader's answer: nothing
		// of it is known to be common.
		{"epoch older than the follower's first", follower[1:], 1, EpochEndOffset{0, 5}, Truncation{TruncateTo: 5, Done: true}, nil},
		{"follower without epochs", nil, 3, EpochEndOffset{2, 22}, Truncation{TruncateTo: 22, Done: true}, nil},
		{"answer above the epoch asked", follower, 3, EpochEndOffset{4, 30}, Truncation{}, ErrInvalidAnswer},
		{"negative end offset", follower, 3, EpochEndOffset{3, -2}, Truncation{}, ErrInvalidAnswer},
	} {
		got, err := TruncationStep(tc.entries, 30, 15, tc.asked, tc.answer)
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

// truncateEntries drops the epochs starting at or after offset, as a
// log's truncation does; with keepAtLEO, entries at or after the LEO stay
// when the truncation is a no-op (what segment.Log.TruncateTo does today).
func truncateEntries(entries []segment.EpochEntry, leo, offset int64, keepAtLEO bool) []segment.EpochEntry {
	if keepAtLEO && offset >= leo {
		return entries
	}
	return slices.DeleteFunc(slices.Clone(entries), func(e segment.EpochEntry) bool { return e.StartOffset >= offset })
}

func randomHistory(rng *rand.Rand) ([]segment.EpochEntry, int64) {
	var entries []segment.EpochEntry
	epoch, off := int32(rng.IntN(3)), int64(rng.IntN(5))
	for range rng.IntN(8) {
		entries = append(entries, segment.EpochEntry{Epoch: epoch, StartOffset: off})
		epoch += int32(1 + rng.IntN(3))
		off += int64(rng.IntN(6)) // zero: an epoch that wrote nothing
	}
	return entries, off + int64(rng.IntN(6))
}

// Whatever the two histories, the walk asks about strictly smaller epochs
// and ends within one step per follower epoch, with or without stale
// entries left at the LEO.
func TestTruncationWalkEnds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 20000 {
		leaderEntries, leaderLEO := randomHistory(rng)
		entries, leo := randomHistory(rng)
		keep := i%2 == 0
		tr := StartTruncation(entries, leo, 0)
		steps, epochs := 0, len(entries)
		for !tr.Done {
			entries = truncateEntries(entries, leo, tr.TruncateTo, keep)
			leo = min(leo, tr.TruncateTo)
			asked := tr.Ask
			next, err := TruncationStep(entries, leo, 0, asked, EndOffsetForEpoch(leaderEntries, leaderLEO, asked))
			if err != nil {
				t.Fatal(err)
			}
			if !next.Done && next.Ask >= asked {
				t.Fatalf("walk from epoch %d asks about %d next (leader %v, follower %v)", asked, next.Ask, leaderEntries, entries)
			}
			if next.TruncateTo > leo {
				t.Fatalf("truncation to %d above the LEO %d", next.TruncateTo, leo)
			}
			if steps++; steps > epochs {
				t.Fatalf("walk of %d steps over %d epochs", steps, epochs)
			}
			tr = next
		}
	}
}

func TestOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		leo, leaderStart, leaderLEO int64
		want                        Reset
	}{
		{"leader behind (unclean election)", 50, 0, 40, Reset{TruncateTo: 40, FetchFrom: 40}},
		{"leader deleted what the follower lacks", 50, 80, 120, Reset{TruncateTo: 80, StartAt: true, FetchFrom: 80}},
		{"fetch again from the LEO", 50, 10, 120, Reset{TruncateTo: 50, FetchFrom: 50}},
	} {
		if got := OutOfRange(tc.leo, tc.leaderStart, tc.leaderLEO); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestFollowerHW(t *testing.T) {
	for _, tc := range []struct{ leaderHW, logStart, leo, want int64 }{
		{10, 0, 20, 10},
		{30, 0, 20, 20}, // never above the follower's LEO
		{5, 8, 20, 8},   // never below its log start
	} {
		if got := FollowerHW(tc.leaderHW, tc.logStart, tc.leo); got != tc.want {
			t.Errorf("FollowerHW(%d, %d, %d) = %d, want %d", tc.leaderHW, tc.logStart, tc.leo, got, tc.want)
		}
	}
}
