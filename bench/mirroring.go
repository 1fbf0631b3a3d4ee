package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// The Mirroring section (issue 16, see doc.go): `ringlog mirror` copying
// a topic of 1 KiB records on 16 partitions from one ringlog broker to
// another, exactly once and at least once, against a plain kgo producer
// writing the same records into the same target in the same round.

// mirrorRun is one row of the section.
type mirrorRun struct {
	id   string // in results.json
	name string // in the table
	// mode is the mirror's: exactly once (transactions on the target) or
	// at least once (-at-least-once); "" for the plain producer.
	mode string
	row  *row
	// mirrorCPU is the mirror process's CPU seconds per million records
	// of each measured run (user + system, from /proc).
	mirrorCPU []float64
}

// Mirror modes.
const (
	mirrorExactlyOnce = "exactly once"
	mirrorAtLeastOnce = "at least once"
)

// mirrorTargetRole names the second ringlog io_uring instance, the target
// of the mirror and of the plain producer; the source is the matrix's
// ringlog io_uring.
const mirrorTargetRole = "mirror target"

// The mirror's aliases: its remote topics are mirrorSourceAlias.TOPIC.
const (
	mirrorSourceAlias = "src"
	mirrorTargetAlias = "dst"
)

// mirrorTarget is the goal: exactly-once mirroring at no less
// than this share of a plain kgo producer's records/s into the same
// target.
const mirrorTarget = 0.8

// mirrorScrapeEvery is how often the mirror's records counter is read:
// the end of a run is known to within it.
const mirrorScrapeEvery = 20 * time.Millisecond

// mirroring is what the section measured.
type mirroring struct {
	runs []*mirrorRun
	ran  bool
}

func newMirroring() *mirroring {
	return &mirroring{runs: []*mirrorRun{
		{id: "kgo-producer", name: "plain kgo producer into the target (1 producer, acks=all, idempotent)", row: &row{}},
		{id: "mirror-exactly-once", name: "ringlog mirror, exactly once (transactions on the target)", mode: mirrorExactlyOnce, row: &row{}},
		{id: "mirror-at-least-once", name: "ringlog mirror, at least once (-at-least-once)", mode: mirrorAtLeastOnce, row: &row{}},
	}}
}

func (m *mirroring) run(id string) *mirrorRun {
	for _, r := range m.runs {
		if r.id == id {
			return r
		}
	}
	return nil
}

func (s *suite) mirroringSelected() bool { return s.cfg.only == "" || s.cfg.only == onlyMirror }

// mirrorSteps is the number of progress steps of the section.
func (s *suite) mirrorSteps() int {
	if !s.mirroringSelected() {
		return 0
	}
	return len(s.mirr.runs) * s.cfg.runs
}

// mirrorRecords is the number of records each mirror run copies: the
// volume the consume workloads read (-fill), in 1 KiB records, and at
// least mirrorBytesMin.
func (s *suite) mirrorRecords() int64 { return max(s.cfg.fillBytes, mirrorBytesMin) / 1024 }

// mirrorBytesMin is the least volume a mirror run copies: -quick's fill
// (48 MiB) left a timed window of about 0.1 s after the first transaction
// (15k records), in which the last commit alone weighed a fifth.
const mirrorBytesMin = 128 << 20

// mirrorTargetPeer is the target broker: ringlog io_uring's settings, a
// process and data directory of its own.
func (s *suite) mirrorTargetPeer() *peer {
	spec, _ := peerSpecByKey(referencePeer)
	p := &peer{spec: spec, role: mirrorTargetRole}
	if q, ok := s.peers[p.id()]; ok {
		return q
	}
	s.peers[p.id()] = p
	return p
}

// mirroringRound measures each row once, in an order that rotates from
// round to round, then stops the target (no other part of the suite uses
// it).
func (s *suite) mirroringRound(ctx context.Context, round int) {
	s.mirr.ran = true
	src, dst := s.peerFor(referencePeer, false, 0), s.mirrorTargetPeer()
	rs := s.mirr.runs
	for i := range rs {
		r := rs[(i+round)%len(rs)]
		s.progress.step("mirroring: " + r.name)
		s.mirrorRunOn(ctx, r, src, dst, round)
	}
	if round == s.cfg.runs-1 {
		s.stopPeer(dst)
	}
}

// mirrorRunOn measures one row once.
func (s *suite) mirrorRunOn(ctx context.Context, r *mirrorRun, src, dst *peer, round int) {
	est := s.cfg.duration + 5*time.Second
	if r.mode != "" {
		// The source is filled, then mirrored: at 20k records/s each
		// on this machine at worst; the mirror starts in a second.
		est = time.Duration(2*s.mirrorRecords()/20_000)*time.Second + 3*time.Second
	}
	for _, p := range []*peer{src, dst} {
		if status, reason := s.precheck(ctx, p, est); status != "" {
			r.row.mark(status, reason)
			return
		}
	}
	for _, p := range []*peer{src, dst} {
		if err := s.ensureRunning(ctx, p); err != nil {
			r.row.mark(statusUnavailable, fmt.Sprintf("%s (%s): %v", p.spec.name, map[bool]string{true: "target", false: "source"}[p == dst], err))
			return
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 2*est+60*time.Second)
	defer cancel()
	var (
		smp sample
		cpu float64
		err error
	)
	if r.mode == "" {
		smp, err = s.mirrorPlainProducer(rctx, dst)
	} else {
		smp, cpu, err = s.mirrorOnce(rctx, r, src, dst)
	}
	if err != nil {
		reason := err.Error()
		if errors.Is(rctx.Err(), context.DeadlineExceeded) {
			reason = fmt.Sprintf("cut at the run's bound (%v): %s", 2*est+60*time.Second, reason)
		}
		r.row.fails = append(r.row.fails, reason)
		return
	}
	smp.round = round
	r.row.samples = append(r.row.samples, smp)
	if r.mode != "" {
		r.mirrorCPU = append(r.mirrorCPU, cpu)
	}
}

// mirrorPlainProducer is the yardstick: one kgo producer, idempotent with
// acks=all as the mirror's producer is, 1 KiB records on 16 partitions
// into a fresh topic of the target, closed loop for the run's duration.
func (s *suite) mirrorPlainProducer(ctx context.Context, dst *peer) (smp sample, err error) {
	d, ok := s.drivers[dst.id()].(*kafkaDriver)
	if !ok {
		return smp, fmt.Errorf("bench: %s has no Kafka driver", dst.id())
	}
	w := workload{kind: kindProduce, client: "kgo", size: 1024, partitions: 16, acks: -1, compression: "none", producers: 1}
	s.settle()
	topic := s.newTopic()
	if err := d.createTopic(ctx, topic, w.partitions); err != nil {
		return smp, err
	}
	defer func() {
		if derr := s.deleteAfter(d, topic); derr != nil && err == nil {
			err = derr
		}
	}()
	m := s.meter(ctx, dst, workload{})
	res, err := d.produce(ctx, produceSpec{topic: topic, partitions: w.partitions, size: w.size, acks: w.acks,
		compression: w.compression, producers: w.producers, duration: s.cfg.duration, records: s.recordsBound(w.size), vals: s.vals})
	smp = m.sample(ctx, res)
	if err == nil {
		err = s.checkStored(ctx, d, w, topic, res.records)
	}
	return smp, err
}

// mirrorOnce fills a fresh 16-partition topic of the source with
// mirrorRecords 1 KiB records, then runs `ringlog mirror` (the benchmarked
// binary, a process of its own) from the source to the target and times
// it from its first commit (its ringlog_mirror_records_total, which counts
// records committed on the target, above 0) to the commit that brings
// that counter to them all; the records counted are those committed after
// the first commit. The sample's broker CPU is the target's over that window;
// cpu is the mirror process's, in seconds per million records counted.
func (s *suite) mirrorOnce(ctx context.Context, r *mirrorRun, src, dst *peer) (smp sample, cpu float64, err error) {
	ds, ok1 := s.drivers[src.id()].(*kafkaDriver)
	dt, ok2 := s.drivers[dst.id()].(*kafkaDriver)
	if !ok1 || !ok2 {
		return smp, 0, errors.New("bench: the mirror's brokers have no Kafka driver")
	}
	n := s.mirrorRecords()
	topic := s.newTopic()
	remote := mirrorSourceAlias + "." + topic
	if err := ds.createTopic(ctx, topic, 16); err != nil {
		return smp, 0, err
	}
	defer func() {
		derr := s.deleteAfter(ds, topic)
		if rerr := s.deleteAfter(dt, remote); derr == nil && !strings.Contains(fmt.Sprint(rerr), "UNKNOWN_TOPIC") {
			derr = rerr
		}
		if derr != nil && err == nil {
			err = derr
		}
	}()
	fill, err := ds.produce(ctx, produceSpec{topic: topic, partitions: 16, size: 1024, acks: 1, compression: "none",
		producers: s.cfg.producers, duration: 5 * time.Minute, records: n, vals: s.vals})
	if err != nil {
		return smp, 0, fmt.Errorf("filling the source: %w", err)
	}
	if fill.records != n {
		return smp, 0, fmt.Errorf("filling the source: %d of %d records acknowledged", fill.records, n)
	}
	s.settle()
	adminPort, err := freePort()
	if err != nil {
		return smp, 0, err
	}
	admin := fmt.Sprintf("127.0.0.1:%d", adminPort)
	args := []string{"mirror", "-source", src.addr, "-target", dst.addr, "-alias", mirrorSourceAlias,
		"-target-alias", mirrorTargetAlias, "-topics", regexp.QuoteMeta(topic), "-progress", "0", "-admin", admin}
	if r.mode == mirrorAtLeastOnce {
		args = append(args, "-at-least-once")
	}
	c, err := startChild("mirror "+r.id, s.cfg.broker, args,
		func(l string) bool { return strings.Contains(l, `msg="mirror: flow running"`) }, peerStartTimeout)
	if err != nil {
		return smp, 0, fmt.Errorf("starting ringlog mirror: %w", err)
	}
	defer func() {
		if serr := c.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	// The run is timed from the first records committed to the last, and
	// counts the records committed after the first commit: a mirror's
	// steady rate, as the plain producer's is timed from its first record
	// sent to its last acknowledged. The first commit (the consumer's
	// first fetch, the first transaction) is left out, records and CPU
	// alike. The times are the mirror's own
	// (ringlog_mirror_last_commit_timestamp_seconds, read with the count),
	// or the scrapes' for a mirror without that gauge. A run whose first
	// commit holds every record is timed from the "flow running" line.
	start := time.Now()
	m := s.meter(ctx, dst, workload{})
	u0, s0, cerr := procCPU(c.pid())
	var done, first float64
	var firstAt, lastAt time.Time
	timed := false
	for done < float64(n) {
		if !c.alive() {
			return smp, 0, fmt.Errorf("ringlog mirror exited after %.0f of %d records: %s", done, n, c.lastLine())
		}
		select {
		case <-ctx.Done():
			return smp, 0, fmt.Errorf("%.0f of %d records mirrored: %w (mirror: %s)", done, n, ctx.Err(), c.lastLine())
		case <-time.After(mirrorScrapeEvery):
		}
		ms, at, err := scrapeMirror(ctx, admin)
		if err != nil {
			continue // its admin listener may come up a moment after the flow
		}
		done, lastAt = ms["ringlog_mirror_records_total{}"], at
		if !timed && done > 0 && done < float64(n) {
			timed, first, firstAt = true, done, at
			m = s.meter(ctx, dst, workload{})
			u0, s0, cerr = procCPU(c.pid())
		}
	}
	u1, s1, cerr1 := procCPU(c.pid())
	// The commit's time is set just after its records are counted: read
	// it once more, now that nothing else is committed.
	time.Sleep(mirrorScrapeEvery)
	if _, at, err := scrapeMirror(ctx, admin); err == nil {
		lastAt = at
	}
	if timed {
		start = firstAt
	}
	elapsed := lastAt.Sub(start)
	counted := n - int64(first)
	smp = m.sample(ctx, loadResult{records: counted, bytes: counted * 1024, elapsed: elapsed})
	if cerr == nil && cerr1 == nil {
		cpu = (u1 + s1 - u0 - s0).Seconds() / (float64(counted) / 1e6)
	}
	// The target holds them: its end offsets count the records (and,
	// with exactly once, a marker per transaction and partition).
	w := workload{partitions: 16, acks: -1}
	if err := s.checkStored(ctx, dt, w, remote, n); err != nil {
		return smp, cpu, fmt.Errorf("%s on the target: %w", remote, err)
	}
	if done > float64(n) {
		return smp, cpu, fmt.Errorf("the mirror counts %.0f records committed, %d were on the source", done, n)
	}
	return smp, cpu, nil
}

// scrapeMirror reads the mirror's /metrics page, and when its counts were
// last committed: the mirror's ringlog_mirror_last_commit_timestamp_seconds,
// or now for a mirror without it. The page is read uncompressed: Go's
// client asks for gzip by default, and compressing the page every
// mirrorScrapeEvery would cost the measured process CPU of its own.
func scrapeMirror(ctx context.Context, admin string) (map[string]float64, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return nil, time.Time{}, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	now := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, time.Time{}, fmt.Errorf("bench: %s/metrics: %s", admin, resp.Status)
	}
	ms, err := parseMetrics(resp.Body)
	if err != nil {
		return nil, time.Time{}, err
	}
	if sec, ok := ms["ringlog_mirror_last_commit_timestamp_seconds{}"]; ok && sec > 0 {
		return ms, time.Unix(0, int64(sec*1e9)), nil
	}
	return ms, now, nil
}

// deleteAfter deletes a run's topic with a bound of its own: the run's
// context may have ended.
func (s *suite) deleteAfter(d *kafkaDriver, topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.deleteTopic(ctx, topic, 16); err != nil {
		return fmt.Errorf("after the run: %w", err)
	}
	return nil
}

// mirrorRatio is exactly-once mirroring's records/s over the plain
// producer's, medians of the section's runs.
func (s *suite) mirrorRatio() ratioTarget {
	k := ratioTarget{target: fmt.Sprintf("exactly-once mirroring (ringlog mirror, 1 KiB, 16 partitions) records/s ≥ %.1fx a plain kgo producer's into the same target", mirrorTarget),
		atLeast: true, bound: mirrorTarget, format: fmtCount, where: " records/s; Mirroring section"}
	if s.mirroringSelected() && s.mirr.ran {
		k.compare(metricRate, s.mirr.run("mirror-exactly-once").row, s.mirr.run("kgo-producer").row,
			"exactly-once mirroring", "the plain kgo producer")
	}
	return k
}
