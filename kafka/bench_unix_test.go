//go:build unix

package kafka

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A first benchmark of the produce and consume paths, which the bench/
// suite will grow: one kgo producer, then one kgo consumer, over loopback,
// against ringlog on each I/O path and against kfake (franz-go's in-memory
// fake broker) with the same client in the same run. Run it with
//
//	go test ./kafka/ -run '^$' -bench ProduceConsume -benchtime 200000x
//
// (RINGLOG_BENCH_PROFILE_DIR=dir adds a CPU profile of each broker.)
//
// Each broker runs in its own process (this test binary re-executed, see
// TestBenchBrokerChild), so that its CPU time is measured apart from the
// clients': getrusage in the broker process around each workload. The
// ringlog broker uses Kafka's default flush policy (never: the page cache
// persists, fsync is the OS's), kfake keeps everything in memory.

// benchBrokerEnv names the broker a child process runs; benchProfileEnv,
// when set by whoever runs the benchmark, is a directory where each broker
// process writes its CPU profile (<broker>.cpu.pprof, for go tool pprof).
const (
	benchBrokerEnv  = "RINGLOG_BENCH_BROKER"
	benchProfileEnv = "RINGLOG_BENCH_PROFILE_DIR"
)

// TestBenchBrokerChild is not a test: it is the broker process of
// BenchmarkProduceConsume. It prints "addr <host:port>", answers "stats"
// on stdin with its CPU time and netpoll counters, and stops at EOF.
func TestBenchBrokerChild(t *testing.T) {
	kind := os.Getenv(benchBrokerEnv)
	if kind == "" {
		t.Skip("the broker process of BenchmarkProduceConsume; runs only when re-executed by it")
	}
	var addr string
	stats := func() (sendfile, copied int64) { return 0, 0 }
	switch kind {
	case "kfake":
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		addr = c.ListenAddrs()[0]
	case "ringlog-uring", "ringlog-portable":
		b := startBroker(t, brokerOpts{Portable: kind == "ringlog-portable"})
		addr = b.Addr
		stats = func() (int64, int64) {
			st := b.Net.Stats()
			return st.SendfileBytes, st.CopiedBytes
		}
	default:
		t.Fatalf("unknown broker %q", kind)
	}
	if dir := os.Getenv(benchProfileEnv); dir != "" {
		f, err := os.Create(filepath.Join(dir, kind+".cpu.pprof"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Printf("addr %s\n", addr)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "stats" {
			continue
		}
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		sf, cp := stats()
		fmt.Printf("stats %d %d %d\n", ru.Utime.Nano()+ru.Stime.Nano(), sf, cp)
	}
}

// benchChild is a broker process of the benchmark.
type benchChild struct {
	kind  string
	addr  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

func startBenchChild(b *testing.B, kind string) *benchChild {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchBrokerChild$", "-test.count=1", "-test.timeout=0")
	cmd.Env = append(os.Environ(), benchBrokerEnv+"="+kind)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &benchChild{kind: kind, cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	b.Cleanup(func() {
		stdin.Close() // EOF stops the child
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line := c.line("addr ")
	c.addr = strings.TrimPrefix(line, "addr ")
	return c
}

// line returns the child's next output line that starts with prefix.
func (c *benchChild) line(prefix string) string {
	for c.out.Scan() {
		if strings.HasPrefix(c.out.Text(), prefix) {
			return c.out.Text()
		}
	}
	panic(fmt.Sprintf("bench broker %s: no %q line (%v)", c.kind, prefix, c.out.Err()))
}

type benchStats struct {
	cpu              time.Duration
	sendfile, copied int64
}

func (c *benchChild) stats() benchStats {
	if _, err := io.WriteString(c.stdin, "stats\n"); err != nil {
		panic(err)
	}
	f := strings.Fields(c.line("stats "))
	cpu, _ := strconv.ParseInt(f[1], 10, 64)
	sf, _ := strconv.ParseInt(f[2], 10, 64)
	cp, _ := strconv.ParseInt(f[3], 10, 64)
	return benchStats{cpu: time.Duration(cpu), sendfile: sf, copied: cp}
}

// benchResult is one workload on one broker.
type benchResult struct {
	produceRate, consumeRate float64 // records/s
	produceMBs, consumeMBs   float64
	p50, p99                 time.Duration // produce latency of one record at a time, to acknowledgement
	cpuPerM                  float64       // broker CPU seconds per million records (produce + consume)
	cpuProdPerM, cpuConsPerM float64       // the same, per phase
	sendfileFrac             float64       // of fetched record bytes, -1 when not applicable
}

var benchTopicSeq atomic.Int64

// benchLatencyRecords are produced one at a time for the latency figures.
const benchLatencyRecords = 1000

// runProduceConsume produces n records of size bytes over parts partitions
// with one kgo producer, then consumes them with one kgo consumer.
func runProduceConsume(b *testing.B, c *benchChild, n, size int, parts int32) benchResult {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("bench-%d", benchTopicSeq.Add(1))
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.addr))
	if err != nil {
		b.Fatal(err)
	}
	defer adm.Close()
	resp, err := kadm.NewClient(adm).CreateTopic(ctx, parts, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		b.Fatal(err)
	}
	// Values differ from record to record so that compression (kgo's
	// default snappy) sees realistic, not constant, payloads.
	vals := make([][]byte, 1024)
	for i := range vals {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte((i*131 + j*7 + j*j) % 251)
		}
		vals[i] = v
	}
	before := c.stats()

	prod, err := kgo.NewClient(kgo.SeedBrokers(c.addr), kgo.DefaultProduceTopic(topic))
	if err != nil {
		b.Fatal(err)
	}
	var failed atomic.Int64
	start := time.Now()
	for i := range n {
		prod.Produce(ctx, &kgo.Record{Value: vals[i%len(vals)]}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	produceTime := time.Since(start)
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d records failed", f)
	}
	mid := c.stats()
	// Latency: one record at a time, so that it measures the broker's
	// produce path and not the queue of a saturating producer. The
	// records go to the same topic but after the phase measured above;
	// the consumer below reads only the first n.
	lat := make([]time.Duration, benchLatencyRecords)
	for i := range lat {
		sent := time.Now()
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: vals[i%len(vals)]}).FirstErr(); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(sent)
	}
	prod.Close()
	midCons := c.stats()

	cons, err := kgo.NewClient(kgo.SeedBrokers(c.addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
	var consumeTime time.Duration
	start = time.Now()
	for got := 0; got < n+benchLatencyRecords; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatalf("consumed %d of %d", got, n)
		}
		fs.EachError(func(t string, p int32, err error) { b.Fatalf("fetch %s/%d: %v", t, p, err) })
		got += fs.NumRecords()
		if got >= n && consumeTime == 0 {
			consumeTime = time.Since(start)
		}
	}
	cons.Close()
	after := c.stats()

	slices.Sort(lat)
	m := len(lat)
	perM := func(d time.Duration) float64 { return d.Seconds() / float64(n) * 1e6 }
	mb := float64(n) * float64(size) / 1e6
	r := benchResult{
		produceRate:  float64(n) / produceTime.Seconds(),
		consumeRate:  float64(n) / consumeTime.Seconds(),
		produceMBs:   mb / produceTime.Seconds(),
		consumeMBs:   mb / consumeTime.Seconds(),
		p50:          lat[m/2],
		p99:          lat[min(m*99/100, m-1)],
		cpuProdPerM:  perM(mid.cpu - before.cpu),
		cpuConsPerM:  (after.cpu - midCons.cpu).Seconds() / float64(n+benchLatencyRecords) * 1e6,
		sendfileFrac: -1,
	}
	r.cpuPerM = r.cpuProdPerM + r.cpuConsPerM
	if sf, cp := after.sendfile-before.sendfile, after.copied-before.copied; sf+cp > 0 {
		r.sendfileFrac = float64(sf) / float64(sf+cp)
	}
	return r
}

// BenchmarkProduceConsume measures each workload on each broker and prints
// ringlog's numbers as ratios to kfake's and the io_uring path's to the
// portable path's. b.N is the number of records of a run.
func BenchmarkProduceConsume(b *testing.B) {
	kinds := []string{"ringlog-uring", "ringlog-portable", "kfake"}
	children := map[string]*benchChild{}
	for _, k := range kinds {
		children[k] = startBenchChild(b, k)
	}
	type key struct {
		kind  string
		size  int
		parts int32
	}
	results := map[key]benchResult{}
	var order []key
	for _, size := range []int{100, 1024} {
		for _, parts := range []int32{1, 16} {
			for _, k := range kinds {
				kk := key{k, size, parts}
				order = append(order, kk)
				b.Run(fmt.Sprintf("%s/%dB/%dp", k, size, parts), func(b *testing.B) {
					r := runProduceConsume(b, children[k], b.N, size, parts)
					results[kk] = r
					b.ReportMetric(r.produceRate, "prod_rec/s")
					b.ReportMetric(r.consumeRate, "cons_rec/s")
					b.ReportMetric(r.produceMBs, "prod_MB/s")
					b.ReportMetric(r.consumeMBs, "cons_MB/s")
					b.ReportMetric(float64(r.p50.Microseconds()), "p50_us")
					b.ReportMetric(float64(r.p99.Microseconds()), "p99_us")
					b.ReportMetric(r.cpuProdPerM, "cpu_prod_s/Mrec")
					b.ReportMetric(r.cpuConsPerM, "cpu_cons_s/Mrec")
					if r.sendfileFrac >= 0 {
						b.ReportMetric(r.sendfileFrac, "sendfile_frac")
					}
				})
			}
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nratios: ringlog (io_uring path) / kfake, then io_uring / portable (u/p); rates: >1 is better; latency and broker CPU per record: <1 is better\n")
	fmt.Fprintf(&sb, "%-10s %9s %9s %7s %7s %9s %9s | %9s %9s %9s | %8s\n",
		"workload", "prod rec", "cons rec", "p50", "p99", "CPU prod", "CPU cons", "u/p prod", "u/p cons", "u/p CPU", "sendfile")
	for _, k := range order {
		if k.kind != "ringlog-uring" {
			continue
		}
		u, okU := results[k]
		p, okP := results[key{"ringlog-portable", k.size, k.parts}]
		f, okF := results[key{"kfake", k.size, k.parts}]
		if !okU || !okP || !okF {
			continue
		}
		fmt.Fprintf(&sb, "%-10s %9.2f %9.2f %7.2f %7.2f %9.2f %9.2f | %9.2f %9.2f %9.2f | %7.1f%%\n",
			fmt.Sprintf("%dB/%dp", k.size, k.parts),
			u.produceRate/f.produceRate, u.consumeRate/f.consumeRate,
			float64(u.p50)/float64(f.p50), float64(u.p99)/float64(f.p99),
			u.cpuProdPerM/f.cpuProdPerM, u.cpuConsPerM/f.cpuConsPerM,
			u.produceRate/p.produceRate, u.consumeRate/p.consumeRate, u.cpuPerM/p.cpuPerM,
			100*u.sendfileFrac)
	}
	// Printed, not logged: a parent benchmark's log is not shown.
	fmt.Print(sb.String())
}
