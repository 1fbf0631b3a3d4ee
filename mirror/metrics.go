package mirror

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the mirror's Prometheus metrics, labelled by flow ("A->B").
type Metrics struct {
	records    *prometheus.CounterVec
	bytes      *prometheus.CounterVec
	lag        *prometheus.GaugeVec
	lastCommit *prometheus.GaugeVec
}

// NewMetrics registers the mirror's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ringlog_mirror_records_total",
			Help: "Records mirrored and committed on the target."}, []string{"flow"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ringlog_mirror_bytes_total",
			Help: "Key and value bytes of the records mirrored and committed on the target."}, []string{"flow"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ringlog_mirror_lag_records",
			Help: "Records on the source not yet mirrored (high watermark minus next offset, summed over partitions), as of the last fetch."}, []string{"flow"}),
		// A stalled flow shows as time since this; the bench times the
		// mirror by it, to the commit rather than to its own scrapes.
		lastCommit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ringlog_mirror_last_commit_timestamp_seconds",
			Help: "When the flow last committed mirrored records on the target (Unix time); set just after ringlog_mirror_records_total counts them."}, []string{"flow"}),
	}
	reg.MustRegister(m.records, m.bytes, m.lag, m.lastCommit)
	return m
}

// flowMetrics are one flow's counters: kept here for the progress line,
// and exported when Metrics are.
type flowMetrics struct {
	records, bytes, lag atomic.Int64
	prom                *Metrics
	flow                string
}

func (m *Metrics) flow(name string) *flowMetrics {
	return &flowMetrics{prom: m, flow: name}
}

func (f *flowMetrics) add(records int, bytes int64, lag map[string]map[int32]int64) {
	var total int64
	for _, ps := range lag {
		for _, l := range ps {
			total += l
		}
	}
	f.records.Add(int64(records))
	f.bytes.Add(bytes)
	f.lag.Store(total)
	if f.prom != nil {
		f.prom.records.WithLabelValues(f.flow).Add(float64(records))
		f.prom.bytes.WithLabelValues(f.flow).Add(float64(bytes))
		f.prom.lag.WithLabelValues(f.flow).Set(float64(total))
		if records > 0 {
			f.prom.lastCommit.WithLabelValues(f.flow).Set(float64(time.Now().UnixNano()) / 1e9)
		}
	}
}
