package bench

import (
	"fmt"
	"io"
	"runtime"
	"strings"
)

// writeMirroring prints the Mirroring section.
func (s *suite) writeMirroring(w io.Writer) {
	if !s.writeSectionStart(w, "Mirroring", s.mirroringSelected()) {
		return
	}
	fmt.Fprintf(w, "`ringlog mirror` (issue 16; docs/mirror.md) copies a topic of 16 partitions from ringlog io_uring "+
		"(the matrix's broker) to a second ringlog io_uring process (the mirror target in Peers), as a process of the "+
		"benchmarked binary, in the same rounds as the rest of the suite. Each run fills a fresh topic of the source with "+
		"%s records of 1 KiB (-fill, at least 128 MiB; kgo, acks=1, no compression), then starts the mirror. What each row measures:\n\n"+
		"- *plain kgo producer*: the yardstick. One kgo producer, idempotent with acks=all (as the mirror's producers are), "+
		"1 KiB records to 16 partitions of a fresh topic of the same target, closed loop for %v; timed from its first "+
		"record sent to its last acknowledged.\n"+
		"- *exactly once*: the mirror's records and its source offsets committed in transactions on the target "+
		"(the producer idempotent, acks=all); a transaction spans several polls of the source, up to 100,000 records, "+
		"64 MiB or 200 ms, and ends early once the source has nothing more. Timed from its first commit to the one "+
		"that completes the count, by the mirror's own ringlog_mirror_last_commit_timestamp_seconds read with its "+
		"ringlog_mirror_records_total (records committed on the target; both read every %v); the rate counts the "+
		"records committed after the first commit. Left out: the mirror's start (offsets read, producers initialised) "+
		"and its first transaction; the producer's start-up (metadata, producer id) is in its time.\n"+
		"- *at least once* (-at-least-once): the same, with an idempotent acks=all producer and no transactions; the "+
		"source offsets written every 10 s.\n\n"+
		"Broker CPU is the target's and mirror CPU the mirror process's, both over the timed window, per million records "+
		"counted. The brokers, the mirror and the suite's clients share this machine's %d cores: a shared machine's figures "+
		"are noisy, read the ratios of one run. `ringlog bench -only mirror` runs this section alone.\n\n",
		fmtCount(float64(s.mirrorRecords())), s.cfg.duration, mirrorScrapeEvery, runtime.NumCPU())
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
	writeTargetLine(w, s.mirrorRatio(), "records/s")
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
