package bench

import (
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds from 1 µs to 5 minutes with three
// significant digits: a 0.1% error at any magnitude, about 40 KiB per
// histogram.
const (
	histMinMicros = 1
	histMaxMicros = int64(5 * time.Minute / time.Microsecond)
	histDigits    = 3
)

func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMinMicros, histMaxMicros, histDigits)
}

// recorder is a histogram shared by the callbacks of one client, which
// franz-go and nats.go may run on several goroutines.
type recorder struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
}

func newRecorder() *recorder { return &recorder{h: newHist()} }

// record adds one latency in nanoseconds; values beyond the histogram's
// range are clamped to its ends rather than dropped, so that a stall still
// counts.
func (r *recorder) record(ns int64) {
	us := ns / 1000
	us = max(us, histMinMicros)
	us = min(us, histMaxMicros)
	r.mu.Lock()
	r.h.RecordValue(us)
	r.mu.Unlock()
}

// recordN adds n equal latencies.
func (r *recorder) recordN(ns, n int64) {
	us := min(max(ns/1000, histMinMicros), histMaxMicros)
	r.mu.Lock()
	r.h.RecordValues(us, n)
	r.mu.Unlock()
}

// merge returns one histogram holding every recorder's values.
func merge(rs ...*recorder) *hdrhistogram.Histogram {
	h := newHist()
	for _, r := range rs {
		r.mu.Lock()
		h.Merge(r.h)
		r.mu.Unlock()
	}
	return h
}
