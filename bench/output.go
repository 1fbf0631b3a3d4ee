package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Files of the results folder.
const (
	reportFile  = "report.md"
	resultsFile = "results.json"
)

// write puts the report, the raw results and the plots in the results
// folder, updates the README when asked, and prints the summary and the
// profile's top functions.
func (s *suite) write() error {
	var rep bytes.Buffer
	s.writeReport(&rep)
	files := map[string]func(w io.Writer) error{
		reportFile:     func(w io.Writer) error { _, err := w.Write(rep.Bytes()); return err },
		plotThroughput: func(w io.Writer) error { s.writeThroughputSVG(w); return nil },
		plotLatency:    func(w io.Writer) error { s.writeLatencySVG(w); return nil },
		resultsFile:    s.writeJSON,
	}
	for name, f := range files {
		var b bytes.Buffer
		if err := f(&b); err != nil {
			return fmt.Errorf("bench: %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(s.cfg.outDir, name), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	if s.cfg.readme != "" {
		if err := s.updateReadme(s.cfg.readme); err != nil {
			return err
		}
	}
	fmt.Fprintln(s.out)
	if len(s.tables) > 0 {
		s.writeSummary(s.out)
	}
	s.writeTargets(s.out)
	if s.replicationSelected() {
		s.writeReplication(s.out)
	}
	if s.mirroringSelected() {
		s.writeMirroring(s.out)
	}
	if s.streamsSelected() {
		s.writeStreams(s.out)
	}
	if s.profile != nil && s.profile.err == "" {
		fmt.Fprintf(s.out, "CPU profile of %s during the main produce run (top %d by flat time):\n\n%s\n",
			s.profile.peer, profileTopN, profileText(s.profile))
	}
	fmt.Fprintf(s.out, "Report: %s\n", filepath.Join(s.cfg.outDir, reportFile))
	return nil
}

type jsonRun struct {
	Round        int      `json:"round"`
	Records      int64    `json:"records"`
	Bytes        int64    `json:"bytes"`
	ElapsedS     float64  `json:"elapsed_s"`
	RecordsPerS  float64  `json:"records_per_s"`
	MBPerS       float64  `json:"mb_per_s"`
	PlannedRate  float64  `json:"planned_records_per_s,omitempty"`
	LatencyP50   *float64 `json:"latency_p50_us,omitempty"`
	LatencyP99   *float64 `json:"latency_p99_us,omitempty"`
	LatencyP999  *float64 `json:"latency_p99_9_us,omitempty"`
	LatencyMax   *float64 `json:"latency_max_us,omitempty"`
	BrokerCPUS   *float64 `json:"broker_cpu_s,omitempty"`
	BrokerSysS   *float64 `json:"broker_cpu_kernel_s,omitempty"` // of broker_cpu_s, stime
	Syscalls     *float64 `json:"broker_syscalls,omitempty"`
	Requests     *float64 `json:"requests,omitempty"`
	BrokerRSS    *float64 `json:"broker_peak_rss_bytes,omitempty"`
	SendfileByte *float64 `json:"fetch_sendfile_bytes,omitempty"`
	CopiedBytes  *float64 `json:"fetch_copied_bytes,omitempty"`
	ClientCPUS   *float64 `json:"client_cpu_s,omitempty"`
	// KernelByCause is broker_cpu_kernel_s split by cause (the report's
	// "The kernel's share by cause"), where the run sampled it.
	KernelByCause map[string]float64 `json:"broker_cpu_kernel_s_by_cause,omitempty"`
}

type jsonRow struct {
	Peer       string    `json:"peer"`
	Durability string    `json:"durability"`
	Status     string    `json:"status"`
	Reason     string    `json:"reason,omitempty"`
	Failures   []string  `json:"failures,omitempty"`
	Runs       []jsonRun `json:"runs"`
}

type jsonTable struct {
	ID       string    `json:"id"`
	Title    string    `json:"title"`
	Workload string    `json:"workload"`
	Client   string    `json:"client"`
	Rows     []jsonRow `json:"rows"`
}

func opt(v float64, ok bool) *float64 {
	if !ok {
		return nil
	}
	return &v
}

// writeJSON writes every sample, for whoever wants to compute more than
// the report shows.
func (s *suite) writeJSON(w io.Writer) error {
	var limits []map[string]any
	for _, l := range s.limits {
		limits = append(limits, map[string]any{
			"disk_write_mb_per_s": l.diskMBs, "disk_how": l.diskHow, "disk_error": l.diskErr,
			"fdatasync_per_s": l.syncRate, "fdatasync_how": l.syncHow, "fdatasync_error": l.syncErr,
			"loopback_tcp_mb_per_s": l.tcpMBs, "loopback_tcp_error": l.tcpErr, "load_after": l.loadAfter,
		})
	}
	var tables []jsonTable
	for _, t := range s.tables {
		jt := jsonTable{ID: t.id, Title: t.title, Workload: t.w.describe(), Client: t.client}
		for _, r := range t.orderedRows() {
			status, reason := r.state()
			if status == "" {
				status = "measured"
			}
			jr := jsonRow{Peer: r.peer.spec.name, Durability: r.peer.durability(), Status: status, Reason: reason,
				Failures: r.fails, Runs: jsonRuns(r)}
			jt.Rows = append(jt.Rows, jr)
		}
		tables = append(tables, jt)
	}
	doc := map[string]any{
		"date": s.machine.date, "machine": s.machine.String(), "load_at_start": s.machine.loadStart,
		"command": s.commandLine(), "matrix": s.cfg.matrix, "runs": s.cfg.runs,
		"run_duration_s": s.cfg.duration.Seconds(), "open_loop_rate": s.rate, "open_loop_rate_source": s.rateSource,
		"limits": limits, "tables": tables, "replication": s.replicationJSON(),
		"mirroring": s.mirroringJSON(), "streams": s.streamsJSON(),
	}
	if p := s.profile; p != nil {
		var top []map[string]any
		for _, e := range p.top {
			top = append(top, map[string]any{"function": e.name, "flat_s": e.flat.Seconds(), "cum_s": e.cum.Seconds()})
		}
		doc["profile"] = map[string]any{"peer": p.peer, "file": p.file, "seconds": p.seconds,
			"sampled_s": p.total.Seconds(), "top": top, "error": p.err}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// jsonRuns is every sample of a row.
func jsonRuns(r *row) []jsonRun {
	runs := []jsonRun{}
	for _, smp := range r.samples {
		runs = append(runs, jsonRun{
			Round: smp.round, Records: smp.records, Bytes: smp.bytes, ElapsedS: smp.elapsed.Seconds(),
			RecordsPerS: must(metricRate(smp)), MBPerS: must(metricMBs(smp)), PlannedRate: smp.rate,
			LatencyP50: opt(metricLatency(50)(smp)), LatencyP99: opt(metricLatency(99)(smp)),
			LatencyP999: opt(metricLatency(99.9)(smp)), LatencyMax: opt(metricLatency(100)(smp)),
			BrokerCPUS: opt(smp.cpu.Seconds(), smp.cpuOK), BrokerRSS: opt(metricRSS(smp)),
			BrokerSysS: opt(metricSysCPU(smp)), Syscalls: opt(smp.syscalls, smp.syscallsOK),
			Requests:     opt(metricRequests(smp)),
			SendfileByte: opt(smp.sendfile, smp.fetchOK), CopiedBytes: opt(smp.copied, smp.fetchOK),
			ClientCPUS: opt(metricClientCPU(smp)), KernelByCause: kernelByCause(smp),
		})
	}
	return runs
}

func must(v float64, ok bool) float64 {
	if !ok {
		return 0
	}
	return v
}

// README markers around the generated section; what lies between them is
// replaced by every `ringlog bench -readme`.
const (
	readmeBegin = "<!-- ringlog bench: begin. Generated by `ringlog bench -readme README.md`; edits here are overwritten. -->"
	readmeEnd   = "<!-- ringlog bench: end -->"
)

// updateReadme replaces the README's generated Performance section (or
// adds one before "## Layout", else at the end).
func (s *suite) updateReadme(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("bench: -readme: %w", err)
	}
	rel, err := filepath.Rel(filepath.Dir(path), s.cfg.outDir)
	if err != nil {
		rel = s.cfg.outDir
	}
	rel = filepath.ToSlash(rel)
	var sec bytes.Buffer
	s.writeReadmeSection(&sec, rel)
	text := string(b)
	i, j := strings.Index(text, readmeBegin), strings.Index(text, readmeEnd)
	switch {
	case i >= 0 && j > i:
		text = text[:i] + sec.String() + text[j+len(readmeEnd):]
	case strings.Contains(text, "\n## Layout"):
		k := strings.Index(text, "\n## Layout")
		text = text[:k+1] + "## Performance\n\n" + sec.String() + "\n\n" + text[k+1:]
	default:
		text = strings.TrimRight(text, "\n") + "\n\n## Performance\n\n" + sec.String() + "\n"
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

func (s *suite) writeReadmeSection(w io.Writer, rel string) {
	m := s.machine
	kind := "a standard run"
	switch s.cfg.matrix {
	case "quick":
		kind = "a quick run (-quick: one run per figure, short bounds)"
	case "full":
		kind = "a full-matrix run"
	case "net":
		kind = "a run of issue 13's workloads only (-matrix net)"
	}
	fmt.Fprintf(w, "%s\n", readmeBegin)
	fmt.Fprintf(w, "Measured %s UTC on %s, by %s: `%s`. ", m.date.Format("2006-01-02 15:04"), m.String(), kind, s.commandLine())
	fmt.Fprintf(w, "Every peer was started by the suite and measured in that same run, with the same workload. "+
		"The machine was shared with other work (load average %s at the start) and clients and brokers share its "+
		"cores: read the ratios, not the absolute figures. To reproduce: `scripts/bench.sh` (installs kcat, fio, "+
		"Java and Maven for Apache Kafka, builds ringlog, runs the standard matrix), or `ringlog bench` with the flags above.\n\n", m.loadStart)
	// The report's sections, one heading level down under Performance.
	var body bytes.Buffer
	s.writeTargets(&body)
	s.writeSummary(&body)
	if t := s.findTable(partProduce, func(w workload) bool { return w.main }); t != nil {
		s.writeTable(&body, t, s.tableNumber(t))
	}
	for _, l := range strings.SplitAfter(body.String(), "\n") {
		if strings.HasPrefix(l, "#") {
			l = "#" + l
		}
		io.WriteString(w, l)
	}
	fmt.Fprintf(w, "![throughput](%s/%s)\n\n![latency](%s/%s)\n\n", rel, plotThroughput, rel, plotLatency)
	fmt.Fprintf(w, "Every table, the peers' exact settings, this machine's disk and network limits, the note on "+
		"sendfile over loopback and the broker's CPU profile: [%s/%s](%s/%s).\n", rel, reportFile, rel, reportFile)
	fmt.Fprint(w, readmeEnd)
}
