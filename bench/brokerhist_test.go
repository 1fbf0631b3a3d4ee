package bench

import (
	"math"
	"strings"
	"testing"
)

const histPage = `# HELP kafka_network_requestmetrics_totaltimems x
# TYPE kafka_network_requestmetrics_totaltimems histogram
kafka_network_requestmetrics_totaltimems_bucket{request="Fetch",le="0.5"} 1000
kafka_network_requestmetrics_totaltimems_bucket{request="Fetch",le="1"} 1000
kafka_network_requestmetrics_totaltimems_bucket{request="Fetch",le="+Inf"} 1000
kafka_network_requestmetrics_totaltimems_bucket{request="Produce",le="0.5"} 50
kafka_network_requestmetrics_totaltimems_bucket{request="Produce",le="1"} 90
kafka_network_requestmetrics_totaltimems_bucket{request="Produce",le="2"} 100
kafka_network_requestmetrics_totaltimems_bucket{request="Produce",le="+Inf"} 100
kafka_network_requestmetrics_totaltimems_sum{request="Produce"} 70
kafka_network_requestmetrics_totaltimems_count{request="Produce"} 100
kafka_network_requestmetrics_localtimems_bucket{request="Produce",le="0.5"} 7
ringlog_requests_total{api="Produce"} 100
`

// The run's p99 comes from Produce's buckets alone, less what they held
// before the run, interpolated within the bucket where the rank falls.
func TestBrokerHistogram(t *testing.T) {
	after, err := parseHistogram(strings.NewReader(histPage), brokerProduceHist, brokerProduceLabel)
	if err != nil {
		t.Fatal(err)
	}
	want := []histBucket{{0.5, 50}, {1, 90}, {2, 100}, {math.Inf(1), 100}}
	if len(after) != len(want) {
		t.Fatalf("buckets %v, want %v", after, want)
	}
	for i := range want {
		if after[i] != want[i] {
			t.Fatalf("buckets %v, want %v", after, want)
		}
	}
	// All of them: the 99th of 100 falls in (1, 2], 9 of its 10.
	if q, ok := histQuantile(0.99, after); !ok || math.Abs(q-1.9) > 1e-9 {
		t.Errorf("p99 = %v, %v; want 1.9", q, ok)
	}
	if q, ok := histQuantile(0.5, after); !ok || q != 0.5 {
		t.Errorf("p50 = %v, %v; want 0.5", q, ok)
	}
	// Before the run 50 were at most 0.5 ms and 80 at most 1: the run's
	// 20 are 0 + 10 + 10, its p99 (rank 19.8) in (1, 2] at 9.8 of 10.
	before := []histBucket{{0.5, 50}, {1, 80}, {2, 80}, {math.Inf(1), 80}}
	d, err := histDelta(before, after)
	if err != nil {
		t.Fatal(err)
	}
	if q, ok := histQuantile(0.99, d); !ok || math.Abs(q-1.98) > 1e-9 {
		t.Errorf("the run's p99 = %v, %v; want 1.98", q, ok)
	}
	// A rank beyond the last finite bound is that bound.
	if q, ok := histQuantile(0.99, []histBucket{{1, 10}, {2, 10}, {math.Inf(1), 100}}); !ok || q != 2 {
		t.Errorf("p99 in +Inf = %v, %v; want 2", q, ok)
	}
	if _, ok := histQuantile(0.99, []histBucket{{1, 0}, {math.Inf(1), 0}}); ok {
		t.Error("a p99 of no observations")
	}
	if _, err := histDelta(after, before); err == nil {
		t.Error("counts that went down make a delta")
	}
}
