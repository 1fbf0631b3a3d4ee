package rate

import (
	"math"
	"testing"
	"time"
)

const sec = int64(time.Second)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6*math.Max(1, math.Abs(b)) }

// TestRateWindows walks the ring by hand: the padding of a first burst
// (Rate's and SimpleRate's), windows leaving the ring, and a gap longer
// than the ring.
func TestRateWindows(t *testing.T) {
	w := New(3, time.Second)
	w.Record(0, 1000)
	// SimpleRate: one window at least.
	if r, span := w.Rate(sec/2, time.Second); !near(r, 1000) || span != time.Second {
		t.Fatalf("first burst, simple: %v over %v", r, span)
	}
	// Rate: all but one window.
	if r, span := w.Rate(sec/2, 2*time.Second); !near(r, 500) || span != 2*time.Second {
		t.Fatalf("first burst, padded: %v over %v", r, span)
	}
	w.Record(sec+sec/2, 2000)
	w.Record(2*sec+sec/2, 3000)
	// Three windows in the ring, 6000 over 3 s since window 0 began.
	if r, span := w.Rate(3*sec-1, time.Second); !near(r, 6000/(float64(3*sec-1)/1e9)) || span != time.Duration(3*sec-1) {
		t.Fatalf("full ring: %v over %v", r, span)
	}
	// At 3.5 s window 0 has left the ring: 5000 over the 2.5 s since window 1 began.
	if r, _ := w.Rate(3*sec+sec/2, time.Second); !near(r, 2000) {
		t.Fatalf("after window 0 left: %v", r)
	}
	// Recording into window 3 reuses window 0's slot.
	w.Record(3*sec+sec/2, 500)
	// At 4 s the ring is windows 2 and 3: 3500 over 2 s.
	if r, _ := w.Rate(4*sec, time.Second); !near(r, 1750) {
		t.Fatalf("reused slot: %v", r)
	}
	// Long after, nothing is left.
	if r, span := w.Rate(100*sec, time.Second); r != 0 || span != time.Second {
		t.Fatalf("after a gap: %v over %v", r, span)
	}
}

// TestRateEarlyClock: within the first windows of the clock, the empty
// windows are not counted as the oldest (the span would be the clock's
// age, and a burst 8 s after the start measured over 8 s).
func TestRateEarlyClock(t *testing.T) {
	w := New(11, time.Second)
	w.Record(8*sec, 8000)
	if r, span := w.Rate(8*sec+sec/2, time.Second); !near(r, 8000) || span != time.Second {
		t.Fatalf("%v over %v, want 8000 over 1s", r, span)
	}
}

func TestThrottleTime(t *testing.T) {
	w := New(11, time.Second)
	for _, c := range []struct {
		rate, bound float64
		span, want  time.Duration
	}{
		{900, 1000, 10 * time.Second, 0},
		{1000, 1000, 10 * time.Second, 0},
		{1500, 1000, 10 * time.Second, 5 * time.Second},
		{1e9, 1000, 10 * time.Second, 11 * time.Second}, // at most the ring
		{1, 0, time.Second, 11 * time.Second},           // a zero bound holds everything
		{0, 0, time.Second, 0},
	} {
		if got := w.ThrottleTime(c.rate, c.bound, c.span); got != c.want {
			t.Errorf("ThrottleTime(%v, %v, %v) = %v, want %v", c.rate, c.bound, c.span, got, c.want)
		}
	}
}
