package replication

import (
	"fmt"

	"ringlog/segment"
)

// Truncation is one step of a follower's truncation after it learns of a
// new leader epoch, before it fetches (KIP-101, KIP-279). The follower
// truncates its log to TruncateTo (a no-op at or above its LEO); then,
// when Done, it fetches from its LEO, and otherwise asks the leader
// OffsetForLeaderEpoch about Ask and feeds the answer to TruncationStep.
type Truncation struct {
	TruncateTo int64
	Done       bool
	Ask        int32
}

// StartTruncation is a follower's first step after it learns of a new
// leader epoch, from its leader-epoch cache, LEO and HW: ask the leader
// about its latest epoch; or, with an empty cache (a log written before
// leader epochs, or an empty one), truncate to the HW and fetch, Kafka's
// pre-KIP-101 path. Truncating to the HW is unsafe in general (it may drop
// committed data the HW did not yet cover on this replica, KIP-101's first
// scenario), which is why the epoch path is taken whenever it can be.
func StartTruncation(entries []segment.EpochEntry, leo, hw int64) Truncation {
	if len(entries) == 0 {
		return Truncation{TruncateTo: min(hw, leo), Done: true}
	}
	return Truncation{TruncateTo: leo, Ask: entries[len(entries)-1].Epoch}
}

// TruncationStep turns the leader's answer to OffsetForLeaderEpoch about
// epoch asked into the follower's next step, from the follower's cache,
// LEO and HW, as Kafka's AbstractFetcherThread.getOffsetTruncationState
// does. A diverging epoch in a fetch response is handled the same way.
//
//   - Undefined end offset: the leader knows nothing of that epoch; truncate
//     to the HW (the legacy path).
//   - Undefined epoch with an end offset (OffsetForLeaderEpoch v0): truncate
//     to that offset.
//   - An epoch the follower does not have (the leader answered with a
//     smaller epoch than asked, which the follower never wrote): truncate
//     to the end of the follower's largest epoch below it, and ask about
//     that epoch (KIP-279: after two quick leader changes the follower's
//     latest epoch may be one the leader never saw, and its end offset
//     says nothing about where the logs part).
//   - Otherwise truncate to the smaller of the two ends of that epoch: both
//     logs agree up to there (the leader of an epoch wrote its batches in
//     one sequence), and nothing of that epoch or later is common beyond
//     it.
//
// A follower whose cache holds no epoch at or below the answer truncates
// to the leader's offset. Every step that is not Done asks about a
// strictly smaller epoch than the one before, so the walk ends. An answer
// with an epoch above the one asked, or an end offset below -1, breaks the
// protocol and is refused with ErrInvalidAnswer.
func TruncationStep(entries []segment.EpochEntry, leo, hw int64, asked int32, answer EpochEndOffset) (Truncation, error) {
	if answer.Epoch > asked || answer.EndOffset < segment.UndefinedOffset {
		return Truncation{}, fmt.Errorf("%w: asked about epoch %d, got epoch %d ending at %d", ErrInvalidAnswer, asked, answer.Epoch, answer.EndOffset)
	}
	if answer.EndOffset == segment.UndefinedOffset {
		return Truncation{TruncateTo: min(hw, leo), Done: true}, nil
	}
	if answer.Epoch == segment.UndefinedEpoch {
		return Truncation{TruncateTo: min(answer.EndOffset, leo), Done: true}, nil
	}
	own := EndOffsetForEpoch(entries, leo, answer.Epoch)
	switch {
	case own.EndOffset == segment.UndefinedOffset:
		return Truncation{TruncateTo: min(answer.EndOffset, leo), Done: true}, nil
	case own.Epoch != answer.Epoch:
		// own.Epoch < answer.Epoch <= asked: the walk goes strictly down.
		return Truncation{TruncateTo: min(own.EndOffset, leo), Ask: own.Epoch}, nil
	}
	return Truncation{TruncateTo: min(own.EndOffset, answer.EndOffset, leo), Done: true}, nil
}

// Reset is what a follower does when the leader answers a fetch with
// OFFSET_OUT_OF_RANGE: truncate to TruncateTo (or, when StartAt, empty the
// log and start it at FetchFrom), then fetch from FetchFrom.
type Reset struct {
	TruncateTo int64
	StartAt    bool
	FetchFrom  int64
}

// OutOfRange decides a follower's Reset from its LEO and the leader's log
// start offset and LEO, as Kafka's fetchOffsetAndTruncate does. A leader
// behind the follower (after an unclean election) makes it truncate to the
// leader's LEO; a leader whose log starts after the follower's end (it
// deleted old segments while the follower was away) makes it start over
// there; otherwise it fetches from its own LEO again.
func OutOfRange(leo, leaderLogStart, leaderLEO int64) Reset {
	switch {
	case leaderLEO < leo:
		return Reset{TruncateTo: leaderLEO, FetchFrom: leaderLEO}
	case leaderLogStart > leo:
		return Reset{TruncateTo: leaderLogStart, StartAt: true, FetchFrom: leaderLogStart}
	}
	return Reset{TruncateTo: leo, FetchFrom: leo}
}

// FollowerHW is the HW a follower keeps after a fetch response carrying
// the leader's HW: the leader's, but never above its own LEO nor below its
// log start (Kafka's updateHighWatermark). It can go down, after a
// truncation or when the new leader's HW is behind.
func FollowerHW(leaderHW, logStart, leo int64) int64 {
	return max(logStart, min(leaderHW, leo))
}
