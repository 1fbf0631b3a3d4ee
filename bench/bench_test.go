package bench

import (
	"bytes"
	"context"
	"slices"
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
ringlog_requests_total{api="Produce"} 40
ringlog_requests_total{api="Fetch"} 2
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
	if m["ringlog_requests_total{}"] != 42 {
		t.Errorf("requests summed over their api label: %v", m["ringlog_requests_total{}"])
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
	for _, name := range []string{"quick", "standard", "produce", "full"} {
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
func fakeSuite(t *testing.T) *suite { return fakeSuiteOf(t, "quick") }

// fakeSuiteOf is fakeSuite with the workloads of a matrix.
func fakeSuiteOf(t *testing.T, matrixName string) *suite {
	cfg := config{matrix: matrixName, runs: 3, duration: time.Second, maxRecords: 1000, maxBytes: 1 << 20,
		fillBytes: 1 << 20, producers: 2, consumers: 2, peers: peerKeys(), outDir: t.TempDir(), timeout: time.Minute,
		args: []string{"-quick"}}
	s := &suite{cfg: cfg, peers: map[string]*peer{}, drivers: map[string]driver{}, machine: describeMachine(t.TempDir()),
		rate: 1000, rateSource: "test"}
	s.workloads = matrix(matrixName, 2, 2)
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
	s.repl = newReplication()
	for _, r := range s.repl.runs {
		switch r.id {
		case "rf1-acks1", "rf3-acksall":
			for i := range 3 {
				n := int64(1000 * (i + 1))
				if r.id == "rf3-acksall" {
					n /= 2
				}
				r.row.samples = append(r.row.samples, sample{round: i, records: n, bytes: n * 1024, elapsed: time.Second,
					lat: newHist(), cpu: time.Second, cpuOK: true, rss: 64 << 20, rssOK: true})
			}
		default:
			r.row.mark(statusSkipped, "-quick leaves it out")
		}
	}
	for _, v := range []int64{0, 5, 10, 300} {
		s.repl.run("rf3-acksall").lag.leo.RecordValue(v)
		s.repl.run("rf3-acksall").lag.hw.RecordValue(v / 2)
	}
	s.repl.failovers = []failoverResult{{victim: 2, quorumLeader: true, newLeader: 3, took: 2500 * time.Millisecond}}
	// Mirroring: the plain producer at 2,000 records/s (median), exactly
	// once at 1,800 (0.90x), at least once failed every run.
	s.mirr = newMirroring()
	s.mirr.ran = true
	for i, n := range []int64{1000, 2000, 3000} {
		s.mirr.run("kgo-producer").row.samples = append(s.mirr.run("kgo-producer").row.samples,
			sample{round: i, records: n, bytes: n * 1024, elapsed: time.Second, cpu: time.Second, cpuOK: true})
		eos := s.mirr.run("mirror-exactly-once")
		eos.row.samples = append(eos.row.samples, sample{round: i, records: n * 9 / 10, bytes: n * 9 / 10 * 1024, elapsed: time.Second})
		eos.mirrorCPU = append(eos.mirrorCPU, 4)
	}
	s.mirr.run("mirror-at-least-once").row.fails = []string{"ringlog mirror exited"}
	// Streams: the hand-written loop at 30,000 lines/s, at least once at
	// 20,000 (0.67x), exactly once at 16,000 (0.80x of at least once).
	s.strm = newStreamsSection()
	s.strm.ran = true
	for i := range 3 {
		for id, n := range map[string]int64{"kgo-hand-written": 30_000, "streams-at-least-once": 20_000, "streams-exactly-once": 16_000} {
			r := s.strm.run(id)
			r.row.samples = append(r.row.samples, sample{round: i, records: n, bytes: n * 11, elapsed: time.Second, cpu: time.Second, cpuOK: true})
		}
	}
	return s
}

func TestStreamsReport(t *testing.T) {
	s := fakeSuite(t)
	var b bytes.Buffer
	s.writeStreams(&b)
	rep := b.String()
	for _, want := range []string{
		"| hand-written kgo loop (consume, count in a map, produce, commit; at least once) | 30.0k |",
		"| streams word count, at least once | 20.0k |",
		"| 0.67x | 1.00x |",
		"| streams word count, exactly once (transactions, KIP-447) | 16.0k |",
		"| 0.53x | 0.80x |",
		"Measured 0.67x (20.0k of 30.0k lines/s): **not met**.",
		"Measured 0.80x (16.0k of 20.0k lines/s): met.",
	} {
		if !strings.Contains(rep, want) {
			t.Errorf("Streams section lacks %q:\n%s", want, rep)
		}
	}
	var tg bytes.Buffer
	s.writeTargets(&tg)
	if l := lineWith(tg.String(), "at least once records/s ≥ 0.8x the same job hand-written"); !strings.Contains(l, "| 0.67x (20.0k against 30.0k lines/s; Streams section) | **not met** |") {
		t.Errorf("targets: %q", l)
	}
	if l := lineWith(tg.String(), "exactly once records/s ≥ 0.7x at least once"); !strings.Contains(l, "| 0.80x (16.0k against 20.0k lines/s; Streams section) | met |") {
		t.Errorf("targets: %q", l)
	}
	// -only mirror: the section says it did not run, the targets are
	// not measured.
	s.cfg.only = onlyMirror
	b.Reset()
	s.writeStreams(&b)
	tg.Reset()
	s.writeTargets(&tg)
	if !strings.Contains(b.String(), "*Not run (-only mirror).*") ||
		!strings.Contains(lineWith(tg.String(), "exactly once records/s ≥ 0.7x at least once"), "| — | not measured in this matrix |") {
		t.Errorf("-only mirror:\n%s\n%s", b.String(), lineWith(tg.String(), "exactly once records/s"))
	}
}

func TestMirroringReport(t *testing.T) {
	s := fakeSuite(t)
	var b bytes.Buffer
	s.writeMirroring(&b)
	rep := b.String()
	for _, want := range []string{
		"| plain kgo producer into the target (1 producer, acks=all, idempotent) | 2.00k<br><sub>1.00k–3.00k</sub> |",
		"| ringlog mirror, exactly once (transactions on the target) | 1.80k<br><sub>900–2.70k</sub> |",
		"| 4.00 | 0.90x |", // mirror CPU, then records/s over the plain producer's
		"| ringlog mirror, at least once (-at-least-once) | *failed: ringlog mirror exited* |",
		"Measured 0.90x (1.80k of 2.00k records/s): met.",
	} {
		if !strings.Contains(rep, want) {
			t.Errorf("Mirroring section lacks %q:\n%s", want, rep)
		}
	}
	var tg bytes.Buffer
	s.writeTargets(&tg)
	if l := lineWith(tg.String(), "exactly-once mirroring"); !strings.Contains(l, "| 0.90x (1.80k against 2.00k records/s; Mirroring section) | met |") {
		t.Errorf("targets: %q", l)
	}
	// Below 0.8x: not met, in the section and in the targets.
	eos := s.mirr.run("mirror-exactly-once")
	for i := range eos.row.samples {
		eos.row.samples[i].records /= 2
	}
	b.Reset()
	s.writeMirroring(&b)
	tg.Reset()
	s.writeTargets(&tg)
	if !strings.Contains(b.String(), "Measured 0.45x (900 of 2.00k records/s): **not met**.") ||
		!strings.Contains(lineWith(tg.String(), "exactly-once mirroring"), "| **not met** |") {
		t.Errorf("0.45x judged met:\n%s\n%s", b.String(), lineWith(tg.String(), "exactly-once mirroring"))
	}
	// -only replication: the section says it did not run, the target is
	// not measured.
	s.cfg.only = onlyReplication
	b.Reset()
	s.writeMirroring(&b)
	tg.Reset()
	s.writeTargets(&tg)
	if !strings.Contains(b.String(), "*Not run (-only replication).*") ||
		!strings.Contains(lineWith(tg.String(), "exactly-once mirroring"), "| — | not measured in this matrix |") {
		t.Errorf("-only replication:\n%s\n%s", b.String(), lineWith(tg.String(), "exactly-once mirroring"))
	}
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

func TestReplicationReport(t *testing.T) {
	s := fakeSuite(t)
	var b bytes.Buffer
	s.writeReplication(&b)
	rep := b.String()
	for _, want := range []string{
		"| ringlog 3-broker cluster: RF 3, acks=all | 1.00k<br><sub>500–1.50k</sub> |", // half of RF 1's records/s
		"| 0.50x |", // ... and its ratio
		"Measured 0.50x (1.00k of 2.00k records/s): met.",
		"| 4 | 5 | 300 | 300 | 2 | 150 | 150 |", // lag: samples, p50, p99, max (LEO), then HW
		"| 1 | broker 2 | yes | broker 3 | 2.50 s |",
		"*skipped: -quick leaves it out*",
	} {
		if !strings.Contains(rep, want) {
			t.Errorf("Replication section lacks %q:\n%s", want, rep)
		}
	}
	// -only matrix: the section says it did not run.
	s.cfg.only = onlyMatrix
	b.Reset()
	s.writeReplication(&b)
	if !strings.Contains(b.String(), "*Not run (-only matrix).*") {
		t.Errorf("-only matrix: %s", b.String())
	}
}

// Followers are measured against their partition's leader, whichever
// broker that is; a follower that looks ahead (read a moment after its
// leader) counts as 0, and partitions some broker does not report are
// left out.
func TestLagSamples(t *testing.T) {
	po := func(leo, hw int64) partitionOffsets {
		return partitionOffsets{leo: leo, hw: hw, hasLEO: true, hasHW: true}
	}
	offs := []map[int32]partitionOffsets{
		{0: po(100, 90), 1: po(50, 50), 2: po(7, 7)}, // broker 1 leads partition 0
		{0: po(80, 80), 1: po(60, 55)},               // broker 2 leads partition 1
		{0: po(100, 85), 1: po(40, 40), 2: po(7, 7)}, // broker 3; partition 2 is missing on broker 2
	}
	st := newLagStats()
	st.addLocked(offs, map[int32]int32{0: 1, 1: 2, 2: 3})
	if st.ticks != 1 {
		t.Errorf("ticks = %d", st.ticks)
	}
	// Partition 0: followers 2 and 3 are 20 and 0 behind in LEO, 10 and 5
	// in HW. Partition 1: followers 1 and 3 are 10 and 20 behind in LEO,
	// 5 and 15 in HW. Partition 2: broker 1 is 0 behind; broker 2 has no
	// figures.
	if got := st.leo.TotalCount(); got != 5 {
		t.Errorf("%d LEO samples, want 5", got)
	}
	if st.leo.Max() != 20 || st.leo.Min() != 0 || st.hw.Max() != 15 {
		t.Errorf("LEO lag %d..%d, HW lag max %d", st.leo.Min(), st.leo.Max(), st.hw.Max())
	}
	// A follower ahead of its leader is 0 behind, not negative.
	st = newLagStats()
	st.addLocked([]map[int32]partitionOffsets{{0: po(10, 10)}, {0: po(12, 12)}}, map[int32]int32{0: 1})
	if st.leo.Max() != 0 || st.leo.TotalCount() != 1 {
		t.Errorf("follower ahead: max %d, count %d", st.leo.Max(), st.leo.TotalCount())
	}
}

func TestParsePartitionOffsets(t *testing.T) {
	m, err := parsePartitionOffsets(strings.NewReader(`# HELP ringlog_log_end_offset Log end offset of each partition.
# TYPE ringlog_log_end_offset gauge
ringlog_log_end_offset{partition="0",topic="bench-3"} 1200
ringlog_log_end_offset{partition="1",topic="bench-3"} 7
ringlog_log_end_offset{partition="0",topic="__consumer_offsets"} 99
ringlog_high_watermark{partition="0",topic="bench-3"} 1.1e+03
ringlog_log_start_offset{partition="0",topic="bench-3"} 5
ringlog_fetch_sendfile_bytes_total 12
`), "bench-3")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]partitionOffsets{
		0: {leo: 1200, hw: 1100, hasLEO: true, hasHW: true},
		1: {leo: 7, hasLEO: true},
	}
	if len(m) != len(want) || m[0] != want[0] || m[1] != want[1] {
		t.Errorf("parsed %+v, want %+v", m, want)
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

// kafkaFakeSuite is fakeSuite with Apache Kafka at half of ringlog's
// records/s, twice its CPU per run (four times per record and per GB),
// eight times its peak RSS and three times its latencies, and a 3-node
// Kafka at 800 records/s with RF 3 acks=all.
func kafkaFakeSuite(t *testing.T) *suite {
	s := fakeSuite(t)
	for _, tb := range s.tables {
		for _, r := range tb.rows {
			if r.peer.spec.key != kafkaPeer {
				continue
			}
			for i := range r.samples {
				smp := &r.samples[i]
				smp.records /= 2
				smp.bytes /= 2
				smp.cpu *= 2
				smp.rss *= 8
				h := newHist()
				for v := int64(1); v < 5000; v += 7 {
					h.RecordValue(3 * v * int64(i+1))
				}
				smp.lat = h
			}
		}
	}
	r := s.repl.run("kafka-rf3-acksall").row
	r.status, r.reason = "", ""
	for i := range 3 {
		r.samples = append(r.samples, sample{round: i, records: 800, bytes: 800 * 1024, elapsed: time.Second,
			lat: newHist(), cpu: time.Second, cpuOK: true, rss: 1 << 30, rssOK: true})
	}
	return s
}

// Every table gives each peer's ratios against Apache Kafka beside those
// against ringlog io_uring, a summary states them, and the targets
// against Kafka are judged from the figures of the same run.
func TestKafkaRatiosAndTargets(t *testing.T) {
	s := kafkaFakeSuite(t)
	var b bytes.Buffer
	s.writeReport(&b)
	rep := b.String()
	checkReport(t, rep)
	base := strings.Split(rep, "\n### ")[1]
	for _, want := range []string{
		"| records/s ÷ io_uring | CPU/M ÷ io_uring | records/s ÷ Kafka | CPU/M ÷ Kafka |",
		// ringlog against Kafka: twice the records/s, a quarter of the
		// CPU per record; Kafka against ringlog the inverse.
		"| 64 MiB | 1.00x | 1.00x | 2.00x | 0.25x |",
		"| 512 MiB | 0.50x | 4.00x | 1.00x | 1.00x |",
	} {
		if !strings.Contains(base, want) {
			t.Errorf("the base produce table lacks %q:\n%s", want, base)
		}
	}
	summary := section(rep, "## Every peer against Apache Kafka")
	if l := lineWith(summary, "| 1 | Produce, closed loop 1 KiB, 16p, acks=1 (kgo) | records/s |"); !strings.HasPrefix(
		strings.TrimPrefix(l, "| 1 | Produce, closed loop 1 KiB, 16p, acks=1 (kgo) | records/s |"), " 2.00x | 2.00x |") {
		t.Errorf("summary against Kafka, table 1: %q", l)
	}
	if l := lineWith(section(rep, "## Every peer against ringlog io_uring"), "| 1 | Produce, closed loop"); !strings.Contains(l, "| 1.00x | 0.50x | 1.00x |") {
		t.Errorf("summary against io_uring, table 1 (portable, Kafka, kfake): %q", l)
	}
	targets := section(rep, "## Targets")
	for _, want := range []string{
		"| produce 1 KiB, 16 partitions records/s ≥ 1.5x Apache Kafka's | 2.00x (2.00k against 1.00k records/s) | met |",
		"| broker CPU per GB ≤ 0.4x Apache Kafka's | 0.25x (250 against 1000 s/GB, 1 KiB produce) | met |",
		"| broker peak RSS ≤ 0.25x Apache Kafka's | 0.12x (64 MiB against 512 MiB, 1 KiB produce) | met |",
		"| produce RF=3 acks=all records/s ≥ 1.5x a 3-node Apache Kafka's | 1.25x (1.00k against 800 records/s; Replication section) | **not met** |",
		"| consume from the page cache records/s ≥ 1.0x Apache Kafka's | 2.00x (2.00k against 1.00k records/s, kgo) | met |",
	} {
		if !strings.Contains(targets, want) {
			t.Errorf("targets lack %q:\n%s", want, targets)
		}
	}
	// Latencies three times ringlog's, at the fixed rate's table.
	if l := lineWith(targets, "produce ack p99 at 50.0k records/s ≤ 0.5x Apache Kafka's"); !strings.Contains(l, "| 0.33x (") ||
		!strings.HasSuffix(l, "| met |") {
		t.Errorf("p99 target against Kafka: %q", l)
	}
	repl := section(rep, "## Replication")
	for _, want := range []string{
		"| ringlog 3-broker cluster: RF 3, acks=all | 1.00k<br><sub>500–1.50k</sub> |",
		"| 0.50x | 1.25x |", // against ringlog's RF 1, against Kafka's RF 3 acks=all
		"| Apache Kafka 3-node cluster: RF 3, acks=all | 800 |",
		"Target: produce RF=3 acks=all records/s ≥ 1.5x a 3-node Apache Kafka's. Measured 1.25x (1.00k of 800 records/s): **not met**.",
	} {
		if !strings.Contains(repl, want) {
			t.Errorf("Replication lacks %q:\n%s", want, repl)
		}
	}
}

// Without Kafka (no Java, say) its rows give the reason, the ratios
// against it are "—", the summary against it says why, and its targets
// are not measured.
func TestKafkaUnavailableReport(t *testing.T) {
	s := fakeSuite(t)
	const why = "kafkaref: java not found on PATH"
	for _, tb := range s.tables {
		for _, r := range tb.rows {
			if r.peer.spec.key == kafkaPeer {
				r.samples, r.status, r.reason = nil, statusUnavailable, why
			}
		}
	}
	var b bytes.Buffer
	s.writeReport(&b)
	rep := b.String()
	checkReport(t, rep)
	if !strings.Contains(section(rep, "## Every peer against Apache Kafka"),
		"*Apache Kafka was not measured in this run (unavailable: "+why+").*") {
		t.Errorf("the summary against Kafka does not say why:\n%s", section(rep, "## Every peer against Apache Kafka"))
	}
	base := strings.Split(rep, "\n### ")[1]
	if l := lineWith(base, "| ringlog io_uring |"); !strings.HasSuffix(l, "| 1.00x | 1.00x | — | — |") {
		t.Errorf("ringlog's ratios without Kafka: %q", l)
	}
	if l := lineWith(base, "| Apache Kafka |"); !strings.Contains(l, "*unavailable: "+why+"*") {
		t.Errorf("Kafka's row: %q", l)
	}
	targets := section(rep, "## Targets")
	if n := strings.Count(targets, "Apache Kafka's | — | not measured: Apache Kafka unavailable |"); n != 5 {
		t.Errorf("%d targets against the Kafka node not measured for it, want 5:\n%s", n, targets)
	}
	// fakeSuite marks the 3-node Kafka's rows skipped.
	if !strings.Contains(targets, "3-node Apache Kafka's | — | not measured: the 3-node Apache Kafka skipped |") {
		t.Errorf("the RF 3 target against Kafka:\n%s", targets)
	}
}

// The flush always instance of Kafka says so in its settings, in place of
// kafkaref's statement of the default flush policy; the durability column
// names the setting.
func TestKafkaFlushSettings(t *testing.T) {
	def := "Apache Kafka 4.4.0 (KRaft); " + kafkaFlushDefault + "; num.io.threads=8"
	if got := kafkaSettings(def, false); got != def {
		t.Errorf("flush never: %q", got)
	}
	got := kafkaSettings(def, true)
	if strings.Contains(got, "at Kafka's defaults") || !strings.Contains(got, "log.flush.interval.messages=1 (the log fsynced after every append") {
		t.Errorf("flush always: %q", got)
	}
	// Should kafkaref word it otherwise, the setting is still stated.
	if got := kafkaSettings("Apache Kafka", true); !strings.Contains(got, "; log.flush.interval.messages=1") {
		t.Errorf("flush always, other wording: %q", got)
	}
	one, _ := peerSpecByKey(kafkaPeer)
	three, _ := peerSpecByKey(kafkaClusterPeer)
	for p, want := range map[*peer]string{
		{spec: one}:              "flush never (Kafka's default)",
		{spec: one, fsync: true}: "log.flush.interval.messages=1",
		{spec: three}:            "RF 3 (min ISR 2), flush never (Kafka's default)",
	} {
		if got := p.durability(); got != want {
			t.Errorf("%s: durability %q, want %q", p.id(), got, want)
		}
	}
	if slices.ContainsFunc(matrixSpecs(), func(p peerSpec) bool { return p.key == kafkaClusterPeer }) {
		t.Error("the 3-node Kafka is a peer of the matrix's tables")
	}
}

// The SASL_SSL targets are ringlog SASL_SSL's records/s over ringlog
// io_uring's in the same table, produce and consume judged apart, each
// with both brokers' CPU per GB; without the peer they say why.
func TestSASLSSLTargets(t *testing.T) {
	s := fakeSuite(t)
	base := s.findTable(partProduce, baseLike(kindProduce, 1024, false))
	for i := range base.rows[saslSSLPeer].samples {
		smp := &base.rows[saslSSLPeer].samples[i]
		smp.records = smp.records * 6 / 10
		smp.bytes = smp.bytes * 6 / 10
	}
	var b bytes.Buffer
	s.writeReport(&b)
	targets := section(b.String(), "## Targets")
	for _, want := range []string{
		"| SASL_SSL records/s ≥ 0.7x PLAINTEXT at 1 KiB (produce) | 0.60x (1.20k against 2.00k records/s, kgo; broker CPU 417 against 250 s/GB) | **not met** |",
		"| SASL_SSL records/s ≥ 0.7x PLAINTEXT at 1 KiB (consume from the page cache) | 1.00x (2.00k against 2.00k records/s, kgo; broker CPU 250 against 250 s/GB) | met |",
	} {
		if !strings.Contains(targets, want) {
			t.Errorf("targets lack %q:\n%s", want, targets)
		}
	}
	if l := lineWith(strings.Split(b.String(), "\n### ")[1], "| ringlog SASL_SSL |"); !strings.Contains(l, "| 0.60x |") {
		t.Errorf("the base produce table's SASL_SSL row lacks its ratio to io_uring: %q", l)
	}
	for _, tb := range s.tables {
		if r := tb.rows[saslSSLPeer]; r != nil {
			r.samples, r.status, r.reason = nil, statusUnavailable, "not selected (-peers)"
		}
	}
	b.Reset()
	s.writeTargets(&b)
	if n := strings.Count(b.String(), "| — | not measured: ringlog SASL_SSL unavailable |"); n != 2 {
		t.Errorf("%d SASL_SSL targets say the peer was unavailable, want 2:\n%s", n, b.String())
	}
}

// Issue 13's targets are ringlog io_uring net's figures over ringlog
// portable's and kfake's in the same tables, with the one absolute bound
// judged from its own figure; the 10,000-connection target says it is not
// measured; the network path table gives system calls per request and the
// CPU split for each of ringlog's paths.
func TestNetPathsTargets(t *testing.T) {
	s := fakeSuiteOf(t, "standard") // -quick has no end-to-end run at the fixed rate
	for _, tb := range s.tables {
		for key, r := range tb.rows {
			for i := range r.samples {
				smp := &r.samples[i]
				if key == portablePeer {
					smp.cpu *= 2 // twice io_uring net's CPU per record and per GB
				}
				if tb.w.kind == kindLatency && tb.w.rate == fixedLatencyRate && slices.Contains(netPathSpecs, key) {
					smp.brokerP99, smp.brokerP99OK = float64(800+100*i), true // 800, 900, 1000 µs: 900 the median
					if key == portablePeer {
						smp.brokerP99 *= 2
					}
				}
				if connsWorkload(tb.w) && tb.w.idle > 0 && key == netUringPeer {
					smp.cpu = smp.cpu * 3 / 2 // beside the idle connections, 1.5x its CPU per GB
				}
				smp.cpuSys = smp.cpu * 2 / 5
				if slices.Contains(netPathSpecs, key) {
					smp.syscalls, smp.syscallsOK, smp.requests, smp.requestsOK = 5000, true, 1000, true
				}
			}
		}
	}
	var b bytes.Buffer
	s.writeReport(&b)
	rep := b.String()
	targets := section(rep, "## Targets")
	for _, want := range []string{
		"| io_uring net: produce 1 KiB, 16 partitions, 2 producers records/s ≥ 1.2x portable's | 1.00x (2.00k against 2.00k records/s) | **not met** |",
		"| io_uring net: broker CPU per GB ≤ 0.6x portable's | 0.50x (250 against 500 s/GB, 1 KiB produce) | met |",
		"| io_uring net: broker CPU per GB ≤ 0.6 s/GB (1 KiB produce) | 250 s/GB | **not met** |",
		"| io_uring net: broker CPU per million records ≤ 0.6x portable's | 0.50x (250 against 500 s/M, 100 B produce, 1 producer) | met |",
		"| io_uring net: broker CPU per million records ≤ 0.35x kfake's | 1.00x (250 against 250 s/M, 100 B produce, 1 producer) | **not met** |",
		"| io_uring net: consume from the page cache broker CPU per GB ≤ 0.5x portable's | 0.50x (250 against 500 s/GB, 1 KiB, kgo) | met |",
		"| io_uring net: produce ack p99 at 50.0k records/s ≤ 0.5x kfake's | 1.00x (",
		"| io_uring net: produce ack p99 at 50.0k records/s ≤ 1.0x portable's | 1.00x (",
		"| io_uring net: end-to-end p99.9 at 50.0k records/s ≤ 1.0x portable's | 1.00x (",
		"| io_uring net: the broker's own produce TotalTimeMs p99 ≤ 1 ms at 50.0k records/s | 900 µs (" + brokerProduceHist + "{" +
			brokerProduceLabel + "}, the run's observations, p99 interpolated within its bucket; ringlog portable 1.80 ms) | met |",
		"| " + netPathsConnsTarget + " | 1.50x (375 against 250 s/GB, 1 KiB produce; the same ratio for ringlog io_uring 1.00x, ringlog portable 1.00x) | **not met** |",
	} {
		if !strings.Contains(targets, want) {
			t.Errorf("targets lack %q:\n%s", want, targets)
		}
	}
	net := section(rep, "## Network paths")
	for _, want := range []string{
		"| produce 1 KiB, 2 producers | ringlog io_uring | 1.00k | 5.00 | 0.30 | 0.20 | 40.0% |",
		"| produce 1 KiB, 2 producers | ringlog io_uring net | 1.00k | 5.00 |",
		"| produce 100 B, 1 producer | ringlog portable | 1.00k | 5.00 |",
		"| end to end at 50.0k records/s | ringlog io_uring net | 1.00k | 5.00 |",
		"| the same beside 9,900 idle connections | ringlog io_uring | 1.00k | 5.00 |",
	} {
		if !strings.Contains(net, want) {
			t.Errorf("the network path table lacks %q:\n%s", want, net)
		}
	}
	// Without the peer, its targets say so.
	for _, tb := range s.tables {
		if r := tb.rows[netUringPeer]; r != nil {
			r.samples, r.status, r.reason = nil, statusUnavailable, "not selected (-peers)"
		}
	}
	b.Reset()
	s.writeTargets(&b)
	if n := strings.Count(b.String(), "| — | not measured: ringlog io_uring net unavailable |"); n != 10 {
		t.Errorf("%d issue 13 targets say the peer was unavailable, want 10:\n%s", n, b.String())
	}
	if l := lineWith(b.String(), netPathsConnsTarget); !strings.HasSuffix(l, "| — | not measured: ringlog io_uring net with 10,000 connections unavailable |") {
		t.Errorf("the 10,000-connection target without the peer: %q", l)
	}
	// -quick says why it has no end-to-end figure.
	s = fakeSuite(t)
	s.cfg.quick = true
	b.Reset()
	s.writeTargets(&b)
	if l := lineWith(b.String(), "io_uring net: end-to-end p99.9"); !strings.HasSuffix(l, "| — | not measured in this matrix: "+quickNetPathsReason+" |") {
		t.Errorf("-quick's end-to-end target: %q", l)
	}
	if l := lineWith(b.String(), netPathsConnsTarget); !strings.HasSuffix(l, "| — | not measured in this matrix: "+quickConnsReason+" |") {
		t.Errorf("-quick's 10,000-connection target: %q", l)
	}
}

// The peer runs the broker with its disk and network on io_uring; the
// workloads of issue 13 are its own and the others' rows say why not.
func TestNetUringPeer(t *testing.T) {
	spec, ok := peerSpecByKey(netUringPeer)
	if !ok || spec.net != "uring" {
		t.Fatalf("no peer %s with -net uring: %+v", netUringPeer, spec)
	}
	ws := matrix("standard", 2, 2)
	var own int
	for _, w := range ws {
		if w.netPaths {
			own++
			if !netPathsWorkload(w) {
				t.Errorf("%s is issue 13's but not among its peer's workloads", w.id())
			}
		}
	}
	if own != 4 {
		t.Errorf("%d workloads of issue 13's own in the standard matrix, want 4 (100 B from 1 producer, end to end at the fixed rate, "+
			"100 producers alone and beside idle connections)", own)
	}
	alone, crowd := ws[slices.IndexFunc(ws, connsLike(0))], ws[slices.IndexFunc(ws, connsLike(connsTotal-connsProducers))]
	if alone.producers+crowd.idle != connsTotal || alone.id() == crowd.id() ||
		!slices.Equal(netPathsPeers(crowd), []string{netUringPeer, netLoopsPeer, referencePeer, portablePeer}) {
		t.Errorf("the 10,000-connection workloads: %+v, %+v", alone, crowd)
	}
	if slices.ContainsFunc(matrix("quick", 2, 2), func(w workload) bool { return w.idle > 0 }) {
		t.Error("-quick has the 10,000-connection workload")
	}
	if !netPathsWorkload(ws[0]) {
		t.Error("the base produce workload is not one of the io_uring net peer's")
	}
	// -matrix net is exactly the standard matrix's workloads the io_uring
	// net peer runs (what issue 13's targets read), the base one first.
	var want []string
	for _, w := range ws {
		if netPathsWorkload(w) {
			want = append(want, w.id())
		}
	}
	var got []string
	for _, w := range matrix("net", 2, 2) {
		got = append(got, w.id())
	}
	if !slices.Equal(got, want) {
		t.Errorf("-matrix net: %v, want the io_uring net peer's workloads of the standard matrix %v", got, want)
	}
}

func TestParsePerfCount(t *testing.T) {
	out := "\n123456,,raw_syscalls:sys_enter,2003,100.00,,\n"
	if v, ok := parsePerfCount(out, "raw_syscalls:sys_enter"); !ok || v != 123456 {
		t.Errorf("parsed %v, %v", v, ok)
	}
	if _, ok := parsePerfCount("<not counted>,,raw_syscalls:sys_enter,0,0.00,,\n", "raw_syscalls:sys_enter"); ok {
		t.Error("<not counted> read as a count")
	}
}
