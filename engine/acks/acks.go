package acks

import "math"

// Enough reports whether an acks=all produce may be appended to a
// partition of replicas replicas with inSync of them in sync (the
// committed ISR, the leader included) under min.insync.replicas
// minInsync. When it may not, the produce is refused before anything is
// written (NOT_ENOUGH_REPLICAS). min.insync.replicas is capped at the
// replica count, as Kafka 4 caps it (Partition.effectiveMinIsr, KIP-966):
// a topic whose min.insync.replicas exceeds its replication factor takes
// acks=all produces once every replica is in sync, rather than none ever.
func Enough(inSync, minInsync, replicas int32) bool {
	return inSync >= min(minInsync, max(replicas, 1))
}

// Covered reports whether an append whose records end before end (the LEO
// right after it) is committed at high watermark hw.
func Covered(end, hw int64) bool { return end <= hw }

// Queue holds the acks=all produce requests a leader appended and that
// wait for the high watermark to cover them, each with its end offset and
// a value of the caller's (what it needs to answer the request). The zero
// Queue is empty and ready to use.
type Queue[T any] struct {
	waiting []waiter[T]
	// least is the smallest end in waiting (meaningless when it is empty),
	// kept so that Park and Min cost nothing per waiting request.
	least int64
}

type waiter[T any] struct {
	end int64
	v   T
}

// Park queues v, an appended acks=all produce whose records end before
// end. The caller answers one that is already Covered at once instead.
func (q *Queue[T]) Park(end int64, v T) {
	if len(q.waiting) == 0 || end < q.least {
		q.least = end
	}
	q.waiting = append(q.waiting, waiter[T]{end: end, v: v})
}

// Due removes the requests that high watermark hw covers and returns
// their values, in the order they were parked (nil when none).
func (q *Queue[T]) Due(hw int64) []T {
	return q.remove(func(end int64) bool { return Covered(end, hw) })
}

// Fail removes the requests whose records end above leo and returns their
// values, in the order they were parked (nil when none): those a truncation
// of the log to leo cut, or, with leo -1, all of them (the leader lost its
// role, or the partition is going away).
func (q *Queue[T]) Fail(leo int64) []T {
	return q.remove(func(end int64) bool { return end > leo })
}

// Min is the smallest end offset waiting, math.MaxInt64 when none: a high
// watermark below it answers nothing, which lets a caller on another
// goroutine tell without the owner whether any request is due.
func (q *Queue[T]) Min() int64 {
	if len(q.waiting) == 0 {
		return math.MaxInt64
	}
	return q.least
}

// Len is the number of requests waiting.
func (q *Queue[T]) Len() int { return len(q.waiting) }

// remove takes out the requests whose end matches, keeping the order of
// the others, and returns their values.
func (q *Queue[T]) remove(match func(end int64) bool) []T {
	var out []T
	kept := q.waiting[:0]
	least := int64(math.MaxInt64)
	for _, w := range q.waiting {
		if match(w.end) {
			out = append(out, w.v)
			continue
		}
		kept = append(kept, w)
		least = min(least, w.end)
	}
	// The values taken out must not stay reachable from the backing array.
	clear(q.waiting[len(kept):])
	q.waiting, q.least = kept, least
	if len(kept) == 0 {
		// Give a burst's array back rather than keep it for a partition
		// that may wait for nothing again.
		q.waiting = nil
	}
	return out
}
