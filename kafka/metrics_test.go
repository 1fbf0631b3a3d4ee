package kafka

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRequestMetricsNoAlloc: observing a request, once its API's
// observers are resolved, allocates nothing (the produce path's cost).
func TestRequestMetricsNoAlloc(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	key := int16(kmsg.Produce)
	times := requestTimes{received: 1000, started: 2000, parkedAt: 3000, remote: 500, answered: 5000, sendFrom: 6000, sent: 9000, fetch: fetchConsumer}
	m.answered(key, times.received, times.answered) // resolves the observers
	allocs := testing.AllocsPerRun(1000, func() {
		m.api(key).requests.Inc()
		m.answered(key, times.received, times.answered)
		m.breakdown(key, &times)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per request observed", allocs)
	}
}

// BenchmarkRequestMetrics is the protocol layer's cost per request
// answered: the counter, ringlog_request_seconds and the six parts.
func BenchmarkRequestMetrics(b *testing.B) {
	m := NewMetrics(prometheus.NewRegistry())
	key := int16(kmsg.Produce)
	times := requestTimes{received: 1000, started: 2000, answered: 5000, sendFrom: 6000, sent: 9000}
	m.answered(key, times.received, times.answered) // resolves the observers
	b.ReportAllocs()
	for b.Loop() {
		m.api(key).requests.Inc()
		m.answered(key, times.received, times.answered)
		m.breakdown(key, &times)
	}
}
