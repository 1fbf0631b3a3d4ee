package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Main is `ringlog bench`. args are the arguments after "bench"; the first
// may be "peer", which makes this process one of the suite's peer brokers
// (kfake or NATS), started by the suite itself.
func Main(args []string) error {
	if len(args) > 0 && args[0] == "peer" {
		return peerMain(args[1:])
	}
	cfg, err := parseFlags(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	// Ctrl-C or SIGTERM cancels the runs; the deferred close below then
	// stops every child process before Main returns.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := newSuite(cfg, os.Stdout, os.Stderr)
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.run(ctx); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return errors.New("bench: interrupted; the report holds what was measured until then")
	}
	return nil
}

// config is what a run of the suite was asked to do.
type config struct {
	quick      bool
	matrix     string        // quick, standard, produce or full
	runs       int           // repetitions of every measurement; medians are reported
	duration   time.Duration // bound of one timed run
	maxRecords int64         // bound of one produce run, in records
	maxBytes   int64         // bound of one produce run, in value bytes
	fillBytes  int64         // volume produced before a consume run
	producers  int
	consumers  int
	peers      []string // peer keys to run
	kinds      []string // workload kinds to run; empty: all
	only       string   // "", onlyMatrix, onlyReplication, onlyMirror or onlyStreams
	outDir     string
	readme     string
	workDir    string
	broker     string        // the ringlog binary that runs the brokers
	timeout    time.Duration // whole-suite bound
	rate       float64       // open-loop rate in records/s; 0: half of ringlog io_uring's peak
	args       []string
}

const usageText = `ringlog bench: ringlog and its peers under the same workloads, in one run, on this machine

  ringlog bench [-quick] [-matrix standard|produce|full|net] [-runs N] [-duration D]
                [-records N] [-bytes N] [-fill N] [-producers N] [-consumers N]
                [-rate N] [-peers LIST] [-workloads LIST] [-only matrix|replication|mirror|streams]
                [-out DIR] [-readme FILE] [-dir DIR] [-broker PATH] [-timeout D]

Peers: %s.
Results (report.md, results.json, SVG plots, the broker's CPU profile) go to -out.

`

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("ringlog bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, usageText, strings.Join(allPeerKeys(), ", "))
		fs.PrintDefaults()
	}
	quick := fs.Bool("quick", false, "the smoke matrix, one run, short bounds: finishes in about two minutes without the Apache Kafka, SASL_SSL and io_uring net peers (-peers), in about four with them")
	matrix := fs.String("matrix", "standard", "standard (each axis varied around a base workload), produce (100 B and 1 KiB values on 1 and 16 partitions, produce only) full (every produce combination) or net (issue 13's io_uring network targets' workloads only; pair with -peers ringlog-net-uring,ringlog-net-loops,ringlog-uring,ringlog-portable,kfake)")
	runs := fs.Int("runs", 0, "repetitions of every measurement (default 3, -quick 1)")
	duration := fs.Duration("duration", 0, "bound of one timed run (default 5s, -quick 500ms)")
	records := fs.Int64("records", 0, "bound of one produce run in records (default 20000000)")
	maxBytes := fs.String("bytes", "", "bound of one produce run in value bytes (default 2GiB, -quick 256MiB)")
	fill := fs.String("fill", "", "volume written before the consume runs (default 512MiB, -quick 48MiB)")
	producers := fs.Int("producers", 2, "producers per run (each its own client and connection)")
	consumers := fs.Int("consumers", 2, "consumers per run (partitions split between them)")
	rate := fs.Float64("rate", 0, "open-loop rate in records/s (default: half of ringlog io_uring's measured peak)")
	peers := fs.String("peers", strings.Join(peerKeys(), ","), "peers to measure")
	kinds := fs.String("workloads", "", "workload kinds to run: produce, consume, latency, e2e, produce+consume (default all; the base produce run always runs)")
	only := fs.String("only", "", "run one part of the suite: matrix (the workloads on every peer), replication (the cluster's Replication section), mirror (the Mirroring section) or streams (the Streams section)")
	out := fs.String("out", "", "results folder (default bench-results/<UTC time>)")
	readme := fs.String("readme", "", "a README.md whose Performance section is replaced by this run's")
	workDir := fs.String("dir", "", "where brokers keep their data (default: a temporary folder, removed)")
	broker := fs.String("broker", "", "ringlog binary to benchmark (default: this executable)")
	timeout := fs.Duration("timeout", 0, "bound of the whole suite; runs beyond it are reported as skipped (default 1h, -quick 1m50s plus time for the Apache Kafka peers' starts and the SASL_SSL, io_uring net and ACLs 1,000 peers)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	c := config{
		quick: *quick, matrix: *matrix, runs: *runs, duration: *duration, maxRecords: *records,
		producers: *producers, consumers: *consumers, rate: *rate, outDir: *out, readme: *readme,
		workDir: *workDir, broker: *broker, timeout: *timeout, args: args, only: *only,
	}
	if c.only != "" && c.only != onlyMatrix && c.only != onlyReplication && c.only != onlyMirror && c.only != onlyStreams {
		return config{}, fmt.Errorf("bench: -only %q: want %s, %s, %s or %s", c.only, onlyMatrix, onlyReplication, onlyMirror, onlyStreams)
	}
	if c.quick {
		c.matrix = "quick"
	}
	if c.matrix != "quick" && c.matrix != "standard" && c.matrix != "produce" && c.matrix != "full" && c.matrix != "net" {
		return config{}, fmt.Errorf("bench: -matrix %q: want standard, produce, full or net", c.matrix)
	}
	def := func(v *int64, s string, quick, normal int64) error {
		if s == "" {
			*v = normal
			if c.quick {
				*v = quick
			}
			return nil
		}
		n, err := parseBytes(s)
		*v = n
		return err
	}
	if err := def(&c.maxBytes, *maxBytes, 256<<20, 2<<30); err != nil {
		return config{}, fmt.Errorf("bench: -bytes: %w", err)
	}
	if err := def(&c.fillBytes, *fill, 48<<20, 512<<20); err != nil {
		return config{}, fmt.Errorf("bench: -fill: %w", err)
	}
	if c.runs == 0 {
		c.runs = map[bool]int{true: 1, false: 3}[c.quick]
	}
	if c.duration == 0 {
		// -quick checks that everything runs, its figures are no
		// measurements: half a second a run is enough for that, and
		// its 130-odd runs are most of the CPU of the test suite's
		// TestQuickReport.
		c.duration = map[bool]time.Duration{true: 500 * time.Millisecond, false: 5 * time.Second}[c.quick]
	}
	if c.maxRecords == 0 {
		c.maxRecords = 20_000_000
	}
	quickTimeout := *timeout == 0 && c.quick
	if c.timeout == 0 {
		c.timeout = map[bool]time.Duration{true: 110 * time.Second, false: time.Hour}[c.quick]
		if c.quick && (c.only == "" || c.only == onlyMirror) {
			// The Mirroring section: a second broker, and three runs
			// of a few seconds each.
			c.timeout += 20 * time.Second
		}
		if c.quick && (c.only == "" || c.only == onlyStreams) {
			// The Streams section: three word counts of 100,000 lines,
			// each joining a fresh group (3 s of initial rebalance delay).
			c.timeout += 30 * time.Second
		}
		if !c.quick && (c.only == "" || c.only == onlyStreams) {
			// The Streams section: three word counts of 10 million
			// lines per round, a few minutes each on this machine.
			c.timeout += 45 * time.Minute
		}
		if c.matrix == "full" {
			c.timeout = 4 * time.Hour
		}
	}
	if c.runs < 1 || c.producers < 1 || c.consumers < 1 || c.duration <= 0 || c.maxRecords < 1 {
		return config{}, errors.New("bench: -runs, -producers, -consumers, -duration and -records must be positive")
	}
	for _, k := range strings.Split(*peers, ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		if _, ok := peerSpecByKey(k); !ok {
			return config{}, fmt.Errorf("bench: unknown peer %q (known: %s)", k, strings.Join(allPeerKeys(), ", "))
		}
		c.peers = append(c.peers, k)
		if quickTimeout {
			// A JVM starts in seconds, a cluster of three on two cores in
			// up to a minute, and the SASL_SSL and io_uring net peers are
			// one more broker each with the runs of their targets: time
			// the quick suite's other runs must not lose.
			c.timeout += map[string]time.Duration{kafkaPeer: 30 * time.Second, kafkaClusterPeer: 70 * time.Second,
				saslSSLPeer: 15 * time.Second, netUringPeer: 15 * time.Second,
				acl1000Peer: 5 * time.Second}[k]
		}
	}
	for _, k := range strings.Split(*kinds, ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		switch workloadKind(k) {
		case kindProduce, kindConsume, kindLatency, kindE2E, kindBoth:
		default:
			return config{}, fmt.Errorf("bench: unknown workload kind %q", k)
		}
		c.kinds = append(c.kinds, k)
	}
	if c.outDir == "" {
		c.outDir = filepath.Join("bench-results", time.Now().UTC().Format("20060102-150405"))
	}
	if c.broker == "" {
		exe, err := os.Executable()
		if err != nil {
			return config{}, fmt.Errorf("bench: finding this executable (pass -broker): %w", err)
		}
		c.broker = exe
	}
	return c, nil
}

// Values of -only.
const (
	onlyMatrix      = "matrix"
	onlyReplication = "replication"
	onlyMirror      = "mirror"
	onlyStreams     = "streams"
)

// parseBytes reads "512MiB", "2GiB", "64KiB" or a plain number of bytes.
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size (like 512MiB)", s)
	}
	return n * mult, nil
}
