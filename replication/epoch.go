package replication

import (
	"fmt"
	"sort"

	"ringlog/segment"
)

// EpochEndOffset is an answer to OffsetForLeaderEpoch, or the diverging
// epoch of a fetch response: the largest epoch the answering replica knows
// at or below the one asked, and the offset where it ends.
type EpochEndOffset struct {
	Epoch     int32
	EndOffset int64
}

// Undefined is the answer when nothing is known: UNDEFINED_EPOCH (-1) and
// UNDEFINED_EPOCH_OFFSET (-1).
var Undefined = EpochEndOffset{Epoch: segment.UndefinedEpoch, EndOffset: segment.UndefinedOffset}

// EndOffsetForEpoch answers OffsetForLeaderEpoch from a leader-epoch cache
// (entries in ascending epoch and start offset, as segment.Log.Epochs
// returns them) and the log's LEO, as Kafka's LeaderEpochFileCache does
// and as (*segment.Log).EndOffsetForEpoch does (the tests hold the two
// together):
//
//   - the undefined epoch, or an empty cache: Undefined;
//   - the latest epoch: it ends at the LEO;
//   - an epoch newer than every known one: Undefined;
//   - an epoch older than every known one: the requested epoch itself, ending
//     where the first known epoch starts (the data before it is gone; the
//     follower must not keep anything from there on);
//   - otherwise the largest known epoch at or below the requested one
//     (KIP-279: not the requested one, so that a follower that never saw
//     that epoch walks back to one it has), ending where the next known
//     epoch starts.
func EndOffsetForEpoch(entries []segment.EpochEntry, leo int64, requested int32) EpochEndOffset {
	n := len(entries)
	if requested == segment.UndefinedEpoch || n == 0 {
		return Undefined
	}
	if entries[n-1].Epoch == requested {
		return EpochEndOffset{Epoch: requested, EndOffset: leo}
	}
	// The first entry of an epoch above requested.
	i := sort.Search(n, func(i int) bool { return entries[i].Epoch > requested })
	switch i {
	case n:
		return Undefined
	case 0:
		return EpochEndOffset{Epoch: requested, EndOffset: entries[0].StartOffset}
	}
	return EpochEndOffset{Epoch: entries[i-1].Epoch, EndOffset: entries[i].StartOffset}
}

// DivergingEpoch is the leader's check of a fetch that carries the
// follower's last fetched epoch (Fetch v12+, truncation on fetch): when the
// follower's log cannot be a prefix of the leader's (the leader's end of
// that epoch is a smaller epoch, or ends before the fetch offset), the
// answer carries the leader's EpochEndOffset for it instead of records,
// and the follower truncates with TruncationStep as if it had asked
// OffsetForLeaderEpoch. A fetch that diverges must not reach
// Leader.FollowerFetch. An epoch the leader cannot place, or a fetch below
// the log start, is ErrOffsetOutOfRange, as in Kafka.
//
// The follower's last fetched epoch is the epoch of its last batch
// ((*segment.Log).EpochForOffset(LEO-1)), not the latest entry of its
// cache: an entry for an epoch that wrote nothing can sit at the LEO, and
// the leader, which never had that epoch, would answer with a divergence
// on every fetch.
func DivergingEpoch(entries []segment.EpochEntry, logStart, leo, fetchOffset int64, lastFetchedEpoch int32) (EpochEndOffset, bool, error) {
	e := EndOffsetForEpoch(entries, leo, lastFetchedEpoch)
	if e.Epoch == segment.UndefinedEpoch || e.EndOffset == segment.UndefinedOffset {
		return Undefined, false, fmt.Errorf("%w: cannot place last fetched epoch %d", ErrOffsetOutOfRange, lastFetchedEpoch)
	}
	if fetchOffset < logStart {
		return Undefined, false, fmt.Errorf("%w: fetch at %d below the log start %d", ErrOffsetOutOfRange, fetchOffset, logStart)
	}
	if e.Epoch < lastFetchedEpoch || e.EndOffset < fetchOffset {
		return e, true, nil
	}
	return EpochEndOffset{}, false, nil
}
