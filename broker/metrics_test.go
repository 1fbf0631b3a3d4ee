package broker

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/engine"
	"ringlog/internal/testkit"
)

// metricsPage serves a broker's registry as cmd/ringlog's admin listener
// does (promhttp on /metrics).
type metricsPage struct {
	t   *testing.T
	url string
}

func serveMetrics(t *testing.T, reg *prometheus.Registry) *metricsPage {
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return &metricsPage{t: t, url: srv.URL + "/metrics"}
}

// scrape reads the page into series (name{a="x",b="y"}, labels sorted by
// name as the exposition format writes them) and their values.
func (m *metricsPage) scrape() map[string]float64 {
	m.t.Helper()
	resp, err := http.Get(m.url)
	if err != nil {
		m.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		m.t.Fatalf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			m.t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		m.t.Fatal(err)
	}
	return out
}

// value is one series of a fresh scrape; a series missing fails the test.
func (m *metricsPage) value(series string) float64 {
	m.t.Helper()
	v, ok := m.scrape()[series]
	if !ok {
		m.t.Fatalf("no series %s on /metrics", series)
	}
	return v
}

// waitValue waits until series has want, failing after d with the last
// value seen.
func (m *metricsPage) waitValue(series string, want float64, d time.Duration) {
	m.t.Helper()
	deadline := time.Now().Add(d)
	for {
		v, ok := m.scrape()[series]
		if ok && v == want {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("%s: %v (present %v) after %v, want %v", series, v, ok, d, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMetricsSingleBroker: a broker's /metrics carries Kafka's
// ReplicaManager and controller metrics (a single broker is its cluster's
// active controller and leads every partition, each at its minimum ISR of
// one) and the lag of a kgo consumer group per partition, which is what
// was produced minus what the group committed; above the series cap the
// rest is counted, not listed.
func TestMetricsSingleBroker(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Groups.InitialRebalanceDelay = 0 // the one member joins at once
	reg := prometheus.NewRegistry()
	cfg.Metrics = reg
	b := start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer b.Close(ctx)
	page := serveMetrics(t, reg)

	const topic = "lagged"
	adm := kadm.NewClient(newClient(t, b.Addr()))
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	produced := [2]int64{30, 20}
	prod := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for p, n := range produced {
		for i := range n {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(p), Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
	}
	if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// A consumer group reads everything and commits part of it: up to
	// offset 10 of partition 0 and 5 of partition 1.
	cons := newClient(t, b.Addr(), kgo.ConsumerGroup("lag-g"), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	committed := [2]int64{10, 5}
	var toCommit []*kgo.Record
	for read := 0; read < 50; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			if r.Offset == committed[r.Partition]-1 {
				toCommit = append(toCommit, r)
			}
		})
	}
	if err := cons.CommitRecords(ctx, toCommit...); err != nil {
		t.Fatal(err)
	}

	m := page.scrape()
	for p := range produced {
		series := fmt.Sprintf(`ringlog_group_lag{group="lag-g",partition="%d",topic="%s"}`, p, topic)
		if got, want := m[series], float64(produced[p]-committed[p]); got != want {
			t.Errorf("%s = %v, want %v (produced %d, committed %d)", series, got, want, produced[p], committed[p])
		}
	}
	for _, reason := range []string{"limit", "no_log", "late"} {
		if v := m[fmt.Sprintf(`ringlog_group_lag_skipped{reason="%s"}`, reason)]; v != 0 {
			t.Errorf("lag skipped for %s: %v", reason, v)
		}
	}
	// The topic's 2 partitions and __consumer_offsets' 2, all led here
	// with an ISR of one: at their minimum, none under it.
	for series, want := range map[string]float64{
		"kafka_server_replicamanager_partitioncount":                      4,
		"kafka_server_replicamanager_leadercount":                         4,
		"kafka_server_replicamanager_underreplicatedpartitions":           0,
		"kafka_server_replicamanager_underminisrpartitioncount":           0,
		"kafka_server_replicamanager_atminisrpartitioncount":              4,
		"kafka_server_replicamanager_offlinereplicacount":                 0,
		"kafka_server_replicamanager_reassigningpartitions":               0,
		"kafka_server_leaderreplication_byte_rate":                        0,
		"kafka_server_followerreplication_byte_rate":                      0,
		"kafka_controller_kafkacontroller_activecontrollercount":          1,
		"kafka_controller_kafkacontroller_globaltopiccount":               2,
		"kafka_controller_kafkacontroller_globalpartitioncount":           4,
		"kafka_controller_kafkacontroller_offlinepartitionscount":         0,
		"kafka_controller_kafkacontroller_activebrokercount":              1,
		"kafka_controller_kafkacontroller_fencedbrokercount":              0,
		"kafka_controller_kafkacontroller_preferredreplicaimbalancecount": 0,
	} {
		if got, ok := m[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	// Registering, creating two topics and committing offsets went
	// through the quorum: each command's wait was observed.
	if n := m["kafka_controller_controllereventmanager_eventqueuetimems_count"]; n < 3 {
		t.Errorf("controller event queue time observed %v times, want the commands' (3 at least)", n)
	}

	// A cap of one series: one partition's lag, the other counted.
	capped := prometheus.NewRegistry()
	capped.MustRegister(newGroupLagCollector(b.Groups(), b.Engine(), 1))
	cm := serveMetrics(t, capped).scrape()
	var lags []string
	for s := range cm {
		if strings.HasPrefix(s, "ringlog_group_lag{") {
			lags = append(lags, s)
		}
	}
	if len(lags) != 1 || cm[`ringlog_group_lag_skipped{reason="limit"}`] != 1 {
		sort.Strings(lags)
		t.Errorf("capped at one series: %v listed, %v skipped", lags, cm[`ringlog_group_lag_skipped{reason="limit"}`])
	}
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// testBroker is one broker of an in-process cluster: its configuration
// (kept for a restart on the same directory and voter port), its registry
// and its /metrics page.
type testBroker struct {
	cfg  Config
	b    *Broker
	reg  *prometheus.Registry
	page *metricsPage
}

// startBrokers starts n brokers (ids 1..n) in this process, each a voter
// of one quorum, with settings that make failures show within a second or
// two; they start together, since each waits for a quorum.
func startBrokers(t *testing.T, n int) []*testBroker {
	t.Helper()
	var vs []string
	for i := range n {
		vs = append(vs, fmt.Sprintf("%d@%s", i+1, testkit.FreeAddr(t)))
	}
	bs := make([]*testBroker, n)
	for i := range bs {
		cfg := testConfig(t, t.TempDir())
		cfg.NodeID = int32(i + 1)
		cfg.Cluster.Voters = strings.Join(vs, ",")
		cfg.Cluster.LagTimeMax = 2 * time.Second
		cfg.Cluster.SessionTimeout = 2 * time.Second
		cfg.Cluster.HeartbeatInterval = 300 * time.Millisecond
		bs[i] = &testBroker{cfg: cfg}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, tb := range bs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = tb.start()
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, tb := range bs {
			if tb.b != nil {
				tb.b.Close(ctx)
			}
		}
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("broker %d: %v", i+1, err)
		}
	}
	for _, tb := range bs {
		tb.page = serveMetrics(t, tb.reg)
	}
	return bs
}

// start (re)starts the broker with a fresh registry (a registry takes a
// collector once).
func (tb *testBroker) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg := prometheus.NewRegistry()
	cfg := tb.cfg
	cfg.Metrics = reg
	b, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	tb.b, tb.reg = b, reg
	return nil
}

// TestMetricsUnderReplicated: three brokers in one process, a topic of
// three replicas with min.insync.replicas 2. A follower stops: its
// leader reports the partition under-replicated and at its minimum ISR,
// and counts the shrink; the active controller (one broker only) counts a
// fenced broker. The follower comes back: it rejoins the ISR, the gauges
// return to 0 and the expansion is counted.
func TestMetricsUnderReplicated(t *testing.T) {
	begin := time.Now()
	bs := startBrokers(t, 3)
	t.Logf("3 brokers up in %v", time.Since(begin).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic = "urp"
	adm := kadm.NewClient(newClient(t, bs[0].b.Addr()))
	resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	tp := engine.TP{Topic: topic, Partition: 0}
	leader := -1
	testkit.WaitFor(t, 10*time.Second, "a leader of urp-0", func() bool {
		for i, tb := range bs {
			if _, ok := tb.b.cl.node.Leads(tp); ok {
				leader = i
				return true
			}
		}
		return false
	})
	lp := bs[leader].page
	const urp, atMin = "kafka_server_replicamanager_underreplicatedpartitions", "kafka_server_replicamanager_atminisrpartitioncount"
	// The ISR is whole once the followers fetched (it starts whole).
	lp.waitValue(urp, 0, 10*time.Second)
	shrinks := lp.value("kafka_server_replicamanager_isrshrinks_total")
	expands := lp.value("kafka_server_replicamanager_isrexpands_total")

	// Only one broker is the active controller.
	active := 0.0
	for _, tb := range bs {
		active += tb.page.value("kafka_controller_kafkacontroller_activecontrollercount")
	}
	if active != 1 {
		t.Fatalf("%v brokers report themselves the active controller", active)
	}

	follower := (leader + 1) % 3
	stopped := time.Now()
	if err := bs[follower].b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	lp.waitValue(urp, 1, 10*time.Second)
	lp.waitValue(atMin, 1, 5*time.Second)
	if v := lp.value("kafka_server_replicamanager_isrshrinks_total"); v != shrinks+1 {
		t.Errorf("ISR shrinks: %v, want %v", v, shrinks+1)
	}
	t.Logf("under-replicated %v after the follower stopped", time.Since(stopped).Round(time.Millisecond))
	fenced := 0.0
	testkit.WaitFor(t, 10*time.Second, "the active controller counting one fenced broker", func() bool {
		fenced = 0
		for i, tb := range bs {
			if i != follower {
				fenced += tb.page.value("kafka_controller_kafkacontroller_fencedbrokercount")
			}
		}
		return fenced == 1
	})

	restarted := time.Now()
	if err := bs[follower].start(); err != nil {
		t.Fatal(err)
	}
	bs[follower].page = serveMetrics(t, bs[follower].reg)
	lp.waitValue(urp, 0, 10*time.Second)
	lp.waitValue(atMin, 0, 5*time.Second)
	if v := lp.value("kafka_server_replicamanager_isrexpands_total"); v != expands+1 {
		t.Errorf("ISR expansions: %v, want %v", v, expands+1)
	}
	t.Logf("back in the ISR %v after the restart", time.Since(restarted).Round(time.Millisecond))
	// The restarted follower leads nothing here and reports no partition
	// of its own under-replicated.
	if v := bs[follower].page.value(urp); v != 0 {
		t.Errorf("restarted follower reports %v under-replicated partitions", v)
	}
}
