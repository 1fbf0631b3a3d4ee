package bench

import (
	"fmt"
	"io"
	"runtime"
	"strings"
)

// writeMirroring prints the Mirroring section.
func (s *suite) writeMirroring(w io.Writer) {
	fmt.Fprintf(w, "## Mirroring\n\n")
	if !s.mirroringSelected() {
		fmt.Fprintf(w, "*Not run (-only %s).*\n\n", s.cfg.only)
		return
	}
	fmt.Fprintf(w, "`ringlog mirror` (issue 16; docs/mirror.md) copies a topic of 16 partitions from ringlog io_uring "+
		"(the matrix's broker) to a second ringlog io_uring process (the mirror target in Peers), as a process of the "+
		"benchmarked binary, in the same rounds as the rest of the suite. Each run fills a fresh topic of the source with "+
		"%s records of 1 KiB (-fill; kgo, acks=1), then starts the mirror and times it from its \"flow running\" log "+
		"line (remote topic created, producer initialised, committed offsets read) to the moment its "+
		"ringlog_mirror_records_total (records committed on the target, read every %v) counts them all. Exactly once "+
		"writes each poll of the source (up to 5,000 records) and its source offsets in one transaction on the target; "+
		"at least once (-at-least-once) uses an idempotent producer and writes the offsets every 10 s. The plain kgo "+
		"producer row is the yardstick: one idempotent acks=all kgo producer (the mirror writes through one client) "+
		"sending 1 KiB records to 16 partitions of the same target, closed loop, for %v. Broker CPU is the target's; "+
		"mirror CPU the mirror process's. The brokers, the mirror and the suite's clients share this machine's %d cores: "+
		"a shared machine's figures are noisy, read the ratios of one run. `ringlog bench -only mirror` runs this "+
		"section alone.\n\n", fmtCount(float64(s.mirrorRecords())), mirrorScrapeEvery, s.cfg.duration, runtime.NumCPU())
	cols := []column{colRate, colMBs, colCPUPerM}
	fmt.Fprint(w, "| setup |")
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c.head)
	}
	fmt.Fprint(w, " mirror CPU s / M records | records/s ÷ plain kgo producer |\n|---|"+strings.Repeat("--:|", len(cols)+2)+"\n")
	plain := s.mirr.run("kgo-producer")
	for _, r := range s.mirr.runs {
		cpu, ratio := "—", "—"
		if sp, ok := spreadOf(r.mirrorCPU); ok {
			cpu = cell(sp, fmtSeconds)
		} else if r.mode == "" {
			cpu = "no mirror"
		}
		x, ok1 := r.row.spread(metricRate)
		y, ok2 := plain.row.spread(metricRate)
		if ok1 && ok2 && y.med > 0 {
			ratio = fmtRatio(x.med / y.med)
		}
		fmt.Fprintf(w, "| %s |", r.name)
		rowCells(w, r.row, cols, cpu, ratio)
	}
	fmt.Fprintln(w)
	n := 0
	for _, r := range s.mirr.runs {
		if len(r.row.fails) > 0 && len(r.row.samples) > 0 {
			fmt.Fprintf(w, "- %s: %d of %d runs failed (%s)\n", r.name, len(r.row.fails),
				len(r.row.fails)+len(r.row.samples), mdEscape(r.row.fails[0]))
			n++
		}
	}
	if n > 0 {
		fmt.Fprintln(w)
	}
	k := s.mirrorRatio()
	switch {
	case k.known:
		verdict := map[bool]string{true: "met", false: "**not met**"}[k.met()]
		fmt.Fprintf(w, "Target: %s. Measured %s (%s of %s records/s): %s.\n\n", k.target, fmtRatio(k.ratio),
			fmtCount(k.ours), fmtCount(k.theirs), verdict)
	case k.missing != "":
		fmt.Fprintf(w, "Target: %s. %s.\n\n", k.target, strings.ToUpper(k.missing[:1])+k.missing[1:])
	default:
		fmt.Fprintf(w, "Target: %s. Not measured in this run.\n\n", k.target)
	}
}

// mirroringJSON is the section's runs for results.json.
func (s *suite) mirroringJSON() []map[string]any {
	var out []map[string]any
	for _, r := range s.mirr.runs {
		status, reason := r.row.state()
		if status == "" {
			status = "measured"
		}
		out = append(out, map[string]any{"id": r.id, "name": r.name, "mode": r.mode, "status": status, "reason": reason,
			"failures": r.row.fails, "runs": jsonRuns(r.row), "mirror_cpu_s_per_m_records": r.mirrorCPU})
	}
	return out
}
