package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// findTable returns the first table of a workload matching pred and part.
func (s *suite) findTable(part string, pred func(w workload) bool) *table {
	for _, t := range s.tables {
		if t.part == part && pred(t.w) {
			return t
		}
	}
	return nil
}

// baseLike is true for the base workload's settings (1 KiB, 16
// partitions, acks=1, no compression, kgo, the suite's open-loop rate)
// with the given kind and size.
func baseLike(kind workloadKind, size int, fsync bool) func(w workload) bool {
	return fixedRateLike(kind, size, fsync, 0)
}

// fixedRateLike is baseLike with an open-loop rate of the workload's own
// (0: the suite's).
func fixedRateLike(kind workloadKind, size int, fsync bool, rate float64) func(w workload) bool {
	return func(w workload) bool {
		return w.kind == kind && w.size == size && w.partitions == 16 && w.acks == 1 &&
			w.compression == "none" && w.client == "kgo" && w.fsync == fsync && w.rate == rate && w.txn == 0 && !w.netPaths
	}
}

// refRow is ringlog io_uring's row of t (its fsync instance for fsync
// workloads).
func refRow(t *table) *row {
	if t == nil {
		return nil
	}
	return t.refRowOf(referencePeer)
}

// writeTargets checks the targets against this run. They are what
// the suite must be able to show, not assertions: a miss is reported.
func (s *suite) writeTargets(w io.Writer) {
	fmt.Fprintf(w, "## Targets, checked against this run\n\n| target | measured | verdict |\n|---|---|---|\n")
	judge := func(target, measured, verdict string) {
		fmt.Fprintf(w, "| %s | %s | %s |\n", target, measured, verdict)
	}
	line := func(target, measured string, ok, known bool) {
		verdict := "not measured in this matrix"
		if known {
			verdict = map[bool]string{true: "met", false: "**not met**"}[ok]
		}
		judge(target, measured, verdict)
	}
	ratioOf := func(t *table, peerKey string, m metric) (float64, bool) {
		if t == nil || t.rows[peerKey] == nil {
			return 0, false
		}
		a, ok1 := refRow(t).spread(m)
		b, ok2 := t.rows[peerKey].spread(m)
		if !ok1 || !ok2 || b.med == 0 {
			return 0, false
		}
		return a.med / b.med, true
	}

	p100 := s.findTable(partProduce, baseLike(kindProduce, 100, false))
	if r, ok := ratioOf(p100, "kfake", metricRate); ok {
		line("produce 100 B records/s ≥ 1.0x kfake's, while persisting", fmtRatio(r), r >= 1, true)
	} else {
		line("produce 100 B records/s ≥ 1.0x kfake's, while persisting", "—", false, false)
	}
	base := s.findTable(partProduce, baseLike(kindProduce, 1024, false))
	cpuT, cpuName := p100, "100 B"
	if _, ok := ratioOf(cpuT, "kfake", metricCPUPerM); !ok {
		cpuT, cpuName = base, "1 KiB"
	}
	if r, ok := ratioOf(cpuT, "kfake", metricCPUPerM); ok {
		line("broker CPU per million records ≤ 0.5x kfake's", fmtRatio(r)+" ("+cpuName+" produce)", r <= 0.5, true)
	} else {
		line("broker CPU per million records ≤ 0.5x kfake's", "—", false, false)
	}
	tcp := s.limitMedian(func(l limitsSample) (float64, bool) { return l.tcpMBs, l.tcpErr == "" })
	if sp, ok := refRow(base).spread(metricMBs); ok && tcp > 0 {
		line(fmt.Sprintf("produce 1 KiB, %d producers, 16 partitions ≥ 0.4x loopback TCP", s.cfg.producers),
			fmt.Sprintf("%s (%s of %s MB/s)", fmtRatio(sp.med/tcp), fmtMBs(sp.med), fmtMBs(tcp)), sp.med/tcp >= 0.4, true)
	} else {
		line("produce 1 KiB, 2 producers, 16 partitions ≥ 0.4x loopback TCP", "—", false, false)
	}
	fs := s.findTable(partProduce, baseLike(kindProduce, 1024, true))
	a, ok1 := refRow(fs).spread(metricRate)
	b, ok2 := refRow(base).spread(metricRate)
	if ok1 && ok2 && b.med > 0 {
		line("flush always ≥ 0.8x flush never (records/s)", fmtRatio(a.med/b.med), a.med/b.med >= 0.8, true)
	} else {
		line("flush always ≥ 0.8x flush never (records/s)", "—", false, false)
	}
	lat := s.findTable(partProduce, baseLike(kindLatency, 1024, false))
	if sp, ok := refRow(lat).spread(metricLatency(99)); ok {
		line("produce ack p99 ≤ 2 ms at half of peak load", fmtMicros(sp.med), sp.med <= 2000, true)
	} else {
		line("produce ack p99 ≤ 2 ms at half of peak load", "—", false, false)
	}
	e2e := s.findTable(partConsume, baseLike(kindE2E, 1024, false))
	if sp, ok := refRow(e2e).spread(metricLatency(99.9)); ok {
		line("end-to-end p99.9 ≤ 5 ms at half of peak load", fmtMicros(sp.med), sp.med <= 5000, true)
	} else {
		line("end-to-end p99.9 ≤ 5 ms at half of peak load", "—", false, false)
	}
	if ratio, all, one, ok := s.rf3Ratio(); ok {
		line(s.rf3TargetText(), fmt.Sprintf("%s (%s of %s records/s; Replication section)", fmtRatio(ratio), fmtCount(all), fmtCount(one)),
			ratio >= rf3Target, true)
	} else {
		line(s.rf3TargetText(), "—", false, false)
	}
	for _, k := range append(append(append(s.kafkaTargets(), s.saslSSLTargets()...), s.txnTargets()...), s.aclTargets()...) {
		k.judge(judge, line)
	}
	s.writeNetPathsTargets(judge, line)
	s.mirrorRatio().judge(judge, line)
	for _, k := range s.streamsTargets() {
		k.judge(judge, line)
	}
	fmt.Fprint(w, "\nAll for ringlog io_uring but the RF=3 rows, which are the 3-broker cluster's, and the SASL_SSL rows, "+
		"ringlog SASL_SSL's; the six naming Apache Kafka against it in the same run (its single node, or its 3-node "+
		"cluster for RF=3); the SASL_SSL rows against ringlog io_uring's PLAINTEXT in the same run and table, kgo "+
		"clients (their SASL_SSL listener runs netpoll's portable engine, as gnet cannot terminate TLS; PLAINTEXT "+
		"runs on gnet); the transaction rows ringlog io_uring against itself in the same run (transactional against "+
		"idempotent acks=all producers, read_committed against read_uncommitted on the same transactional records); "+
		"the \"io_uring net\" rows (issue 13's) ringlog io_uring net's, the broker with its disk and its network both on "+
		"io_uring (-io uring -net uring: the path issue 13 means by io_uring), against ringlog portable and kfake in the "+
		"same tables; the authorizer rows (issue 15's) ringlog ACLs 100's and ringlog ACLs 1,000's, ringlog io_uring with its "+
		"authorizer on, against ringlog io_uring (the authorizer off) in the base produce table; the mirroring row (issue 16's) "+
		"ringlog mirror from ringlog io_uring to a second ringlog io_uring process, exactly once, against one plain kgo "+
		"producer into that target in the same round (Mirroring section); the streams rows (issue 17's) the streams library's "+
		"word count on ringlog io_uring against the same job hand-written with kgo, and exactly once against at least once, "+
		"in the same rounds (Streams section)")
	if s.rate > 0 {
		fmt.Fprintf(w, "; \"half of peak load\" is %s records/s (%s)", fmtCount(s.rate), s.rateSource)
	}
	fmt.Fprint(w, ".\n\n")
}

// ratioTarget is one target that is a ratio of two figures of the same
// run: ringlog's over Apache Kafka's, or ringlog SASL_SSL's over its
// PLAINTEXT's.
type ratioTarget struct {
	target       string
	ratio        float64
	ours, theirs float64
	format       func(float64) string
	where        string // which measurement, for the reader
	atLeast      bool   // the ratio must be at least bound; else at most
	bound        float64
	known        bool
	// missing says which figure is missing when the measurement ran
	// but a peer has no figure; "" when it is not in the matrix.
	missing string
}

// writeSectionStart prints a section's heading and, when -only left the
// section out, says so; it reports whether the section ran.
func (s *suite) writeSectionStart(w io.Writer, title string, selected bool) bool {
	fmt.Fprintf(w, "## %s\n\n", title)
	if !selected {
		fmt.Fprintf(w, "*Not run (-only %s).*\n\n", s.cfg.only)
	}
	return selected
}

// writeTargetLine prints a section's line for target k: measured (the
// ratio of ours to theirs, in unit, and the verdict), missing a figure,
// or not measured in this run.
func writeTargetLine(w io.Writer, k ratioTarget, unit string) {
	switch {
	case k.known:
		verdict := map[bool]string{true: "met", false: "**not met**"}[k.met()]
		fmt.Fprintf(w, "Target: %s. Measured %s (%s of %s %s): %s.\n\n", k.target, fmtRatio(k.ratio),
			fmtCount(k.ours), fmtCount(k.theirs), unit, verdict)
	case k.missing != "":
		fmt.Fprintf(w, "Target: %s. %s.\n\n", k.target, strings.ToUpper(k.missing[:1])+k.missing[1:])
	default:
		fmt.Fprintf(w, "Target: %s. Not measured in this run.\n\n", k.target)
	}
}

func (k ratioTarget) met() bool {
	if k.atLeast {
		return k.ratio >= k.bound
	}
	return k.ratio <= k.bound
}

// kafkaTargets computes the targets against Apache Kafka (issue 19):
// ringlog io_uring against the single Kafka node in the matrix's tables,
// the ringlog cluster against the 3-node Kafka in the Replication
// section. A target whose figures are missing is not known.
func (s *suite) kafkaTargets() []ratioTarget {
	base := s.findTable(partProduce, baseLike(kindProduce, 1024, false))
	fixed := s.findTable(partProduce, fixedRateLike(kindLatency, 1024, false, fixedLatencyRate))
	warm := s.findTable(partWarmKgo, baseLike(kindConsume, 1024, false))
	var ks []ratioTarget
	add := func(k ratioTarget, t *table, m metric) {
		if t != nil {
			k.compare(m, t.refRowOf(referencePeer), t.refRowOf(kafkaPeer), "ringlog io_uring", "Apache Kafka")
		}
		ks = append(ks, k)
	}
	add(ratioTarget{target: "produce 1 KiB, 16 partitions records/s ≥ 1.5x Apache Kafka's", atLeast: true, bound: 1.5,
		format: fmtCount, where: " records/s"}, base, metricRate)
	add(ratioTarget{target: "broker CPU per GB ≤ 0.4x Apache Kafka's", bound: 0.4,
		format: fmtSeconds, where: " s/GB, 1 KiB produce"}, base, metricCPUPerGB)
	add(ratioTarget{target: fmt.Sprintf("produce ack p99 at %s records/s ≤ 0.5x Apache Kafka's", fmtCount(fixedLatencyRate)),
		bound: 0.5, format: fmtMicros, where: ", open loop"}, fixed, metricLatency(99))
	add(ratioTarget{target: "broker peak RSS ≤ 0.25x Apache Kafka's", bound: 0.25,
		format: fmtMiB, where: ", 1 KiB produce"}, base, metricRSS)
	ks = append(ks, s.kafkaRF3Target())
	add(ratioTarget{target: "consume from the page cache records/s ≥ 1.0x Apache Kafka's", atLeast: true, bound: 1.0,
		format: fmtCount, where: " records/s, kgo"}, warm, metricRate)
	return ks
}

// compare fills in the target from the medians of m in ours and theirs,
// or says which of them has no figure.
func (k *ratioTarget) compare(m metric, ours, theirs *row, oursName, theirsName string) {
	a, ok1 := ours.spread(m)
	b, ok2 := theirs.spread(m)
	if ok1 && ok2 && b.med > 0 {
		k.ours, k.theirs, k.ratio, k.known = a.med, b.med, a.med/b.med, true
		return
	}
	for _, x := range []struct {
		r    *row
		ok   bool
		name string
	}{{ours, ok1, oursName}, {theirs, ok2, theirsName}} {
		if !x.ok {
			st, _ := x.r.state()
			if st == "" {
				st = "without this figure"
			}
			k.missing = fmt.Sprintf("not measured: %s %s", x.name, st)
			return
		}
	}
	k.missing = "not measured: " + theirsName + "'s figure is 0"
}

// kafkaRF3Target is the target of the ringlog cluster against Kafka's:
// RF=3 acks=all records/s, from the Replication section.
func (s *suite) kafkaRF3Target() ratioTarget {
	k := ratioTarget{target: fmt.Sprintf("produce RF=3 acks=all records/s ≥ 1.5x a %d-node Apache Kafka's", clusterBrokers),
		atLeast: true, bound: 1.5, format: fmtCount, where: " records/s; Replication section"}
	if s.replicationSelected() {
		k.compare(metricRate, s.repl.run("rf3-acksall").row, s.repl.run("kafka-rf3-acksall").row,
			"the ringlog cluster", "the 3-node Apache Kafka")
	}
	return k
}

// saslSSLTarget is the bound for SASL_SSL: records/s at 1 KiB at
// no less than this share of PLAINTEXT's.
const saslSSLTarget = 0.7

// saslSSLTargets compares ringlog SASL_SSL with ringlog io_uring (the
// same binary and disk I/O, PLAINTEXT) in the 1 KiB produce table and the
// page cache consume table, both with kgo: records/s, judged, and each
// one's broker CPU per GB, stated. Produce and consume are judged apart:
// TLS costs the broker a decryption per produced byte and an encryption
// (and a copy, where PLAINTEXT uses sendfile) per fetched one.
func (s *suite) saslSSLTargets() []ratioTarget {
	var ks []ratioTarget
	for _, c := range []struct {
		what string
		t    *table
	}{
		{"produce", s.findTable(partProduce, baseLike(kindProduce, 1024, false))},
		{"consume from the page cache", s.findTable(partWarmKgo, baseLike(kindConsume, 1024, false))},
	} {
		k := ratioTarget{target: fmt.Sprintf("SASL_SSL records/s ≥ %.1fx PLAINTEXT at 1 KiB (%s)", saslSSLTarget, c.what),
			atLeast: true, bound: saslSSLTarget, format: fmtCount, where: " records/s, kgo"}
		if c.t != nil {
			ours, theirs := c.t.rows[saslSSLPeer], c.t.refRowOf(referencePeer)
			k.compare(metricRate, ours, theirs, "ringlog SASL_SSL", "ringlog io_uring")
			a, ok1 := ours.spread(metricCPUPerGB)
			b, ok2 := theirs.spread(metricCPUPerGB)
			if k.known && ok1 && ok2 {
				k.where += fmt.Sprintf("; broker CPU %s against %s s/GB", fmtSeconds(a.med), fmtSeconds(b.med))
			}
		}
		ks = append(ks, k)
	}
	return ks
}

// txnTargets are issue 12's: ringlog io_uring's transactional producers
// (1,000 records per transaction, kgo) at no less than 0.8x its
// idempotent acks=all producers' records/s, the 100-record transactions
// stated beside; and read_committed consumption of transactional records
// at no less than 0.95x read_uncommitted's of the same records.
func (s *suite) txnTargets() []ratioTarget {
	idemLike := func(txn int) func(w workload) bool {
		return func(w workload) bool {
			return w.kind == kindProduce && w.size == 1024 && w.partitions == 16 && w.acks == -1 &&
				w.compression == "none" && w.client == "kgo" && !w.fsync && w.rate == 0 && w.txn == txn
		}
	}
	idem := s.findTable(partProduce, idemLike(0))
	k := ratioTarget{target: "transactional produce, 1,000 records per transaction, records/s ≥ 0.8x idempotent acks=all at 1 KiB",
		atLeast: true, bound: 0.8, format: fmtCount, where: " records/s, kgo"}
	if t := s.findTable(partProduce, idemLike(1000)); t != nil && idem != nil {
		k.compare(metricRate, t.refRowOf(referencePeer), idem.refRowOf(referencePeer), "ringlog io_uring transactional", "ringlog io_uring idempotent")
		if t100 := s.findTable(partProduce, idemLike(100)); k.known && t100 != nil {
			a, ok1 := t100.refRowOf(referencePeer).spread(metricRate)
			b, ok2 := idem.refRowOf(referencePeer).spread(metricRate)
			if ok1 && ok2 && b.med > 0 {
				k.where += fmt.Sprintf("; 100 records per transaction: %s", fmtRatio(a.med/b.med))
			}
		}
	}
	c := ratioTarget{target: "read_committed consume records/s ≥ 0.95x read_uncommitted (transactional records, page cache)",
		atLeast: true, bound: 0.95, format: fmtCount, where: " records/s, kgo"}
	txnConsume := func(w workload) bool {
		return w.kind == kindConsume && w.txn > 0 && w.size == 1024 && w.partitions == 16
	}
	rc, ru := s.findTable(partWarmKgoRC, txnConsume), s.findTable(partWarmKgo, txnConsume)
	if rc != nil && ru != nil {
		c.compare(metricRate, rc.refRowOf(referencePeer), ru.refRowOf(referencePeer), "ringlog io_uring read_committed", "ringlog io_uring read_uncommitted")
	}
	return []ratioTarget{k, c}
}

// limitMedian is the median of one machine limit over the rounds.
func (s *suite) limitMedian(f func(l limitsSample) (float64, bool)) float64 {
	var vs []float64
	for _, l := range s.limits {
		if v, ok := f(l); ok {
			vs = append(vs, v)
		}
	}
	return median(vs)
}

// writeSendfile states what sendfile can and cannot show on loopback, with
// this run's figures.
func (s *suite) writeSendfile(w io.Writer) {
	fmt.Fprintf(w, "## Zero-copy on loopback\n\n")
	fmt.Fprint(w, "ringlog sends fetched records with sendfile from the page cache. Over loopback there is no NIC "+
		"and no DMA: the kernel copies the pages into the receiving socket either way, so sendfile cannot "+
		"make a consumer faster here (it was measured at about 0.8x of read+write on this machine kind) and "+
		"records/s does not judge it. What it saves is the broker's own CPU: judge it by broker CPU seconds "+
		"per GB fetched.\n\n")
	t := s.findTable(partWarmKgo, baseLike(kindConsume, 1024, false))
	if t == nil {
		fmt.Fprint(w, "No consume workload ran in this matrix.\n\n")
		return
	}
	fmt.Fprint(w, "| peer | broker CPU s / GB fetched (page cache, kgo) | sent by sendfile |\n|---|--:|--:|\n")
	for _, r := range t.orderedRows() {
		cpu, sf := "—", "—"
		if sp, ok := r.spread(metricCPUPerGB); ok {
			cpu = cell(sp, fmtSeconds)
		}
		if sp, ok := r.spread(metricSendfile); ok {
			sf = cell(sp, fmtPct)
		} else if len(r.samples) > 0 && r.peer.spec.kafkaNodes > 0 {
			sf = "sendfile (transferTo), not counted"
		} else if len(r.samples) > 0 && r.peer.spec.saslSSL {
			sf = "copies (TLS encrypts records in user space)"
		} else if len(r.samples) > 0 && !r.peer.spec.memory && !r.peer.spec.nats {
			sf = "no counters"
		} else if len(r.samples) > 0 {
			sf = "copies"
		}
		if st, reason := r.state(); st != "" {
			cpu = "*" + st + ": " + mdEscape(reason) + "*"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", r.peer.spec.name, cpu, sf)
	}
	fmt.Fprintln(w)
}

// writeProfile prints the top functions of the broker's CPU profile.
func (s *suite) writeProfile(w io.Writer) {
	fmt.Fprintf(w, "## CPU profile of ringlog io_uring during the main produce run\n\n")
	p := s.profile
	if p == nil {
		fmt.Fprint(w, "*unavailable: the main produce run did not run on ringlog io_uring*\n\n")
		return
	}
	if p.err != "" {
		fmt.Fprintf(w, "*unavailable: %s*\n\n", mdEscape(p.err))
		return
	}
	main := s.findTable(partProduce, func(w workload) bool { return w.main })
	fmt.Fprintf(w, "Table %d (%s), first run; a %d s profile from the broker's /debug/pprof/profile, %s of CPU sampled, "+
		"saved as `%s` (`go tool pprof -top %s`). Top %d functions by own (flat) time:\n\n",
		s.tableNumber(main), main.w.describe(), p.seconds, p.total.Round(time.Millisecond), p.file, p.file, profileTopN)
	fmt.Fprint(w, "```text\n")
	fmt.Fprint(w, profileText(p))
	fmt.Fprint(w, "```\n\n")
}

// profileText is the top functions as pprof -top prints them.
func profileText(p *profileResult) string {
	s := fmt.Sprintf("%10s %6s %10s %6s  %s\n", "flat", "flat%", "cum", "cum%", "function")
	pct := func(d time.Duration) string {
		if p.total == 0 {
			return "—"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(d)/float64(p.total))
	}
	for _, e := range p.top {
		s += fmt.Sprintf("%10s %6s %10s %6s  %s\n", e.flat.Round(time.Millisecond), pct(e.flat),
			e.cum.Round(time.Millisecond), pct(e.cum), e.name)
	}
	return s
}
