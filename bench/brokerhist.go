package bench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Issue 13 asks for the broker's own share of a produce's latency: the
// broker exports Kafka's RequestMetrics as Prometheus histograms
// (ARCHITECTURE.md, "Request metrics"), TotalTimeMs from a request's frame
// cut to its response written. The suite reads Produce's buckets from
// /metrics before and after a run; their differences are the run's
// requests, and its p99 is taken from them as Prometheus's
// histogram_quantile does: the bucket where the rank falls, linearly
// within it.

// brokerProduceHist is the histogram and label the suite reads.
const (
	brokerProduceHist  = "kafka_network_requestmetrics_totaltimems"
	brokerProduceLabel = `request="Produce"`
)

// histBucket is one cumulative bucket: the observations at most le
// (milliseconds; +Inf for the last).
type histBucket struct {
	le    float64
	count float64
}

// parseHistogram reads the buckets of histogram name whose labels hold
// label (besides le), in le order, summed over series that differ in
// their other labels.
func parseHistogram(r io.Reader, name, label string) ([]histBucket, error) {
	byLE := map[float64]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		rest, ok := strings.CutPrefix(l, name+"_bucket{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		le, matched := math.NaN(), false
		for _, kv := range strings.Split(labels, ",") {
			if kv == label {
				matched = true
			}
			if v, ok := strings.CutPrefix(kv, "le="); ok {
				if f, err := strconv.ParseFloat(strings.Trim(v, `"`), 64); err == nil {
					le = f
				}
			}
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if !matched || math.IsNaN(le) || err != nil {
			continue
		}
		byLE[le] += n
	}
	bs := make([]histBucket, 0, len(byLE))
	for le, n := range byLE {
		bs = append(bs, histBucket{le: le, count: n})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	return bs, sc.Err()
}

// histDelta is after's buckets less before's: the observations between
// two scrapes. The buckets must be the same (a broker that restarted in
// between has other counts: not a delta).
func histDelta(before, after []histBucket) ([]histBucket, error) {
	if len(before) == 0 {
		return after, nil
	}
	if len(before) != len(after) {
		return nil, fmt.Errorf("bench: %d buckets before the run, %d after", len(before), len(after))
	}
	d := make([]histBucket, len(after))
	for i := range after {
		if after[i].le != before[i].le || after[i].count < before[i].count {
			return nil, fmt.Errorf("bench: bucket le=%v went from %v to %v", after[i].le, before[i].count, after[i].count)
		}
		d[i] = histBucket{le: after[i].le, count: after[i].count - before[i].count}
	}
	return d, nil
}

// histQuantile is the q quantile (0 < q < 1) of cumulative buckets, as
// Prometheus's histogram_quantile computes it: the bucket holding rank
// q·n, interpolated linearly between its lower and upper bound (0 for the
// first); a rank in the +Inf bucket gives the highest finite bound. ok is
// false without observations or without the +Inf bucket.
func histQuantile(q float64, bs []histBucket) (float64, bool) {
	if len(bs) < 2 || !math.IsInf(bs[len(bs)-1].le, 1) {
		return 0, false
	}
	n := bs[len(bs)-1].count
	if n <= 0 {
		return 0, false
	}
	rank := q * n
	lower, below := 0.0, 0.0
	for i, b := range bs {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return bs[i-1].le, true
			}
			if b.count == below {
				return b.le, true
			}
			return lower + (b.le-lower)*(rank-below)/(b.count-below), true
		}
		lower, below = b.le, b.count
	}
	return bs[len(bs)-2].le, true
}

// metricBrokerP99 is the broker's own produce TotalTimeMs p99 in a run, in
// microseconds.
var metricBrokerP99 = func(s sample) (float64, bool) { return s.brokerP99, s.brokerP99OK }

// brokerP99Bound is issue 13's bound on it: 1 ms.
const brokerP99Bound = 1000.0

// writeBrokerP99Target judges the broker's own produce TotalTimeMs p99 of
// ringlog io_uring net in the open-loop run at the fixed rate, with
// ringlog portable's beside.
func (s *suite) writeBrokerP99Target(judge func(target, measured, verdict string), line func(target, measured string, ok, known bool)) {
	target := fmt.Sprintf("io_uring net: the broker's own produce TotalTimeMs p99 ≤ 1 ms at %s records/s", fmtCount(fixedLatencyRate))
	t := s.findTable(partProduce, fixedRateLike(kindLatency, 1024, false, fixedLatencyRate))
	if t == nil {
		line(target, "—", false, false)
		return
	}
	r := t.rows[netUringPeer]
	sp, ok := r.spread(metricBrokerP99)
	if !ok {
		st, _ := r.state()
		if st == "" {
			st = "without this figure (no " + brokerProduceHist + " in its /metrics)"
		}
		judge(target, "—", "not measured: ringlog io_uring net "+st)
		return
	}
	where := ""
	if b, ok := t.rowOf(portablePeer).spread(metricBrokerP99); ok {
		where = "; ringlog portable " + fmtMicros(b.med)
	}
	line(target, fmt.Sprintf("%s (%s{%s}, the run's observations, p99 interpolated within its bucket%s)",
		fmtMicros(sp.med), brokerProduceHist, brokerProduceLabel, where), sp.med <= brokerP99Bound, true)
}
