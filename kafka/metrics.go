package kafka

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metrics are the protocol layer's Prometheus metrics: requests and their
// latency per API.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	names    [maxAPIKey]string
}

// NewMetrics registers the protocol metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ringlog", Name: "requests_total", Help: "Kafka requests answered, by API.",
		}, []string{"api"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "ringlog", Name: "request_seconds", Help: "Time from a request's arrival to its answer, by API.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"api"}),
	}
	reg.MustRegister(m.requests, m.latency)
	for k := range m.names {
		m.names[k] = kmsg.NameForKey(int16(k))
	}
	return m
}

func (m *Metrics) observe(key int16, d time.Duration) {
	name := m.names[key]
	m.requests.WithLabelValues(name).Inc()
	m.latency.WithLabelValues(name).Observe(d.Seconds())
}
