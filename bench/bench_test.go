package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

func TestStampRoundTrip(t *testing.T) {
	v := newValues()
	for _, at := range []int64{0, 1, 123456789, 1 << 62} {
		b := v.make(7, 100, at)
		if len(b) != 100 {
			t.Fatalf("value of %d bytes, want 100", len(b))
		}
		got, ok := stamp(b)
		if !ok || got != at {
			t.Errorf("stamp(%d) read back as %d, %v", at, got, ok)
		}
		if bytes.IndexByte(b, '\n') >= 0 {
			t.Errorf("a value holds a newline: kcat would split it")
		}
	}
	if _, ok := stamp([]byte("not a stamp, too short")); ok {
		t.Error("stamp accepted text without hex digits")
	}
}

func TestScheduleIsPlannedAhead(t *testing.T) {
	// Two producers at 1000 records/s: records alternate between them every
	// millisecond, whatever happens at run time.
	for k := range 2 {
		s := schedule{start: 5_000_000, interval: 1e9 / 1000, n: 2, k: k}
		for j := int64(0); j < 4; j++ {
			want := 5_000_000 + (j*2+int64(k))*1_000_000
			if got := s.due(j); got != want {
				t.Errorf("producer %d record %d due at %d, want %d", k, j, got, want)
			}
		}
	}
}

func TestQuota(t *testing.T) {
	for _, tc := range []struct {
		total int64
		n     int
	}{{10, 3}, {1, 2}, {0, 4}, {1000, 7}} {
		var sum int64
		for k := range tc.n {
			sum += quota(tc.total, tc.n, k)
		}
		if sum != tc.total {
			t.Errorf("quota(%d, %d) sums to %d", tc.total, tc.n, sum)
		}
	}
}

func TestMedianAndSpread(t *testing.T) {
	for _, tc := range []struct {
		vs   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.vs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.vs, got, tc.want)
		}
	}
	r := &row{samples: []sample{
		{records: 100, elapsed: time.Second},
		{records: 300, elapsed: time.Second},
		{records: 200, elapsed: time.Second},
	}}
	sp, ok := r.spread(metricRate)
	if !ok || sp.med != 200 || sp.min != 100 || sp.max != 300 || sp.n != 3 {
		t.Errorf("spread = %+v, %v", sp, ok)
	}
	if _, ok := r.spread(metricCPUPerM); ok {
		t.Error("a figure no sample has was reported")
	}
}

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(`# HELP ringlog_fetch_sendfile_bytes_total Record bytes.
# TYPE ringlog_fetch_sendfile_bytes_total counter
ringlog_fetch_sendfile_bytes_total 1.2345e+06
ringlog_fetch_copied_bytes_total 0
ringlog_log_end_offset{topic="a",partition="0"} 17
`))
	if err != nil {
		t.Fatal(err)
	}
	if m["ringlog_fetch_sendfile_bytes_total"] != 1234500 || m["ringlog_fetch_copied_bytes_total"] != 0 {
		t.Errorf("parsed %v", m)
	}
	if _, ok := m["ringlog_log_end_offset"]; ok {
		t.Error("a labelled series was read as a process-wide counter")
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"512MiB": 512 << 20, "2GiB": 2 << 30, "64KiB": 64 << 10, "1000": 1000} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "lots"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) accepted", in)
		}
	}
}

func TestRoundRateAndTicks(t *testing.T) {
	for in, want := range map[float64]float64{81234: 81000, 99.7: 99, 5: 5, 0.2: 1, 123456789: 120000000} {
		if got := roundRate(in); got != want {
			t.Errorf("roundRate(%v) = %v, want %v", in, got, want)
		}
	}
	for _, v := range []float64{0.7, 3, 47, 1461, 98000} {
		ts := niceTicks(v)
		if len(ts) < 4 || len(ts) > 9 || ts[len(ts)-1] > v*1.0001 {
			t.Errorf("niceTicks(%v) = %v", v, ts)
		}
	}
}

// A profile shaped like the CPU profiles Go writes: samples of stacks,
// leaf first, with inlined frames in one location.
func TestTopFunctions(t *testing.T) {
	fn := map[string]*profile.Function{}
	f := func(name string) *profile.Function {
		if fn[name] == nil {
			fn[name] = &profile.Function{ID: uint64(len(fn) + 1), Name: name}
		}
		return fn[name]
	}
	loc := func(id uint64, names ...string) *profile.Location {
		l := &profile.Location{ID: id}
		for _, n := range names {
			l.Line = append(l.Line, profile.Line{Function: f(n)})
		}
		return l
	}
	write := loc(1, "syscall.write")
	inl := loc(2, "crc32.update", "batch.Validate") // crc32.update inlined into batch.Validate
	serve := loc(3, "kafka.serve")
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{write, serve}, Value: []int64{3, 30e6}},
			{Location: []*profile.Location{inl, serve}, Value: []int64{1, 10e6}},
			{Location: []*profile.Location{serve}, Value: []int64{1, 10e6}},
		},
	}
	total, top, err := topFunctions(p, 2)
	if err != nil {
		t.Fatal(err)
	}
	if total != 50*time.Millisecond {
		t.Errorf("total %v, want 50ms", total)
	}
	if len(top) != 2 || top[0].name != "syscall.write" || top[0].flat != 30*time.Millisecond {
		t.Fatalf("top = %+v", top)
	}
	// Ties are broken by name: crc32.update and kafka.serve have 10 ms of
	// their own each.
	if top[1].name != "crc32.update" || top[1].cum != 10*time.Millisecond {
		t.Errorf("second = %+v", top[1])
	}
	_, all, _ := topFunctions(p, 10)
	for _, e := range all {
		if e.name == "kafka.serve" && e.cum != 50*time.Millisecond {
			t.Errorf("kafka.serve cum = %v, want every sample (50ms)", e.cum)
		}
	}
}

// Every matrix has distinct workload ids, and its first workload is the
// base produce run whose peak sets the open-loop rate.
func TestMatrices(t *testing.T) {
	for _, name := range []string{"quick", "standard", "full"} {
		ws := matrix(name, 2, 2)
		if !ws[0].main || !ws[0].base || ws[0].kind != kindProduce {
			t.Errorf("%s: first workload is %+v", name, ws[0])
		}
		seen := map[string]bool{}
		for _, w := range ws {
			if seen[w.id()] {
				t.Errorf("%s: workload %s twice", name, w.id())
			}
			seen[w.id()] = true
		}
	}
	if n := len(matrix("full", 2, 2)); n < 54 {
		t.Errorf("full matrix has %d workloads, fewer than the 54 produce combinations", n)
	}
}

// fakeSuite is a suite with tables filled by hand, for the report and
// plot writers.
func fakeSuite(t *testing.T) *suite {
	cfg := config{matrix: "quick", runs: 3, duration: time.Second, maxRecords: 1000, maxBytes: 1 << 20,
		fillBytes: 1 << 20, producers: 2, consumers: 2, peers: peerKeys(), outDir: t.TempDir(), timeout: time.Minute,
		args: []string{"-quick"}}
	s := &suite{cfg: cfg, peers: map[string]*peer{}, drivers: map[string]driver{}, machine: describeMachine(t.TempDir()),
		rate: 1000, rateSource: "test"}
	s.workloads = matrix("quick", 2, 2)
	for _, w := range s.workloads {
		s.tables = append(s.tables, tablesFor(w)...)
	}
	for _, w := range s.workloads {
		for _, p := range s.peersFor(w) {
			for _, r := range s.rowsOf(w, p) {
				switch p.spec.key {
				case "nats":
					r.fails = []string{"it broke | badly"}
				default:
					for i := range 3 {
						h := newHist()
						for v := int64(1); v < 5000; v += 7 {
							h.RecordValue(v * int64(i+1))
						}
						r.samples = append(r.samples, sample{round: i, records: int64(1000 * (i + 1)), bytes: int64(1e6 * (i + 1)),
							elapsed: time.Second, lat: h, cpu: 500 * time.Millisecond, cpuOK: true, rss: 64 << 20, rssOK: true})
					}
				}
			}
		}
	}
	s.limits = []limitsSample{{diskMBs: 500, syncRate: 3000, tcpMBs: 1500}, {diskErr: "no disk", syncRate: 2900, tcpMBs: 1400}}
	return s
}

func TestReportTablesHaveEveryPeer(t *testing.T) {
	s := fakeSuite(t)
	var b bytes.Buffer
	s.writeReport(&b)
	checkReport(t, b.String())
	if !strings.Contains(b.String(), `*failed: it broke \| badly*`) {
		t.Error("a failed row does not show its reason (with its pipe escaped)")
	}
	if !strings.Contains(b.String(), "2.00k<br><sub>1.00k–3.00k</sub>") {
		t.Error("medians are not shown with their range")
	}
}

// The cluster's brokers get the fetch slots key only when a peer asks for
// it, and each variant of a peer is an instance of its own.
func TestClusterVariants(t *testing.T) {
	if strings.Contains(clusterProperties(0), clusterSlotsKey) {
		t.Error("the default cluster sets " + clusterSlotsKey)
	}
	if !strings.Contains(clusterProperties(1), clusterSlotsKey+"=1\n") {
		t.Errorf("slots 1: %q", clusterProperties(1))
	}
	spec, _ := peerSpecByKey("ringlog-cluster")
	ids := map[string]bool{}
	for _, p := range []*peer{{spec: spec}, {spec: spec, fsync: true}, {spec: spec, slots: 1}, {spec: spec, fsync: true, slots: 1}} {
		if ids[p.id()] {
			t.Errorf("two variants share the id %s", p.id())
		}
		ids[p.id()] = true
	}
}

func TestPlotsAreWellFormed(t *testing.T) {
	s := fakeSuite(t)
	for name, f := range map[string]func(*bytes.Buffer){
		plotThroughput: func(b *bytes.Buffer) { s.writeThroughputSVG(b) },
		plotLatency:    func(b *bytes.Buffer) { s.writeLatencySVG(b) },
	} {
		var b bytes.Buffer
		f(&b)
		if err := wellFormedSVG(b.Bytes()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestLoopbackAndSyncLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for a second")
	}
	ctx := context.Background()
	if mbs, err := loopbackTCP(ctx, 200*time.Millisecond); err != nil || mbs <= 0 {
		t.Errorf("loopbackTCP: %v MB/s, %v", mbs, err)
	}
	dir := t.TempDir()
	if rate, err := syncWrites(ctx, dir+"/sync", 200*time.Millisecond); err != nil || rate <= 0 {
		t.Errorf("syncWrites: %v/s, %v", rate, err)
	}
	if mbs, err := directWrite(ctx, dir+"/direct", 8<<20, 200*time.Millisecond); err != nil || mbs <= 0 {
		t.Errorf("directWrite: %v MB/s, %v", mbs, err)
	}
}
