package bench

import (
	"slices"
)

// Row statuses besides measured ("").
const (
	statusUnavailable = "unavailable"
	statusSkipped     = "skipped"
)

// row is one peer's line in a table: its samples, one per successful run.
type row struct {
	peer    *peer
	samples []sample
	fails   []string // why runs failed
	status  string   // "" when runs were attempted; else unavailable or skipped
	reason  string
}

// mark files a reason the row has no figure from this run: as the row's
// status when it has no figure yet, else as one more failed run.
func (r *row) mark(status, reason string) {
	switch {
	case r.status != "":
	case len(r.samples) == 0:
		r.status, r.reason = status, reason
	default:
		r.fails = append(r.fails, status+": "+reason)
	}
}

// state is what the report says about a row as a whole.
func (r *row) state() (status, reason string) {
	switch {
	case r == nil:
		return statusUnavailable, "not run"
	case len(r.samples) > 0:
		return "", ""
	case r.status != "":
		return r.status, r.reason
	case len(r.fails) > 0:
		return "failed", r.fails[0]
	}
	return statusSkipped, "no run was attempted"
}

// metric extracts one figure from a sample; ok is false when the sample
// does not have it.
type metric func(s sample) (v float64, ok bool)

var (
	metricRate = func(s sample) (float64, bool) {
		return float64(s.records) / s.elapsed.Seconds(), s.elapsed > 0 && s.records > 0
	}
	metricMBs = func(s sample) (float64, bool) {
		return float64(s.bytes) / 1e6 / s.elapsed.Seconds(), s.elapsed > 0 && s.bytes > 0
	}
	// CPU seconds of the broker per million records and per GB of values.
	metricCPUPerM = func(s sample) (float64, bool) {
		return s.cpu.Seconds() / float64(s.records) * 1e6, s.cpuOK && s.records > 0
	}
	metricCPUPerGB = func(s sample) (float64, bool) {
		return s.cpu.Seconds() / float64(s.bytes) * 1e9, s.cpuOK && s.bytes > 0
	}
	metricRSS = func(s sample) (float64, bool) { return float64(s.rss), s.rssOK }
	// metricSendfile is the share of fetched record bytes sent with
	// sendfile (ringlog's own counters; the others have none).
	metricSendfile = func(s sample) (float64, bool) {
		t := s.sendfile + s.copied
		return s.sendfile / t, s.fetchOK && t > 0
	}
	metricClientCPU = func(s sample) (float64, bool) { return s.client.Seconds(), s.client > 0 }
)

// metricLatency is a latency quantile (0-100) in microseconds.
func metricLatency(q float64) metric {
	return func(s sample) (float64, bool) {
		if s.lat == nil || s.lat.TotalCount() == 0 {
			return 0, false
		}
		if q >= 100 {
			return float64(s.lat.Max()), true
		}
		return float64(s.lat.ValueAtQuantile(q)), true
	}
}

// spread is the median, minimum and maximum of a metric over a row's
// samples.
type spread struct {
	med, min, max float64
	n             int
}

func (r *row) spread(m metric) (spread, bool) {
	if r == nil {
		return spread{}, false
	}
	var vs []float64
	for _, s := range r.samples {
		if v, ok := m(s); ok {
			vs = append(vs, v)
		}
	}
	return spreadOf(vs)
}

func spreadOf(vs []float64) (spread, bool) {
	if len(vs) == 0 {
		return spread{}, false
	}
	return spread{med: median(vs), min: slices.Min(vs), max: slices.Max(vs), n: len(vs)}, true
}

func (r *row) median(m metric) float64 {
	sp, _ := r.spread(m)
	return sp.med
}

// median of an even count is the mean of the middle two.
func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
