package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// column is one figure of a table.
type column struct {
	head string
	m    metric
	f    func(float64) string
}

// ratioColumn is a peer's median of a figure against a reference peer's:
// every table shows each against ringlog io_uring and against Apache
// Kafka.
type ratioColumn struct {
	what string // records/s, CPU/M, p99
	m    metric
}

// references are the peers every ratio is taken against, with the words
// of the columns' heads.
var references = []struct{ key, short string }{{referencePeer, "io_uring"}, {kafkaPeer, "Kafka"}}

var (
	colRate     = column{"records/s", metricRate, fmtCount}
	colMBs      = column{"MB/s", metricMBs, fmtMBs}
	colP50      = column{"p50", metricLatency(50), fmtMicros}
	colP99      = column{"p99", metricLatency(99), fmtMicros}
	colP999     = column{"p99.9", metricLatency(99.9), fmtMicros}
	colMax      = column{"max", metricLatency(100), fmtMicros}
	colCPUPerM  = column{"broker CPU s / M records", metricCPUPerM, fmtSeconds}
	colCPUPerGB = column{"broker CPU s / GB", metricCPUPerGB, fmtSeconds}
	colRSS      = column{"broker peak RSS", metricRSS, fmtMiB}
	colSendfile = column{"sent by sendfile", metricSendfile, fmtPct}
)

func (t *table) columns() []column {
	switch t.kind {
	case tableConsume:
		return []column{colRate, colMBs, colCPUPerM, colCPUPerGB, colRSS, colSendfile}
	case tableLatency:
		return []column{colRate, colP50, colP99, colP999, colMax, colCPUPerM, colRSS}
	}
	return []column{colRate, colMBs, colP50, colP99, colP999, colMax, colCPUPerM, colCPUPerGB, colRSS}
}

func (t *table) ratios() []ratioColumn {
	switch t.kind {
	case tableConsume:
		return []ratioColumn{{"records/s", metricRate}, {"CPU/GB", metricCPUPerGB}}
	case tableLatency:
		return []ratioColumn{{"p99", metricLatency(99)}, {"p99.9", metricLatency(99.9)}}
	}
	return []ratioColumn{{"records/s", metricRate}, {"CPU/M", metricCPUPerM}}
}

// headline is the one ratio a table contributes to the summary: throughput
// for throughput tables, p99 for latency tables.
func (t *table) headline() ratioColumn { return t.ratios()[0] }

// refRowOf is reference peer key's row of t: its flush always instance's
// in the tables of flush always workloads.
func (t *table) refRowOf(key string) *row {
	if t.w.fsync {
		key += "+fsync"
	}
	return t.rows[key]
}

// ratio is peer row r's median of m over that of the row of reference
// peer ref in the same table.
func (t *table) ratio(r *row, m metric, ref string) (float64, bool) {
	a, ok1 := r.spread(m)
	b, ok2 := t.refRowOf(ref).spread(m)
	if !ok1 || !ok2 || b.med == 0 {
		return 0, false
	}
	return a.med / b.med, true
}

// heading is the table's title with its whole workload and client.
func (t *table) heading(s *suite) string {
	h := fmt.Sprintf("%s — %s — client %s", t.title, t.w.describe(), t.client)
	switch {
	case t.w.rate > 0:
		h += fmt.Sprintf(" — at %s records/s (fixed: the rate of the latency targets against Apache Kafka and of issue 13's)", fmtCount(t.w.rate))
	case t.w.kind == kindLatency || t.w.kind == kindE2E:
		h += fmt.Sprintf(" — at %s records/s (%s)", fmtCount(s.rate), s.rateSource)
	}
	return h
}

// orderedRows returns the table's rows in peer order, one per peer spec.
func (t *table) orderedRows() []*row {
	var rs []*row
	for _, spec := range matrixSpecs() {
		id := spec.key
		if t.w.fsync {
			id += "+fsync"
		}
		r := t.rows[id]
		if r == nil {
			p := &peer{spec: spec, fsync: t.w.fsync}
			r = &row{peer: p, status: statusSkipped, reason: "not run"}
		}
		rs = append(rs, r)
	}
	return rs
}

// cell prints a figure as its median, with the range of the runs beneath
// when there was more than one.
func cell(sp spread, f func(float64) string) string {
	if sp.n <= 1 || f(sp.min) == f(sp.max) {
		return f(sp.med)
	}
	return fmt.Sprintf("%s<br><sub>%s–%s</sub>", f(sp.med), f(sp.min), f(sp.max))
}

// writeTable prints one table in markdown, a row per peer, unavailable
// rows with their reason.
func (s *suite) writeTable(w io.Writer, t *table, n int) {
	fmt.Fprintf(w, "### %d. %s\n\n", n, mdEscape(t.heading(s)))
	if t.note != "" {
		fmt.Fprintf(w, "%s\n\n", t.note)
	}
	cols, rats := t.columns(), t.ratios()
	fmt.Fprint(w, "| peer | durability |")
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c.head)
	}
	for _, ref := range references {
		for _, r := range rats {
			fmt.Fprintf(w, " %s ÷ %s |", r.what, ref.short)
		}
	}
	fmt.Fprint(w, "\n|---|---|")
	fmt.Fprint(w, strings.Repeat("--:|", len(cols)+len(references)*len(rats)))
	fmt.Fprintln(w)
	var notes []string
	for _, r := range t.orderedRows() {
		fmt.Fprintf(w, "| %s | %s |", r.peer.spec.name, r.peer.durability())
		var ratios []string
		for _, ref := range references {
			for _, rc := range rats {
				cell := "—"
				if v, ok := t.ratio(r, rc.m, ref.key); ok {
					cell = fmtRatio(v)
				}
				ratios = append(ratios, cell)
			}
		}
		rowCells(w, r, cols, ratios...)
		if status, _ := r.state(); status != "" {
			continue
		}
		if len(r.fails) > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d of %d runs failed (%s)", r.peer.spec.name, len(r.fails),
				len(r.fails)+len(r.samples), mdEscape(r.fails[0])))
		}
	}
	fmt.Fprintln(w)
	for _, n := range notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
	}
}

// writeReport prints the whole markdown report.
func (s *suite) writeReport(w io.Writer) {
	m := s.machine
	fmt.Fprintf(w, "# ringlog benchmark report\n\n")
	fmt.Fprintf(w, "Measured %s UTC on **%s**. Load average (1, 5, 15 min) at the start: %s.\n\n",
		m.date.Format("2006-01-02 15:04"), m.String(), m.loadStart)
	fmt.Fprintf(w, "Command: `%s`. %s\n\n", s.commandLine(), s.modeText())
	s.writeReading(w)
	s.writePeers(w)
	if s.measuresLimits() {
		s.writeLimits(w)
	}
	s.writeTargets(w)
	if len(s.tables) > 0 {
		s.writeSummary(w)
		fmt.Fprintf(w, "## Results\n\n")
		for i, t := range s.tables {
			s.writeTable(w, t, i+1)
		}
	}
	s.writeReplication(w)
	s.writeMirroring(w)
	s.writeStreams(w)
	if len(s.tables) > 0 {
		s.writeSendfile(w)
		s.writeNetPaths(w)
		s.writeProfile(w)
		fmt.Fprintf(w, "## Plots\n\n![throughput](%s)\n\n![latency](%s)\n\n", plotThroughput, plotLatency)
	}
}

// commandLine is the command as it was given.
func (s *suite) commandLine() string {
	return strings.TrimSpace("ringlog bench " + strings.Join(s.cfg.args, " "))
}

func (s *suite) modeText() string {
	runs := fmt.Sprintf("%d runs of every measurement: each figure is the median, with the lowest and highest run beneath it", s.cfg.runs)
	if s.cfg.runs == 1 {
		runs = "One run of every measurement (no spread: run without -quick for medians of 3)"
	}
	part := "Matrix " + s.cfg.matrix
	switch s.cfg.only {
	case onlyMatrix:
		part += " (-only matrix: no Replication, Mirroring or Streams section)"
	case onlyReplication:
		part = "The Replication section alone (-only replication)"
	case onlyMirror:
		part = "The Mirroring section alone (-only mirror)"
	case onlyStreams:
		part = "The Streams section alone (-only streams)"
	}
	return fmt.Sprintf("%s. %s. Each run is bounded by %v of sending and by %s records or %s of values; "+
		"consume runs read %s written just before.", part, runs, s.cfg.duration,
		fmtCount(float64(s.cfg.maxRecords)), fmtBytes(s.cfg.maxBytes), fmtBytes(s.cfg.fillBytes))
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

func (s *suite) writeReading(w io.Writer) {
	fmt.Fprint(w, `## How to read this

- Every peer runs as a process of its own on this machine, started and stopped by the suite, and gets
  the same workload: the same records (text-like values that zstd shrinks to about a third, each
  carrying a 16-byte time stamp), the same producers, consumers, rates and bounds. Clients run in the
  suite's own process, over 127.0.0.1.
- **records/s** and **MB/s** count record values (10^6 bytes) acknowledged (produce) or received
  (consume); for acks=0 a record counts once the client has sent it.
- **p50 / p99 / p99.9 / max** come from an HdrHistogram of every record (1 µs to 5 min, 3 significant
  digits). In open-loop tables the records' send times are planned before the run at a fixed rate, and
  latency is measured from the planned time: a stall of the peer (or of the client) delays every record
  behind it and each of them counts it (no coordinated omission).
- **broker CPU** is user + system time of the peer's process from /proc/<pid>/stat over the run, per
  million records and per GB of values; the clients' CPU is not in it. **peak RSS** is the process's
  VmHWM, reset before each run. For the 3-broker cluster both are sums over its three processes (the
  peak RSS a sum of each process's peak). Apache Kafka's are its JVM's: heap, JIT compiler and
  garbage collector threads included, as a user of Kafka pays for them.
- **sent by sendfile** is the share of fetched record bytes ringlog sent with sendfile (its
  ringlog_fetch_sendfile_bytes_total and ringlog_fetch_copied_bytes_total counters). Apache Kafka
  sends with sendfile too (FileChannel.transferTo on a plaintext listener) but counts nothing the
  suite reads; kfake and NATS copy from user space.
- **÷ io_uring** is a peer's median over ringlog io_uring's in the same table, **÷ Kafka** over Apache
  Kafka's (its flush always instance's in the flush always tables): above 1 is faster for records/s,
  and costlier (or slower) for CPU and latency.
- Every run starts on a fresh topic, after the data file system was synced and the clients' memory
  collected, so that no run pays for the one before; the peers' order rotates from round to round.
- The machine is shared and noisy, and clients and brokers share its cores: quote ratios from one run,
  never absolute figures across runs.

`)
}

func (s *suite) writePeers(w io.Writer) {
	fmt.Fprintf(w, "## Peers\n\n| peer | durability | settings |\n|---|---|---|\n")
	for _, p := range s.sortedPeers() {
		settings := mdEscapeLong(p.settings)
		switch {
		case !s.selected(p):
			settings = "*unavailable: not selected (-peers)*"
		case p.unavailableReason() != "":
			settings = "*unavailable: " + mdEscape(p.unavailableReason()) + "*"
		case p.err != nil:
			settings = "*unavailable: " + mdEscape(p.err.Error()) + "*"
		case p.settings == "" && p.spec.cluster && s.cfg.quick:
			settings = "*skipped: " + quickClusterReason + "*"
		case p.settings == "" && p.spec.kafkaNodes > 0 && s.cfg.quick:
			settings = "*skipped: " + quickKafkaReason + "*"
		case p.settings == "" && p.spec.saslSSL:
			settings = "*skipped: " + saslSSLReason + "*"
		case p.settings == "" && p.spec.key == acl100Peer && s.cfg.quick:
			settings = "*skipped: " + quickACLReason + "*"
		case p.settings == "" && p.spec.acls > 0:
			settings = "*skipped: " + aclReason + "*"
		case p.settings == "":
			settings = "*skipped: not started (no time left)*"
		}
		name := p.spec.name
		if p.role != "" {
			name += " (" + p.role + ")"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", name, p.durability(), settings)
	}
	fmt.Fprintf(w, "\nClients: %s. kcat: %s. NATS: %s.\n\n", kgoSettings+" (franz-go "+moduleVersion("github.com/twmb/franz-go")+")",
		s.kcatText(), natsSettings)
}

func (s *suite) kcatText() string {
	if s.kcat == nil {
		return "*unavailable: " + s.noKcat + "*"
	}
	return s.kcat.version + ", " + kcatSettings
}

func (s *suite) writeLimits(w io.Writer) {
	fmt.Fprintf(w, "## This machine's limits, measured in the same run\n\n")
	fmt.Fprintf(w, "| limit | median | how |\n|---|--:|---|\n")
	get := func(f func(l limitsSample) (float64, string)) (spread, string) {
		var vs []float64
		errText := ""
		for _, l := range s.limits {
			v, e := f(l)
			if e != "" {
				errText = e
				continue
			}
			vs = append(vs, v)
		}
		sp, ok := spreadOf(vs)
		if !ok {
			return spread{}, errText
		}
		return sp, ""
	}
	how := func(f func(l limitsSample) string) string {
		if len(s.limits) == 0 {
			return ""
		}
		return f(s.limits[0])
	}
	for _, lim := range []struct {
		name string
		f    func(l limitsSample) (float64, string)
		fmt  func(float64) string
		how  string
	}{
		{"sequential disk write (MB/s)", func(l limitsSample) (float64, string) { return l.diskMBs, l.diskErr }, fmtMBs,
			how(func(l limitsSample) string { return l.diskHow })},
		{"fdatasync rate (syncs/s)", func(l limitsSample) (float64, string) { return l.syncRate, l.syncErr }, fmtCount,
			how(func(l limitsSample) string { return l.syncHow })},
		{"loopback TCP, one stream (MB/s)", func(l limitsSample) (float64, string) { return l.tcpMBs, l.tcpErr }, fmtMBs,
			"256 KiB writes through one 127.0.0.1 connection, in this process"},
	} {
		sp, e := get(lim.f)
		if e != "" && sp.n == 0 {
			fmt.Fprintf(w, "| %s | *unavailable: %s* | %s |\n", lim.name, mdEscape(e), lim.how)
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", lim.name, cell(sp, lim.fmt), lim.how)
	}
	fmt.Fprintln(w)
}

// writeSummary prints every table's headline ratio per peer, against
// ringlog io_uring and against Apache Kafka.
func (s *suite) writeSummary(w io.Writer) {
	for _, ref := range references {
		s.writeSummaryAgainst(w, ref.key)
	}
}

// writeSummaryAgainst prints every table's headline ratio of every other
// peer against reference peer key, or, when that peer has no figure in
// any table, why.
func (s *suite) writeSummaryAgainst(w io.Writer, key string) {
	spec, _ := peerSpecByKey(key)
	fmt.Fprintf(w, "## Every peer against %s\n\n", spec.name)
	measured := false
	var why string
	for _, t := range s.tables {
		r := t.refRowOf(key)
		measured = measured || (r != nil && len(r.samples) > 0)
		if st, reason := r.state(); st != "" && why == "" {
			why = st + ": " + reason
		}
	}
	if !measured {
		if why == "" {
			why = "not run"
		}
		fmt.Fprintf(w, "*%s was not measured in this run (%s).*\n\n", spec.name, mdEscape(why))
		return
	}
	fmt.Fprintf(w, "Medians over %s's in the same table (throughput tables: records/s, above 1 is faster; "+
		"latency tables: p99, above 1 is slower).\n\n", spec.name)
	var others []peerSpec
	for _, p := range matrixSpecs() {
		if p.key != key {
			others = append(others, p)
		}
	}
	fmt.Fprint(w, "| # | measurement | ratio of |")
	for _, p := range others {
		fmt.Fprintf(w, " %s |", p.name)
	}
	fmt.Fprint(w, "\n|--:|---|---|"+strings.Repeat("--:|", len(others))+"\n")
	for i, t := range s.tables {
		h := t.headline()
		fmt.Fprintf(w, "| %d | %s | %s |", i+1, mdEscape(t.short()), h.what)
		for _, r := range t.orderedRows() {
			if r.peer.spec.key == key {
				continue
			}
			if v, ok := t.ratio(r, h.m, key); ok {
				fmt.Fprintf(w, " %s |", fmtRatio(v))
			} else if st, _ := r.state(); st != "" {
				fmt.Fprintf(w, " %s |", st)
			} else {
				fmt.Fprint(w, " — |")
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// plotLabel names a table in a few words: the measurement, and the
// workload's settings where they differ from the base workload's.
func (t *table) plotLabel() string {
	name := map[string]string{
		partWarmKgo: "consume, cached", partWarmKcat: "consume, cached", partColdKgo: "consume, cold",
		partWarmKgoRC: "consume read_committed, cached",
	}[t.part]
	if name == "" {
		name = map[workloadKind]string{kindProduce: "produce", kindLatency: "produce, open loop",
			kindE2E: "end to end", kindBoth: "produce+consume"}[t.w.kind]
		if t.w.kind == kindBoth {
			name += ": " + t.part + "rs"
		}
	}
	w := t.w
	var diffs []string
	if w.size != 1024 {
		diffs = append(diffs, sizeName(w.size))
	}
	if w.partitions != 16 {
		diffs = append(diffs, fmt.Sprintf("%dp", w.partitions))
	}
	if w.acks != 1 {
		diffs = append(diffs, "acks="+acksName(w.acks))
	}
	if w.compression != "none" {
		diffs = append(diffs, w.compression)
	}
	if w.fsync {
		diffs = append(diffs, "fsync")
	}
	if w.rate > 0 {
		diffs = append(diffs, "at "+fmtCount(w.rate)+"/s")
	}
	if w.txn > 0 {
		diffs = append(diffs, fmt.Sprintf("txn %d", w.txn))
	}
	if w.netPaths && w.kind == kindProduce {
		diffs = append(diffs, fmt.Sprintf("%d producer(s)", w.producers))
	}
	if len(diffs) > 0 {
		name += " " + strings.Join(diffs, " ")
	}
	return name + " (" + strings.Fields(t.client)[0] + ")"
}

// short names a table in one line for the summary.
func (t *table) short() string {
	w := t.w
	s := fmt.Sprintf("%s %s, %dp, acks=%s", t.title, sizeName(w.size), w.partitions, acksName(w.acks))
	if w.compression != "none" {
		s += ", " + w.compression
	}
	if w.rate > 0 {
		s += ", at " + fmtCount(w.rate) + " records/s"
	}
	if w.txn > 0 {
		s += fmt.Sprintf(", %d records per transaction", w.txn)
	}
	if w.netPaths {
		s += fmt.Sprintf(", %d producers", w.producers)
	}
	return s + " (" + strings.Fields(t.client)[0] + ")"
}

// sortedPeers lists the peers the suite made, in report order: by peer
// spec, then durability, then fetch slots.
func (s *suite) sortedPeers() []*peer {
	var ps []*peer
	for _, p := range s.peers {
		ps = append(ps, p)
	}
	idx := func(p *peer) int {
		return slices.IndexFunc(peerSpecs, func(sp peerSpec) bool { return sp.key == p.spec.key })
	}
	slices.SortFunc(ps, func(a, b *peer) int {
		switch {
		case idx(a) != idx(b):
			return idx(a) - idx(b)
		case a.fsync != b.fsync:
			return map[bool]int{true: 1, false: -1}[a.fsync]
		case a.role != b.role:
			return strings.Compare(a.role, b.role)
		}
		return a.slots - b.slots
	})
	return ps
}

// rowCells prints a row's figures and the extra cells after them, or its
// status across all of those columns.
func rowCells(w io.Writer, r *row, cols []column, extra ...string) {
	if status, reason := r.state(); status != "" {
		fmt.Fprintf(w, " *%s: %s* |", status, mdEscape(reason))
		fmt.Fprint(w, strings.Repeat(" — |", len(cols)+len(extra)-1))
		fmt.Fprintln(w)
		return
	}
	for _, c := range cols {
		if sp, ok := r.spread(c.m); ok {
			fmt.Fprintf(w, " %s |", cell(sp, c.f))
		} else {
			fmt.Fprint(w, " — |")
		}
	}
	for _, e := range extra {
		fmt.Fprintf(w, " %s |", e)
	}
	fmt.Fprintln(w)
}
