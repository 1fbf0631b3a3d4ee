package bench

import (
	"fmt"
	"io"
	"runtime"
	"strings"
)

// writeStreams prints the Streams section.
func (s *suite) writeStreams(w io.Writer) {
	if !s.writeSectionStart(w, "Streams", s.streamsSelected()) {
		return
	}
	fmt.Fprintf(w, "A word count (issue 17) over %s lines of %d words (drawn from %s words; a topic of %d partitions "+
		"on ringlog io_uring, written once for the section), in this process, three ways in the same rounds: the streams "+
		"library (examples/wordcount's topology: split, repartition by word, count in a pebble store with its changelog, "+
		"the count updates to an output topic, with Kafka's 10 MiB record cache, so one update per word per commit) at least once (commit each %v) and exactly once (one transaction each %v, "+
		"Kafka Streams' default), and the same job written by hand with kgo: one consumer-group client that counts in a map, "+
		"produces every update and each %v flushes and commits its offsets (its counts are not recoverable; the "+
		"application's are). Both produce uncompressed, the library's default as Kafka Streams' (kgo's own is snappy). Each run reads the input from the start into a fresh output topic and is timed from the "+
		"first line processed (a fresh group's first rebalance waits group.initial.rebalance.delay.ms) to the commit after the last line's last update; its output must then hold one update per "+
		"word (the application's: at most that). records/s counts input lines; broker CPU is ringlog io_uring's. The broker, the applications and the "+
		"suite share this machine's %d cores: a shared machine's figures are noisy, read the ratios of one run. "+
		"`ringlog bench -only streams` runs this section alone.\n\n",
		fmtCount(float64(s.streamsRecords())), streamsWordsPerLine, fmtCount(streamsVocabulary), streamsPartitions,
		streamsCommitALO, streamsCommitEOS, streamsCommitALO, runtime.NumCPU())
	cols := []column{colRate, colMBs, colCPUPerM}
	fmt.Fprint(w, "| setup |")
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c.head)
	}
	fmt.Fprint(w, " ÷ hand-written | ÷ at least once |\n|---|"+strings.Repeat("--:|", len(cols)+2)+"\n")
	ratio := func(a, b *streamsRun) string {
		x, ok1 := a.row.spread(metricRate)
		y, ok2 := b.row.spread(metricRate)
		if ok1 && ok2 && y.med > 0 {
			return fmtRatio(x.med / y.med)
		}
		return "—"
	}
	hand, alo := s.strm.run("kgo-hand-written"), s.strm.run("streams-at-least-once")
	for _, r := range s.strm.runs {
		fmt.Fprintf(w, "| %s |", r.name)
		rowCells(w, r.row, cols, ratio(r, hand), ratio(r, alo))
	}
	fmt.Fprintln(w)
	n := 0
	for _, r := range s.strm.runs {
		if len(r.row.fails) > 0 && len(r.row.samples) > 0 {
			fmt.Fprintf(w, "- %s: %d of %d runs failed (%s)\n", r.name, len(r.row.fails),
				len(r.row.fails)+len(r.row.samples), mdEscape(r.row.fails[0]))
			n++
		}
	}
	if n > 0 {
		fmt.Fprintln(w)
	}
	for _, k := range s.streamsTargets() {
		writeTargetLine(w, k, "lines/s")
	}
}

// streamsJSON is the section's runs for results.json.
func (s *suite) streamsJSON() []map[string]any {
	var out []map[string]any
	for _, r := range s.strm.runs {
		status, reason := r.row.state()
		if status == "" {
			status = "measured"
		}
		out = append(out, map[string]any{"id": r.id, "name": r.name, "status": status, "reason": reason,
			"failures": r.row.fails, "runs": jsonRuns(r.row), "lines": s.streamsRecords(),
			"words_per_line": streamsWordsPerLine})
	}
	return out
}
