// Package rate measures a rate over a ring of time windows, as Kafka's
// SampledStat, Rate and SimpleRate do for its quotas: the client quotas
// (kafka/quota.go) and the replication throttles (replication/node) share
// it, so both count bytes the one way.
//
// A Windows is not safe for concurrent use: its owner locks around it.
// Times are nanoseconds on any clock that does not go back (the callers'
// own monotonic clocks); a window is the span [i*size, (i+1)*size).
package rate

import (
	"math"
	"time"
)

// Windows holds the sum recorded in each of the last num windows of size.
type Windows struct {
	size    int64 // nanoseconds
	windows []window
}

type window struct {
	index int64 // the window's number: its start over size
	sum   float64
}

// New returns a measurement over num windows (at least 2) of size (at
// least a millisecond).
func New(num int, size time.Duration) *Windows {
	num = max(num, 2)
	size = max(size, time.Millisecond)
	w := &Windows{size: int64(size), windows: make([]window, num)}
	for i := range w.windows {
		// Unused: never in the ring. (Window 0 of the callers' clocks
		// is real: left at index 0, the empty windows counted as the
		// oldest for the first num windows of the clock, stretching
		// the span to the clock's age and dividing the rate by it.)
		w.windows[i].index = math.MinInt64
	}
	return w
}

// Record adds v to the window holding now.
func (w *Windows) Record(now int64, v float64) {
	idx := now / w.size
	x := &w.windows[idx%int64(len(w.windows))]
	if x.index != idx {
		*x = window{index: idx}
	}
	x.sum += v
}

// Rate is the sum of the windows still in the ring at now over the time
// since the oldest of them began, and that time. The time is at least
// minSpan: Kafka's Rate pads it to all but one window (a first burst is
// measured over the whole span, not over the moment it took), its
// SimpleRate to one window (a replication throttle acts within a window of
// the start of a move).
func (w *Windows) Rate(now int64, minSpan time.Duration) (rate float64, span time.Duration) {
	idx := now / w.size
	n := int64(len(w.windows))
	var total float64
	oldest := idx
	for _, x := range w.windows {
		if x.index > idx-n && x.index <= idx {
			total += x.sum
			oldest = min(oldest, x.index)
		}
	}
	span = max(time.Duration(now-oldest*w.size), minSpan)
	if span <= 0 {
		return 0, 0
	}
	return total / span.Seconds(), span
}

// Size is the length of one window.
func (w *Windows) Size() time.Duration { return time.Duration(w.size) }

// Num is the number of windows in the ring.
func (w *Windows) Num() int { return len(w.windows) }

// ThrottleTime is Kafka's ClientQuotaManager.throttleTime: how long
// nothing more may be recorded for a rate measured over span to fall back
// to bound, at most the whole ring (0 when it is within bound).
func (w *Windows) ThrottleTime(rate, bound float64, span time.Duration) time.Duration {
	ring := time.Duration(len(w.windows)) * time.Duration(w.size)
	switch {
	case rate <= bound:
		return 0
	case bound <= 0:
		return ring // a bound of 0 lets nothing more through
	}
	d := time.Duration((rate - bound) / bound * float64(span))
	return min(d, ring)
}
