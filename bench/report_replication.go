package bench

import (
	"fmt"
	"io"
	"runtime"
	"strings"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// rf3Target is the target for replication: RF=3 acks=all at no
// less than this share of RF=1 acks=1's records/s, with the three brokers
// sharing the machine's cores.
const rf3Target = 0.4

// rf3Ratio is the cluster's RF=3 acks=all records/s over the single
// broker's RF=1 acks=1, medians of the section's runs.
func (s *suite) rf3Ratio() (ratio, all, one float64, ok bool) {
	a, ok1 := s.repl.run("rf3-acksall").row.spread(metricRate)
	b, ok2 := s.repl.run("rf1-acks1").row.spread(metricRate)
	if !ok1 || !ok2 || b.med == 0 {
		return 0, 0, 0, false
	}
	return a.med / b.med, a.med, b.med, true
}

func (s *suite) rf3TargetText() string {
	return fmt.Sprintf("produce RF=3 acks=all (min ISR %d) on %d brokers sharing %d cores ≥ %.1fx RF=1 acks=1 on one broker (records/s)",
		clusterMinISR, clusterBrokers, runtime.NumCPU(), rf3Target)
}

// writeReplication prints the Replication section.
func (s *suite) writeReplication(w io.Writer) {
	if !s.writeSectionStart(w, "Replication", s.replicationSelected()) {
		return
	}
	fmt.Fprintf(w, "The cluster is %d ringlog processes of the benchmarked binary on this machine's %d cores, which they "+
		"share with each other and with the clients; its settings are in Peers. Every row below runs the base produce "+
		"workload (1 KiB values, 16 partitions, %d producers, no compression, kgo, closed loop, %v of sending) on a fresh "+
		"topic, in the same rounds as the rest of the suite: on the cluster with replication factor %d and "+
		"min.insync.replicas=%d, on the single broker with replication factor 1; flush policy never (page cache) unless "+
		"the row says flush always. The cluster's broker CPU and peak RSS are sums over its %d processes. "+
		"The Apache Kafka rows run the same workload on Kafka itself: one node for RF 1, and for RF 3 a cluster of %d "+
		"nodes (JVMs, each a broker and a controller) on the same cores, its topics with min.insync.replicas=%d too, "+
		"started for this section and stopped after each round; their settings are in Peers. "+
		"`ringlog bench -only replication` runs this section alone.\n\n",
		clusterBrokers, runtime.NumCPU(), s.cfg.producers, s.cfg.duration, clusterBrokers, clusterMinISR, clusterBrokers,
		clusterBrokers, clusterMinISR)
	s.writeReplThroughput(w)
	s.writeReplSlots(w)
	s.writeReplLag(w)
	s.writeFailover(w)
}

// replFailNotes lists the failed runs of rows that have figures anyway.
func replFailNotes(w io.Writer, rs []*replRun) {
	n := 0
	for _, r := range rs {
		if len(r.row.fails) > 0 && len(r.row.samples) > 0 {
			fmt.Fprintf(w, "- %s: %d of %d runs failed (%s)\n", r.name, len(r.row.fails),
				len(r.row.fails)+len(r.row.samples), mdEscape(r.row.fails[0]))
			n++
		}
	}
	if n > 0 {
		fmt.Fprintln(w)
	}
}

func (s *suite) writeReplThroughput(w io.Writer) {
	fmt.Fprint(w, "**What replication costs.** RF=3 acks=all on the cluster against RF=1 acks=1 on one broker, same workload, "+
		"same run; below, the same setups on Apache Kafka, and each ringlog row against Kafka's.\n\n")
	cols := []column{colRate, colMBs, colP50, colP99, colCPUPerM, colRSS}
	fmt.Fprint(w, "| setup |")
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c.head)
	}
	fmt.Fprint(w, " records/s ÷ RF 1, acks=1 (same system) | records/s ÷ Apache Kafka's (same setup) |\n|---|"+
		strings.Repeat("--:|", len(cols)+2)+"\n")
	rate := func(a, b *replRun) string {
		if a == nil || b == nil {
			return "—"
		}
		x, ok1 := a.row.spread(metricRate)
		y, ok2 := b.row.spread(metricRate)
		if !ok1 || !ok2 || y.med == 0 {
			return "—"
		}
		return fmtRatio(x.med / y.med)
	}
	ids := []string{"rf1-acks1", "rf3-acks1", "rf3-acksall", "kafka-rf1-acks1", "kafka-rf3-acks1", "kafka-rf3-acksall"}
	var rs []*replRun
	for _, id := range ids {
		r := s.repl.run(id)
		rs = append(rs, r)
		one, twin := s.repl.run("rf1-acks1"), s.repl.run(r.kafka)
		if r.spec == kafkaPeer || r.spec == kafkaClusterPeer {
			one, twin = s.repl.run("kafka-rf1-acks1"), r
		}
		fmt.Fprintf(w, "| %s |", r.name)
		rowCells(w, r.row, cols, rate(r, one), rate(r, twin))
	}
	fmt.Fprintln(w)
	replFailNotes(w, rs)
	if ratio, all, one, ok := s.rf3Ratio(); ok {
		verdict := map[bool]string{true: "met", false: "**not met**"}[ratio >= rf3Target]
		fmt.Fprintf(w, "Target: %s. Measured %s (%s of %s records/s): %s.\n\n", s.rf3TargetText(), fmtRatio(ratio),
			fmtCount(all), fmtCount(one), verdict)
	} else {
		fmt.Fprintf(w, "Target: %s. Not measured in this run.\n\n", s.rf3TargetText())
	}
	k := s.kafkaRF3Target()
	k.missing = "" // this section says only whether it was measured
	writeTargetLine(w, k, "records/s")
}

func (s *suite) writeReplSlots(w io.Writer) {
	fmt.Fprintf(w, "**Pipelined follower fetching.** A follower copies from each leader over one connection, with up to 4 "+
		"Fetch requests in flight (replication/fetcher Config.Slots, its default); the rows with 1 in flight run the "+
		"cluster with %s=1 in its server.properties. RF=3, acks=all, so that the followers' pace is the producers' pace.\n\n",
		clusterSlotsKey)
	cols := []column{colRate, colMBs, colP50, colP99}
	fmt.Fprint(w, "| flush policy | fetches in flight per follower stream |")
	for _, c := range cols {
		fmt.Fprintf(w, " %s |", c.head)
	}
	fmt.Fprint(w, " follower LEO lag p99 (records) | records/s ÷ 4 in flight |\n|---|--:|"+strings.Repeat("--:|", len(cols)+2)+"\n")
	pairs := []struct {
		flush     string
		four, one *replRun
	}{
		{"never", s.repl.run("rf3-acksall"), s.repl.run("rf3-acksall-slots1")},
		{"always", s.repl.run("rf3-acksall-fsync"), s.repl.run("rf3-acksall-fsync-slots1")},
	}
	var all []*replRun
	for _, pr := range pairs {
		for _, r := range []*replRun{pr.four, pr.one} {
			all = append(all, r)
			inFlight := "4 (default)"
			if r.slots > 0 {
				inFlight = fmt.Sprint(r.slots)
			}
			fmt.Fprintf(w, "| %s | %s |", pr.flush, inFlight)
			lag, ratio := "—", "—"
			if r.lag.leo.TotalCount() > 0 {
				lag = fmtRecords(float64(r.lag.leo.ValueAtQuantile(99)))
			}
			a, ok1 := r.row.spread(metricRate)
			b, ok2 := pr.four.row.spread(metricRate)
			if ok1 && ok2 && b.med > 0 {
				ratio = fmtRatio(a.med / b.med)
			}
			rowCells(w, r.row, cols, lag, ratio)
		}
	}
	fmt.Fprintln(w)
	replFailNotes(w, all)
}

func (s *suite) writeReplLag(w io.Writer) {
	fmt.Fprintf(w, "**Replication lag under load.** During each cluster run above, from the first send to the last "+
		"acknowledgement, every %v the three brokers' /metrics (ringlog_log_end_offset and ringlog_high_watermark per "+
		"partition) are read at once, and for every partition and each of its two followers the leader's LEO minus "+
		"the follower's LEO (records the follower has yet to copy) and the leader's HW minus the follower's HW are "+
		"recorded; figures are over every sample of every round. The three brokers are read concurrently, not at "+
		"the same instant: a follower read after its leader can look ahead of it and counts as 0. Kafka's followers "+
		"are not sampled: it reports their offsets through JMX, which the suite does not read.\n\n", lagEvery)
	fmt.Fprint(w, "| run | samples (partition × follower × tick) | LEO lag p50 | LEO lag p99 | LEO lag max | HW lag p50 | HW lag p99 | HW lag max |\n")
	fmt.Fprint(w, "|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range s.repl.runs {
		if r.lag == nil {
			continue
		}
		fmt.Fprintf(w, "| %s |", r.name)
		if r.lag.leo.TotalCount() == 0 {
			status, reason := r.row.state()
			if status == "" {
				status, reason = "unavailable", "no sample of the brokers' /metrics answered"
			}
			fmt.Fprintf(w, " *%s: %s* |%s\n", status, mdEscape(reason), strings.Repeat(" — |", 6))
			continue
		}
		q := func(h *hdrhistogram.Histogram, p float64) string {
			if p >= 100 {
				return fmtRecords(float64(h.Max()))
			}
			return fmtRecords(float64(h.ValueAtQuantile(p)))
		}
		fmt.Fprintf(w, " %s | %s | %s | %s | %s | %s | %s |\n", fmtRecords(float64(r.lag.leo.TotalCount())),
			q(r.lag.leo, 50), q(r.lag.leo, 99), q(r.lag.leo, 100), q(r.lag.hw, 50), q(r.lag.hw, 99), q(r.lag.hw, 100))
	}
	fmt.Fprintln(w)
}

// failoverSpread is the median, min and max time of the failovers that
// completed.
func (s *suite) failoverSpread() (spread, bool) {
	var vs []float64
	for _, f := range s.repl.failovers {
		if f.err == "" {
			vs = append(vs, f.took.Seconds()*1e6)
		}
	}
	return spreadOf(vs)
}

func (s *suite) writeFailover(w io.Writer) {
	fmt.Fprintf(w, "**Failover.** A one-partition topic on the cluster (RF %d, min.insync.replicas=%d), no other load. "+
		"A producer (kgo, idempotent, acks=all, linger 0, metadata refreshed at most every %v and retries every %v "+
		"instead of kgo's 5 s and 250 ms-2.5 s, so that the client adds little of its own) writes 10 records to the "+
		"partition's leader, which is then killed with SIGKILL; the time runs from the kill to the acknowledgement "+
		"of the next record, the first acks=all produce the new leader acknowledges. The controller moves the "+
		"leadership once it fences the dead broker, after broker.session.timeout.ms=%d without its heartbeats "+
		"(broker.heartbeat.interval.ms=%d; Kafka's defaults are 9000 and 2000): that wait dominates. Between "+
		"failovers the killed broker is restarted (same node id and data, a new Kafka port) and back in the ISR "+
		"before the next kill.\n\n",
		clusterBrokers, clusterMinISR, failoverMetadataMinAge, failoverRetryBackoff,
		clusterSessionTimeout.Milliseconds(), clusterHeartbeat.Milliseconds())
	fmt.Fprint(w, "| # | killed: leader of the partition | it also led the metadata quorum | new leader | kill to first acks=all acknowledgement |\n")
	fmt.Fprint(w, "|--:|--:|---|--:|--:|\n")
	for i, f := range s.repl.failovers {
		if f.err != "" {
			victim := "—"
			if f.victim > 0 {
				victim = fmt.Sprintf("broker %d", f.victim)
			}
			fmt.Fprintf(w, "| %d | %s | — | — | *failed: %s* |\n", i+1, victim, mdEscape(f.err))
			continue
		}
		fmt.Fprintf(w, "| %d | broker %d | %s | broker %d | %s |\n", i+1, f.victim,
			map[bool]string{true: "yes", false: "no"}[f.quorumLeader], f.newLeader, fmtMicros(f.took.Seconds()*1e6))
	}
	if len(s.repl.failovers) == 0 {
		status, reason := s.repl.failStatus, s.repl.failReason
		if status == "" {
			status, reason = statusSkipped, "not run"
		}
		fmt.Fprintf(w, "| — | *%s: %s* | — | — | — |\n", status, mdEscape(reason))
	}
	fmt.Fprintln(w)
	if sp, ok := s.failoverSpread(); ok {
		fmt.Fprintf(w, "Kill to first acks=all acknowledgement: median %s, min %s, max %s over %d failover(s), "+
			"with broker.session.timeout.ms=%d.\n\n", fmtMicros(sp.med), fmtMicros(sp.min), fmtMicros(sp.max), sp.n,
			clusterSessionTimeout.Milliseconds())
	} else if s.repl.failStatus != "" && len(s.repl.failovers) > 0 {
		fmt.Fprintf(w, "%s: %s\n\n", s.repl.failStatus, mdEscape(s.repl.failReason))
	}
}

// replicationJSON is the section's raw results.
func (s *suite) replicationJSON() map[string]any {
	if !s.replicationSelected() {
		return map[string]any{"status": "not run (-only matrix)"}
	}
	var runs []map[string]any
	for _, r := range s.repl.runs {
		status, reason := r.row.state()
		if status == "" {
			status = "measured"
		}
		jr := map[string]any{"id": r.id, "name": r.name, "acks": acksName(r.acks), "flush_always": r.fsync,
			"fetch_slots": r.slots, "status": status, "reason": reason, "failures": r.row.fails, "runs": jsonRuns(r.row)}
		if r.lag != nil && r.lag.leo.TotalCount() > 0 {
			lag := func(h *hdrhistogram.Histogram) map[string]any {
				return map[string]any{"p50": h.ValueAtQuantile(50), "p99": h.ValueAtQuantile(99), "max": h.Max(),
					"samples": h.TotalCount()}
			}
			jr["follower_leo_lag_records"] = lag(r.lag.leo)
			jr["follower_hw_lag_records"] = lag(r.lag.hw)
			jr["lag_ticks"], jr["lag_ticks_missed"] = r.lag.ticks, r.lag.missed
		}
		runs = append(runs, jr)
	}
	var fos []map[string]any
	for _, f := range s.repl.failovers {
		fos = append(fos, map[string]any{"killed": f.victim, "killed_led_quorum": f.quorumLeader, "new_leader": f.newLeader,
			"kill_to_ack_s": f.took.Seconds(), "error": f.err})
	}
	doc := map[string]any{
		"brokers": clusterBrokers, "replication_factor": clusterBrokers, "min_insync_replicas": clusterMinISR,
		"cores": runtime.NumCPU(), "broker_session_timeout_ms": clusterSessionTimeout.Milliseconds(),
		"broker_heartbeat_interval_ms": clusterHeartbeat.Milliseconds(), "lag_sample_period_s": lagEvery.Seconds(),
		"runs": runs, "failovers": fos, "failover_status": s.repl.failStatus, "failover_reason": s.repl.failReason,
	}
	if ratio, _, _, ok := s.rf3Ratio(); ok {
		doc["rf3_acks_all_over_rf1_acks_1"] = ratio
	}
	if sp, ok := s.failoverSpread(); ok {
		doc["failover_median_s"] = sp.med / 1e6
	}
	return doc
}
