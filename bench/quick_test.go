package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"ringlog/internal/kafkaref"
	"ringlog/internal/testkit"
)

// processesOf lists the pids of running processes whose executable is bin.
func processesOf(bin string) []string {
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == bin {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// waitNoProcesses waits a little for children to be reaped, then fails if
// any process of bin is left.
func waitNoProcesses(t *testing.T, bin string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := processesOf(bin)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range pids {
				if pid, err := parsePid(p); err == nil {
					if proc, err := os.FindProcess(pid); err == nil {
						proc.Kill()
					}
				}
			}
			t.Fatalf("processes of %s left running after the suite: %v", bin, pids)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitNoProcessesUnder waits a little, then fails if a process whose
// command line names dir is left: the Kafka JVMs, whose configuration
// lies under the suite's data folder.
func waitNoProcessesUnder(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && e.Name() != "self" && bytes.Contains(b, []byte(dir)) {
				left = append(left, e.Name()+": "+string(bytes.ReplaceAll(b, []byte{0}, []byte(" "))))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, l := range left {
				pid, _, _ := strings.Cut(l, ":")
				if n, err := parsePid(pid); err == nil {
					if proc, err := os.FindProcess(n); err == nil {
						proc.Kill()
					}
				}
			}
			t.Fatalf("processes under %s left running after the suite: %v", dir, left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func parsePid(s string) (int, error) {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errors.New("not a pid")
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}

// TestQuickReport runs `ringlog bench -quick` once, as a user would, every
// peer included (Apache Kafka's too), and checks that the report is
// complete and well formed: every section, every table with a row per peer
// holding figures or the reason it has none, Kafka's rows and the targets
// against it with figures, plots that parse, raw results that agree with
// the report, and no child process (broker or JVM) left behind. It
// asserts nothing about speed: the figures of a shared CI machine mean
// nothing, their presence does.
func TestQuickReport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick benchmark suite (about 2.5 to 3 min)")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the suite measures brokers through /proc")
	}
	// Kafka is one of the peers checked: without Java or Maven the test
	// fails with the reason rather than pass on a report without it.
	if err := kafkaref.Available(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := testkit.Binary(t)
	out := filepath.Join(dir, "results")
	readme := filepath.Join(dir, "README.md")
	if err := os.WriteFile(readme, []byte("# x\n\nintro\n\n## Layout\n\nfolders\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The suite's own -quick limit is about 4 min with every peer, which
	// a loaded machine (the suite's other packages beside this test, on
	// two cores) overran: the test gives it 6, and checks the report,
	// not how long it took.
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "-quick", "-timeout", "6m", "-out", out, "-dir", filepath.Join(dir, "data"), "-readme", readme)
	cmd.WaitDelay = 10 * time.Second
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	start := time.Now()
	err := cmd.Run()
	t.Logf("ringlog bench -quick took %v", time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("ringlog bench -quick: %v\n%s", err, tail(output.String(), 60))
	}
	waitNoProcesses(t, bin)
	waitNoProcessesUnder(t, dir)

	report, err := os.ReadFile(filepath.Join(out, reportFile))
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, string(report))
	checkKafka(t, string(report))
	checkSASLSSL(t, string(report))
	checkTxn(t, string(report))
	checkNetPaths(t, string(report))
	checkACLs(t, string(report))
	checkJSON(t, filepath.Join(out, resultsFile), strings.Count(string(report), "\n### "))
	for _, f := range []string{plotThroughput, plotLatency} {
		checkSVG(t, filepath.Join(out, f))
	}
	rd, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Performance", readmeBegin, readmeEnd, "results/" + plotThroughput, "## Layout", "a quick run"} {
		if !strings.Contains(string(rd), want) {
			t.Errorf("README after -readme lacks %q", want)
		}
	}
	if testing.Verbose() {
		t.Logf("report:\n%s", report)
	}
}

func tail(s string, n int) string {
	ls := strings.Split(s, "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}

// rowStatus matches a row that has no figures: its first figure cell
// states why.
var rowStatus = regexp.MustCompile(`^\*(unavailable|skipped|failed): (.+)\*$`)

// checkReport checks the report's structure: sections, tables and rows.
func checkReport(t *testing.T, report string) {
	t.Helper()
	for _, sec := range []string{"# ringlog benchmark report", "## How to read this", "## Peers",
		"## This machine's limits", "## Targets", "## Every peer against ringlog io_uring",
		"## Every peer against Apache Kafka", "## Results",
		"## Replication", "## Mirroring", "## Streams", "## Zero-copy on loopback", "## Network paths: system calls and CPU split",
		"## CPU profile of ringlog io_uring", "## Plots"} {
		if !strings.Contains(report, "\n"+sec) && !strings.HasPrefix(report, sec) {
			t.Errorf("report lacks section %q", sec)
		}
	}
	for _, want := range []string{"Measured ", "cores", "Command: `ringlog bench -quick"} {
		if !strings.Contains(report, want) {
			t.Errorf("report does not state %q", want)
		}
	}
	tables := strings.Split(report, "\n### ")[1:]
	want := 0
	for _, w := range matrix("quick", 2, 2) {
		want += len(tablesFor(w)) // consume has 3 tables (2 of transactional records), both 2
	}
	if len(tables) != want {
		t.Errorf("%d result tables, want %d", len(tables), want)
	}
	for _, tb := range tables {
		if i := strings.Index(tb, "\n## "); i >= 0 {
			tb = tb[:i] // the last table is followed by other sections
		}
		title := strings.SplitN(tb, "\n", 2)[0]
		var lines []string
		for _, l := range strings.Split(tb, "\n") {
			if strings.HasPrefix(l, "|") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 2+len(matrixSpecs()) {
			t.Errorf("table %q: %d lines, want a header, a rule and %d peers", title, len(lines), len(matrixSpecs()))
			continue
		}
		width := len(cells(lines[0]))
		for i, spec := range matrixSpecs() {
			cs := cells(lines[2+i])
			if len(cs) != width {
				t.Errorf("table %q, %s: %d cells, header has %d", title, spec.name, len(cs), width)
				continue
			}
			if cs[0] != spec.name {
				t.Errorf("table %q: row %d is %q, want %q", title, i, cs[0], spec.name)
			}
			if m := rowStatus.FindStringSubmatch(cs[2]); m != nil {
				if strings.TrimSpace(m[2]) == "" {
					t.Errorf("table %q, %s: %s without a reason", title, spec.name, m[1])
				}
				if m[1] == "failed" {
					t.Logf("table %q, %s failed: %s", title, spec.name, m[2])
				}
				continue
			}
			if !figure.MatchString(cs[2]) {
				t.Errorf("table %q, %s: first figure %q is neither a number nor a reason", title, spec.name, cs[2])
			}
		}
	}
	// The cluster runs in -quick: in the base produce table (the first),
	// where its row must hold figures.
	if len(tables) > 0 {
		line := lineWith(tables[0], "| ringlog 3-broker cluster |")
		if cs := cells(line); len(cs) < 3 || !figure.MatchString(cs[2]) {
			t.Errorf("the cluster's row in the base produce table has no figures: %q", line)
		}
	}
	checkReplication(t, section(report, "## Replication"))
	checkMirroring(t, section(report, "## Mirroring"))
	checkStreams(t, section(report, "## Streams"))
	limits := section(report, "## This machine's limits")
	for _, l := range []string{"sequential disk write", "fdatasync rate", "loopback TCP"} {
		line := lineWith(limits, l)
		if line == "" {
			t.Errorf("limits lack %q", l)
			continue
		}
		if cs := cells(line); len(cs) < 3 || !(figure.MatchString(cs[1]) || strings.HasPrefix(cs[1], "*unavailable: ")) {
			t.Errorf("limit %q: %q", l, line)
		}
	}
	prof := section(report, "## CPU profile of ringlog io_uring")
	if !strings.Contains(prof, "```text\n") && !strings.Contains(prof, "*unavailable: ") {
		t.Errorf("profile section has neither the top functions nor a reason:\n%s", prof)
	}
}

// checkReplication checks the Replication section of a -quick report:
// each of its tables has its rows, every row figures or a reason; the
// rows -quick runs (RF 1 against RF 3 acks=all, its lag, one failover)
// were attempted; the target is judged or said not measured.
func checkReplication(t *testing.T, sec string) {
	t.Helper()
	if sec == "" {
		return // reported missing above
	}
	var rows [][]string
	for _, l := range strings.Split(sec, "\n") {
		if strings.HasPrefix(l, "|") && !strings.HasPrefix(l, "|--") && !strings.HasPrefix(l, "|---") {
			rows = append(rows, cells(l))
		}
	}
	find := func(first string) []string {
		for _, cs := range rows {
			if len(cs) > 0 && cs[0] == first {
				return cs
			}
		}
		return nil
	}
	// A row either has figures or says why not; "failed" is logged, not
	// an error: the shared CI machine may be too slow for a run.
	attempted := func(name string, cs []string, col int) {
		t.Helper()
		if cs == nil || len(cs) <= col {
			t.Errorf("Replication: no row %q", name)
			return
		}
		if m := rowStatus.FindStringSubmatch(cs[col]); m != nil {
			if m[1] == statusUnavailable {
				t.Errorf("Replication: %s cannot run: %s", name, cs[col])
			} else {
				t.Logf("Replication: %s %s: %s", name, m[1], m[2])
			}
			return
		}
		if !figure.MatchString(cs[col]) {
			t.Errorf("Replication: %s: %q is neither a figure nor a reason", name, cs[col])
		}
	}
	attempted("RF 1, acks=1", find("ringlog io_uring, 1 broker: RF 1, acks=1"), 1)
	attempted("RF 3, acks=all", find("ringlog 3-broker cluster: RF 3, acks=all"), 1)
	switch cs := find("—"); {
	case find("1") != nil:
		attempted("failover 1", find("1"), 4)
	case cs != nil:
		attempted("failover", cs, 1)
	default:
		t.Errorf("Replication: no failover row")
	}
	for _, cs := range rows {
		for _, c := range cs {
			if m := rowStatus.FindStringSubmatch(c); m != nil && strings.TrimSpace(m[2]) == "" {
				t.Errorf("Replication: %s without a reason in %v", m[1], cs)
			}
		}
	}
	if !strings.Contains(sec, "Target: ") || !(strings.Contains(sec, ": met.") || strings.Contains(sec, "**not met**") ||
		strings.Contains(sec, "Not measured in this run.")) {
		t.Errorf("Replication: the RF=3 target is neither judged nor said not measured:\n%s", sec)
	}
	for _, want := range []string{"broker.session.timeout.ms=", "min.insync.replicas=", "sums over its"} {
		if !strings.Contains(sec, want) {
			t.Errorf("Replication does not state %q", want)
		}
	}
}

// checkMirroring checks the Mirroring section: its three rows were
// attempted (figures, or failed with a reason: a shared CI machine may be
// too slow for a run; never unavailable), and the exactly-once target is
// judged or said not measured.
func checkMirroring(t *testing.T, sec string) {
	t.Helper()
	if sec == "" {
		return // reported missing above
	}
	for _, name := range []string{"plain kgo producer into the target", "ringlog mirror, exactly once", "ringlog mirror, at least once"} {
		cs := cells(lineWith(sec, "| "+name))
		if len(cs) != 6 {
			t.Errorf("Mirroring: no row %q of 6 cells: %v", name, cs)
			continue
		}
		switch m := rowStatus.FindStringSubmatch(cs[1]); {
		case m != nil && (m[1] == statusUnavailable || strings.TrimSpace(m[2]) == ""):
			t.Errorf("Mirroring: %s: %s", name, cs[1])
		case m != nil:
			t.Logf("Mirroring: %s %s: %s", name, m[1], m[2])
		case !figure.MatchString(cs[1]):
			t.Errorf("Mirroring: %s: %q is neither a figure nor a reason", name, cs[1])
		}
	}
	if !strings.Contains(sec, "Target: exactly-once mirroring") || !(strings.Contains(sec, ": met.") ||
		strings.Contains(sec, "**not met**") || strings.Contains(sec, "Not measured")) {
		t.Errorf("Mirroring: the target is neither judged nor said not measured:\n%s", sec)
	}
}

// checkStreams checks the Streams section as checkMirroring does the
// Mirroring one: three rows attempted, both targets judged or said not
// measured.
func checkStreams(t *testing.T, sec string) {
	t.Helper()
	if sec == "" {
		return // reported missing above
	}
	for _, name := range []string{"hand-written kgo loop", "streams word count, at least once", "streams word count, exactly once"} {
		cs := cells(lineWith(sec, "| "+name))
		if len(cs) != 6 {
			t.Errorf("Streams: no row %q of 6 cells: %v", name, cs)
			continue
		}
		switch m := rowStatus.FindStringSubmatch(cs[1]); {
		case m != nil && (m[1] == statusUnavailable || strings.TrimSpace(m[2]) == ""):
			t.Errorf("Streams: %s: %s", name, cs[1])
		case m != nil:
			t.Logf("Streams: %s %s: %s", name, m[1], m[2])
		case !figure.MatchString(cs[1]):
			t.Errorf("Streams: %s: %q is neither a figure nor a reason", name, cs[1])
		}
	}
	for _, target := range []string{"Target: streams word count at least once", "Target: streams word count exactly once"} {
		l := lineWith(sec, target)
		if l == "" || !(strings.Contains(l, ": met.") || strings.Contains(l, "**not met**") || strings.Contains(l, "Not measured")) {
			t.Errorf("Streams: %q is neither judged nor said not measured:\n%s", target, sec)
		}
	}
}

// checkKafka checks Apache Kafka's part of a -quick report: its settings,
// figures in the tables of the workloads -quick runs on it and in the
// Replication section's RF 3 acks=all row, and a verdict on every target
// against it.
func checkKafka(t *testing.T, report string) {
	t.Helper()
	peers := section(report, "## Peers")
	if l := lineWith(peers, "| Apache Kafka |"); !strings.Contains(l, "Apache Kafka "+kafkaref.Version) {
		t.Errorf("Peers: Kafka's settings are not stated: %q", l)
	}
	tables := strings.Split(report, "\n### ")[1:]
	for _, want := range []string{"Produce, closed loop — 1 KiB values, 16 partitions, acks=1, no compression, 2 producers, flush never",
		// The fixed rate's table: "at 50.0k records/s" alone also named the
		// half-peak tables when a loaded machine measured a peak of 100k.
		"Consume from the page cache — 1 KiB", "at 50.0k records/s (fixed"} {
		found := false
		for _, tb := range tables {
			title := strings.SplitN(tb, "\n", 2)[0]
			if !strings.Contains(title, want) || strings.Contains(title, "kcat") {
				continue
			}
			found = true
			cs := cells(lineWith(tb, "| Apache Kafka |"))
			if len(cs) < 3 || !figure.MatchString(cs[2]) {
				t.Errorf("table %q: Kafka's row has no figures: %v", title, cs)
				continue
			}
			// Its ratio against itself, the last column, is 1.00x.
			if cs[len(cs)-1] != "1.00x" {
				t.Errorf("table %q: Kafka's ratio to itself is %v", title, cs)
			}
		}
		if !found {
			t.Errorf("no table %q", want)
		}
	}
	repl := section(report, "## Replication")
	if cs := cells(lineWith(repl, "| Apache Kafka 3-node cluster: RF 3, acks=all |")); len(cs) < 2 || !figure.MatchString(cs[1]) {
		t.Errorf("Replication: the 3-node Kafka's RF 3 acks=all row has no figures: %v", cs)
	}
	targets := section(report, "## Targets")
	for _, want := range []string{"records/s ≥ 1.5x Apache Kafka's", "broker CPU per GB ≤ 0.4x Apache Kafka's",
		"at 50.0k records/s ≤ 0.5x Apache Kafka's", "peak RSS ≤ 0.25x Apache Kafka's",
		"RF=3 acks=all records/s ≥ 1.5x a 3-node Apache Kafka's", "page cache records/s ≥ 1.0x Apache Kafka's"} {
		cs := cells(lineWith(targets, want))
		if len(cs) != 3 {
			t.Errorf("Targets: no line %q", want)
			continue
		}
		if !judgedRatio.MatchString(cs[1]) || (cs[2] != "met" && cs[2] != "**not met**") {
			t.Errorf("Targets: %q is not judged from figures: %v", want, cs)
		}
	}
}

// checkSASLSSL checks ringlog SASL_SSL's part of a -quick report: its
// settings (both listeners, the client one's engine), figures in the kgo
// tables of its targets, an attempt in its kcat tables, and a verdict on
// both of its targets from figures.
func checkSASLSSL(t *testing.T, report string) {
	t.Helper()
	l := lineWith(section(report, "## Peers"), "| ringlog SASL_SSL | flush=never |")
	for _, want := range []string{"PLAINTEXT://127.0.0.1:", "SASL_SSL://127.0.0.1:", "SCRAM-SHA-512", "network portable"} {
		if !strings.Contains(l, want) {
			t.Errorf("Peers: ringlog SASL_SSL's settings do not state %q: %q", want, l)
		}
	}
	tables := strings.Split(report, "\n### ")[1:]
	for _, want := range []struct {
		title   string
		figures bool // kgo: the targets' figures; kcat: attempted
	}{
		{"Produce, closed loop — 1 KiB values, 16 partitions, acks=1, no compression, 2 producers, flush never (page cache) — client kgo", true},
		{"Produce, closed loop — 1 KiB values, 16 partitions, acks=1, no compression, 2 producers, flush never (page cache) — client kcat", false},
		{"Consume from the page cache — 1 KiB values, 16 partitions, acks=1, no compression, 2 consumers, flush never (page cache) — client kgo", true},
		{"Consume from the page cache — 1 KiB values, 16 partitions, acks=1, no compression, 2 consumers, flush never (page cache) — client kcat", false},
		{"Consume after dropping the cache — 1 KiB", false},
	} {
		found := false
		for _, tb := range tables {
			title := strings.SplitN(tb, "\n", 2)[0]
			if !strings.Contains(title, want.title) {
				continue
			}
			found = true
			cs := cells(lineWith(tb, "| ringlog SASL_SSL |"))
			switch {
			case len(cs) < 3:
				t.Errorf("table %q: no SASL_SSL row", title)
			case figure.MatchString(cs[2]):
			case want.figures:
				t.Errorf("table %q: ringlog SASL_SSL's row has no figures: %v", title, cs)
			case strings.HasPrefix(cs[2], "*failed: "):
				t.Logf("table %q: ringlog SASL_SSL %s", title, cs[2])
			default:
				t.Errorf("table %q: ringlog SASL_SSL's row was not attempted: %v", title, cs)
			}
		}
		if !found {
			t.Errorf("no table %q", want.title)
		}
	}
	targets := section(report, "## Targets")
	for _, want := range []string{"SASL_SSL records/s ≥ 0.7x PLAINTEXT at 1 KiB (produce)",
		"SASL_SSL records/s ≥ 0.7x PLAINTEXT at 1 KiB (consume from the page cache)"} {
		cs := cells(lineWith(targets, want))
		if len(cs) != 3 {
			t.Errorf("Targets: no line %q", want)
			continue
		}
		if !judgedRatio.MatchString(cs[1]) || !strings.Contains(cs[1], " s/GB") || (cs[2] != "met" && cs[2] != "**not met**") {
			t.Errorf("Targets: %q is not judged from figures with CPU per GB: %v", want, cs)
		}
	}
}

// judgedRatio is a target's measured cell against another peer: the ratio
// and both figures.
var judgedRatio = regexp.MustCompile(`^[0-9.]+x \(.+ against .+\)$`)

// figure matches a number as the report prints it, possibly with a unit
// and the range of runs beneath.
var figure = regexp.MustCompile(`^[0-9.]+(k|M|G)?( (µs|ms|s|MiB))?%?(<br><sub>.*</sub>)?$`)

func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(strings.TrimSuffix(line, "|"), "|")
	// Escaped pipes inside reasons are not separators.
	line = strings.ReplaceAll(line, `\|`, "\x00")
	var cs []string
	for _, c := range strings.Split(line, "|") {
		cs = append(cs, strings.ReplaceAll(strings.TrimSpace(c), "\x00", "|"))
	}
	return cs
}

func section(report, heading string) string {
	i := strings.Index(report, heading)
	if i < 0 {
		return ""
	}
	rest := report[i+len(heading):]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

func lineWith(text, sub string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// checkJSON checks that the raw results hold the report's tables, every
// row with a status and, when not measured, a reason.
func checkJSON(t *testing.T, path string, tables int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tables []struct {
			ID   string
			Rows []struct {
				Peer, Status, Reason string
				Runs                 []struct {
					Records     int64   `json:"records"`
					RecordsPerS float64 `json:"records_per_s"`
				}
			}
		}
		Limits      []map[string]any
		Replication struct {
			Runs []struct {
				ID, Status, Reason string
			}
			Failovers []map[string]any
		}
		Mirroring []struct {
			ID, Status, Reason string
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(doc.Tables) != tables {
		t.Errorf("%s: %d tables, the report has %d", path, len(doc.Tables), tables)
	}
	if len(doc.Limits) != 1 {
		t.Errorf("%s: %d limit samples, want 1 (one run)", path, len(doc.Limits))
	}
	if len(doc.Replication.Runs) != len(newReplication().runs) {
		t.Errorf("%s: %d replication runs, want %d", path, len(doc.Replication.Runs), len(newReplication().runs))
	}
	if len(doc.Mirroring) != len(newMirroring().runs) {
		t.Errorf("%s: %d mirroring runs, want %d", path, len(doc.Mirroring), len(newMirroring().runs))
	}
	for _, r := range doc.Mirroring {
		if r.Status != "measured" && r.Reason == "" {
			t.Errorf("%s: mirroring run %s is %s without a reason", path, r.ID, r.Status)
		}
	}
	for _, r := range doc.Replication.Runs {
		if r.Status != "measured" && r.Reason == "" {
			t.Errorf("%s: replication run %s is %s without a reason", path, r.ID, r.Status)
		}
	}
	for _, tb := range doc.Tables {
		if len(tb.Rows) != len(matrixSpecs()) {
			t.Errorf("%s: table %s has %d rows", path, tb.ID, len(tb.Rows))
		}
		for _, r := range tb.Rows {
			switch r.Status {
			case "measured":
				if len(r.Runs) == 0 {
					t.Errorf("%s: %s/%s measured without runs", path, tb.ID, r.Peer)
				}
			case statusUnavailable, statusSkipped, "failed":
				if r.Reason == "" {
					t.Errorf("%s: %s/%s is %s without a reason", path, tb.ID, r.Peer, r.Status)
				}
			default:
				t.Errorf("%s: %s/%s: status %q", path, tb.ID, r.Peer, r.Status)
			}
		}
	}
}

// checkSVG checks that a plot is well-formed XML with an svg root.
func checkSVG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := wellFormedSVG(b); err != nil {
		t.Errorf("%s: %v", path, err)
	}
}

func wellFormedSVG(b []byte) error {
	d := xml.NewDecoder(bytes.NewReader(b))
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		return errors.New("root element is not svg: " + root)
	}
	return nil
}

// TestInterruptStopsEveryChild interrupts a running suite and checks that
// it exits promptly and leaves no broker behind.
func TestInterruptStopsEveryChild(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the benchmark suite")
	}
	if runtime.GOOS != "linux" {
		t.Skip("looks for leftover processes in /proc")
	}
	dir := t.TempDir()
	bin := testkit.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "-quick", "-out", filepath.Join(dir, "results"),
		"-dir", filepath.Join(dir, "data"), "-peers", "ringlog-uring,kfake,nats")
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until brokers run, then interrupt as Ctrl-C would.
	deadline := time.Now().Add(60 * time.Second)
	for len(processesOf(bin)) < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(processesOf(bin)); n < 3 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("only %d processes of the suite after 60 s:\n%s", n, tail(output.String(), 30))
	}
	stopped := time.Now()
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	if d := time.Since(stopped); d > 45*time.Second {
		t.Errorf("the suite took %v to stop after an interrupt", d)
	}
	waitNoProcesses(t, bin)
}

// checkTxn checks that ringlog's transaction rows were measured: the two
// targets of transactions (transactional against idempotent produce,
// read_committed against read_uncommitted) are judged, not left without
// figures.
func checkTxn(t *testing.T, report string) {
	t.Helper()
	targets := section(report, "## Targets")
	for _, want := range []string{"transactional produce, 1,000 records per transaction", "read_committed consume records/s"} {
		line := lineWith(targets, want)
		cs := cells(line)
		if len(cs) < 3 || (cs[2] != "met" && cs[2] != "**not met**") {
			t.Errorf("target %q not judged: %q", want, line)
		}
	}
}

// checkNetPaths checks issue 13's part of a -quick report: the io_uring
// net peer runs with its network on io_uring, every target of the issue
// that has a workload is judged from figures of the same run, and the
// network path table has system calls per request and the CPU split of
// each of ringlog's three paths in the base produce run (perf is there
// wherever scripts/test.sh ran).
func checkNetPaths(t *testing.T, report string) {
	t.Helper()
	l := lineWith(section(report, "## Peers"), "| ringlog io_uring net | flush=never |")
	for _, want := range []string{"-io uring", "-net uring", "network uring"} {
		if !strings.Contains(l, want) {
			t.Errorf("Peers: ringlog io_uring net's settings do not state %q: %q", want, l)
		}
	}
	targets := section(report, "## Targets")
	n := 0
	for _, line := range strings.Split(targets, "\n") {
		cs := cells(line)
		if len(cs) != 3 || !strings.HasPrefix(cs[0], "io_uring net: ") || cs[0] == netPathsConnsTarget ||
			strings.HasPrefix(cs[2], "not measured in this matrix: -quick") {
			continue
		}
		n++
		if cs[1] == "—" || (cs[2] != "met" && cs[2] != "**not met**") {
			t.Errorf("Targets: %q is not judged from figures: %v", cs[0], cs)
		}
	}
	if n != 9 {
		t.Errorf("Targets: %d issue 13 targets judged, want 9 (-quick has no end-to-end run at the fixed rate):\n%s", n, targets)
	}
	net := section(report, "## Network paths")
	for _, name := range []string{"ringlog io_uring", "ringlog io_uring net", "ringlog portable"} {
		cs := cells(lineWith(net, "| produce 1 KiB, 2 producers | "+name+" |"))
		if len(cs) != 7 {
			t.Errorf("Network paths: no base produce row for %s", name)
			continue
		}
		for i, c := range cs[2:] {
			switch {
			case i == 1 && c == "—":
				t.Errorf("Network paths: %s has no system calls per request: perf is missing or could not attach "+
					"(scripts/test.sh installs linux-perf)", name)
			case !figure.MatchString(c):
				t.Errorf("Network paths: %s, column %d is %q, not a figure", name, i+3, c)
			}
		}
		if len(cs) == 7 {
			checkKernelSplit(t, section(report, "**The kernel's share by cause.**"), name, cs[5])
		}
	}
}

// checkKernelSplit checks a network path's row of the kernel's split by
// cause for the base produce run: samples were taken, every cause has a
// figure, and the causes add up to the kernel seconds of the system call
// table (kernel), as -quick's one run makes them (the medians of several
// runs need not add up).
func checkKernelSplit(t *testing.T, split, name, kernel string) {
	t.Helper()
	cs := cells(lineWith(split, "| produce 1 KiB, 2 producers | "+name+" |"))
	if len(cs) != 3+int(kernelCauses) {
		t.Errorf("kernel split: no base produce row for %s: %v", name, cs)
		return
	}
	if cs[2] == "—" {
		t.Errorf("kernel split: %s has no kernel samples: perf is missing or could not record "+
			"(scripts/test.sh installs linux-perf)", name)
		return
	}
	var sum float64
	for i, c := range cs[2:] {
		v, err := strconv.ParseFloat(strings.TrimSuffix(c, "k"), 64)
		if !figure.MatchString(c) || err != nil {
			t.Errorf("kernel split: %s, column %d is %q, not a figure", name, i+3, c)
			return
		}
		if i > 0 {
			sum += v
		}
	}
	want, err := strconv.ParseFloat(kernel, 64)
	if err != nil {
		t.Errorf("Network paths: %s's kernel seconds %q", name, kernel)
		return
	}
	// Each cause is printed to 3 significant digits.
	if math.Abs(sum-want) > 0.02+0.02*want {
		t.Errorf("kernel split: %s's causes add up to %.3f s, the kernel's time is %s s: %v", name, sum, kernel, cs)
	}
}

// checkACLs checks issue 15's part of a -quick report: the 1,000-binding
// authorizer peer runs with its authorizer on and its target is judged
// from figures; the 100-binding one says why -quick leaves it out.
func checkACLs(t *testing.T, report string) {
	t.Helper()
	if l := lineWith(section(report, "## Peers"), "| ringlog ACLs 1,000 | flush=never |"); !strings.Contains(l, "authorizer on") ||
		!strings.Contains(l, "1000 bindings") {
		t.Errorf("Peers: ringlog ACLs 1,000's settings do not state its authorizer and bindings: %q", l)
	}
	targets := section(report, "## Targets")
	cs := cells(lineWith(targets, "authorizer on, 1,000 ACLs"))
	if len(cs) != 3 || cs[1] == "—" || (cs[2] != "met" && cs[2] != "**not met**") {
		t.Errorf("Targets: the 1,000-binding authorizer target is not judged from figures: %v", cs)
	}
	if l := lineWith(targets, "authorizer on, 100 ACLs"); !strings.Contains(l, "not measured: ringlog ACLs 100 skipped") {
		t.Errorf("Targets: the 100-binding authorizer target in -quick: %q", l)
	}
}
