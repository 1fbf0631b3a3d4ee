package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// suite is one run of `ringlog bench`: the plan, the peers it started, and
// everything measured.
type suite struct {
	cfg      config
	out      io.Writer // the summary printed at the end
	workDir  string
	ownWork  bool // workDir is temporary and removed
	vals     *values
	kcat     *kcat
	noKcat   string // why there is no kcat
	machine  machine
	started  time.Time
	deadline time.Time
	progress *progress

	workloads []workload
	tables    []*table // report order
	peers     map[string]*peer
	drivers   map[string]driver

	limits  []limitsSample // one per round
	profile *profileResult
	repl    *replication
	mirr    *mirroring
	strm    *streamsSection

	rate       float64 // open-loop rate in records/s
	rateSource string
	peakBytes  map[string]float64 // MB/s of kgo produce by peer id and value size, sizing kcat runs
	topicSeq   int
}

func newSuite(cfg config, out, progressOut io.Writer) (*suite, error) {
	s := &suite{cfg: cfg, out: out, vals: newValues(), peers: map[string]*peer{}, drivers: map[string]driver{},
		peakBytes: map[string]float64{}, started: time.Now()}
	s.deadline = s.started.Add(cfg.timeout)
	s.workDir = cfg.workDir
	if s.workDir == "" {
		d, err := os.MkdirTemp("", "ringlog-bench-")
		if err != nil {
			return nil, err
		}
		s.workDir, s.ownWork = d, true
	} else if err := os.MkdirAll(s.workDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.outDir, 0o755); err != nil {
		return nil, err
	}
	s.kcat, s.noKcat = findKcat(s.workDir, s.vals)
	s.machine = describeMachine(s.workDir)
	s.repl = newReplication()
	s.mirr = newMirroring()
	s.strm = newStreamsSection()
	for _, w := range matrix(cfg.matrix, cfg.producers, cfg.consumers) {
		// The base produce run always runs with the matrix: it sets the
		// open-loop rate and is where the broker's profile is taken.
		if (cfg.only == "" || cfg.only == onlyMatrix) && (len(cfg.kinds) == 0 || w.base || slices.Contains(cfg.kinds, string(w.kind))) {
			s.workloads = append(s.workloads, w)
		}
	}
	for _, w := range s.workloads {
		s.tables = append(s.tables, tablesFor(w)...)
	}
	if cfg.rate > 0 {
		s.rate, s.rateSource = cfg.rate, "set with -rate"
	}
	steps := 0
	for _, w := range s.workloads {
		steps += len(s.peersFor(w))
	}
	if s.measuresLimits() {
		steps++
	}
	s.progress = newProgress(progressOut, cfg.runs*steps+s.replSteps()+s.mirrorSteps()+s.streamsSteps(), s.deadline)
	return s, nil
}

// close stops every peer and removes the temporary data; it is safe to
// call more than once.
func (s *suite) close() {
	s.stopPeers()
	if s.kcat != nil {
		s.kcat.removeInputs()
	}
	if s.ownWork {
		os.RemoveAll(s.workDir)
	}
}

func (s *suite) stopPeers() []error {
	var errs []error
	for _, d := range s.drivers {
		d.close()
	}
	clear(s.drivers)
	for _, p := range s.peers {
		if err := p.stop(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.id(), err))
		}
	}
	return errs
}

// peersFor lists the peers of a workload in report order: one per peer
// spec of the matrix, with the workload's durability setting.
func (s *suite) peersFor(w workload) []*peer {
	var ps []*peer
	for _, spec := range matrixSpecs() {
		ps = append(ps, s.peerFor(spec.key, w.fsync, 0))
	}
	return ps
}

// peerFor returns the suite's instance of a peer with a durability setting
// (and, for the cluster, fetch slots), making it on first use.
func (s *suite) peerFor(key string, fsync bool, slots int) *peer {
	spec, _ := peerSpecByKey(key)
	p := &peer{spec: spec, fsync: fsync, slots: slots}
	if q, ok := s.peers[p.id()]; ok {
		return q
	}
	s.peers[p.id()] = p
	return p
}

// stopPeer stops one peer and closes its driver; the next measurement on
// it starts it again.
func (s *suite) stopPeer(p *peer) {
	if d, ok := s.drivers[p.id()]; ok {
		d.close()
		delete(s.drivers, p.id())
	}
	if err := p.stop(); err != nil {
		fmt.Fprintf(s.out, "warning: %s: %v\n", p.id(), err)
	}
	if p.err == nil {
		p.started = false
	}
}

// measuresLimits is false when only the Replication or the Mirroring
// section runs: their figures are ratios between peers, not to the
// machine.
func (s *suite) measuresLimits() bool { return s.cfg.only == "" || s.cfg.only == onlyMatrix }

func (s *suite) selected(p *peer) bool { return slices.Contains(s.cfg.peers, p.spec.key) }

// run measures everything, round after round, then writes the results.
// Rounds interleave the peers (their order rotates) so that a slow moment
// of the shared machine does not fall on one peer's runs only.
func (s *suite) run(ctx context.Context) error {
	ctx, cancel := context.WithDeadline(ctx, s.deadline)
	defer cancel()
	s.progress.note(fmt.Sprintf("ringlog bench: %s matrix, %d run(s), results in %s", s.cfg.matrix, s.cfg.runs, s.cfg.outDir))
	for round := range s.cfg.runs {
		if s.measuresLimits() {
			s.progress.step("machine limits")
			s.limits = append(s.limits, measureLimits(ctx, s.workDir, s.cfg.quick))
		}
		for _, w := range s.workloads {
			ps := s.peersFor(w)
			for i := range ps {
				p := ps[(i+round)%len(ps)]
				s.progress.step(fmt.Sprintf("%s %s · %s", w.kind, w.describe(), p.spec.name))
				s.runOn(ctx, w, p, round)
			}
			if w.base && round == 0 && s.rate == 0 {
				s.setRate(w)
			}
		}
		if s.replicationSelected() {
			s.replicationRound(ctx, round)
		}
		if s.mirroringSelected() {
			s.mirroringRound(ctx, round)
		}
		if s.streamsSelected() {
			s.streamsRound(ctx, round)
		}
	}
	if s.replicationSelected() {
		// Last: it kills brokers of the cluster, which is stopped after.
		s.measureFailovers(ctx)
	}
	s.progress.done()
	for _, err := range s.stopPeers() {
		fmt.Fprintf(s.out, "warning: %v\n", err)
	}
	return s.write()
}

// rowsOf returns the rows of every table of w for peer p, creating them.
func (s *suite) rowsOf(w workload, p *peer) map[string]*row {
	rs := map[string]*row{}
	for _, t := range s.tables {
		if t.w != w {
			continue
		}
		r, ok := t.rows[p.id()]
		if !ok {
			r = &row{peer: p}
			t.rows[p.id()] = r
		}
		rs[t.part] = r
	}
	return rs
}

// runOn runs workload w on peer p once and files the outcome in the rows.
func (s *suite) runOn(ctx context.Context, w workload, p *peer, round int) {
	rows := s.rowsOf(w, p)
	// markAll files a reason for every row of the workload: as the row's
	// status when it has no figure yet, else as one more failed run.
	markAll := func(status, reason string) {
		for _, r := range rows {
			r.mark(status, reason)
		}
	}
	for part, r := range rows {
		if why := s.notApplicable(w, part, p); why != "" && r.status == "" {
			r.status, r.reason = statusUnavailable, why
		}
		if s.cfg.quick && p.spec.kafkaNodes > 0 && w.kind == kindConsume && part != partWarmKgo && r.status == "" {
			r.status, r.reason = statusSkipped, quickKafkaReason
		}
		if p.spec.net != "" && w.kind == kindConsume && part != partWarmKgo && r.status == "" {
			r.status, r.reason = statusSkipped, netUringReason
		}
	}
	if status, reason := s.precheck(ctx, p, s.estimate(w)); status != "" {
		markAll(status, reason)
		return
	}
	if p.spec.net != "" && !netPathsWorkload(w) {
		markAll(statusSkipped, netUringReason)
		return
	}
	if w.netPaths && !slices.Contains(netPathsPeers(w), p.spec.key) {
		markAll(statusSkipped, netPathsReason(w))
		return
	}
	if s.cfg.quick && p.spec.cluster && !w.main {
		markAll(statusSkipped, quickClusterReason)
		return
	}
	if s.cfg.quick && p.spec.kafkaNodes > 0 && !quickKafka(w) {
		markAll(statusSkipped, quickKafkaReason)
		return
	}
	if p.spec.saslSSL && !saslSSLWorkload(w) {
		markAll(statusSkipped, saslSSLReason)
		return
	}
	if p.spec.acls > 0 && !aclWorkload(w) {
		markAll(statusSkipped, aclReason)
		return
	}
	if s.cfg.quick && p.spec.key == acl100Peer {
		markAll(statusSkipped, quickACLReason)
		return
	}
	pending := false
	for _, r := range rows {
		pending = pending || r.status == ""
	}
	if !pending {
		return // nothing of this workload applies to p
	}
	if err := s.ensureRunning(ctx, p); err != nil {
		markAll(statusUnavailable, err.Error())
		return
	}
	rctx, cancel := context.WithTimeout(ctx, s.runBound(w))
	defer cancel()
	logged := p.lastProblem()
	for part, o := range s.exec(rctx, w, p, round, rows) {
		r := rows[part]
		if o.err != nil {
			reason := o.err.Error()
			// What the broker said about it, if it logged something new.
			if l := p.lastProblem(); l != "" && l != logged {
				reason += "; the broker logged: " + l
			}
			if errors.Is(rctx.Err(), context.DeadlineExceeded) || ctx.Err() != nil {
				reason = fmt.Sprintf("cut at the run's bound (%v): %s", s.runBound(w), reason)
			}
			r.fails = append(r.fails, reason)
			continue
		}
		o.sample.round = round
		r.samples = append(r.samples, o.sample)
	}
}

// quickClusterReason is why -quick leaves most of the cluster's rows out.
const quickClusterReason = "-quick measures the cluster in the base produce workload and the Replication section only " +
	"(three brokers take a few seconds more per run than one; the suite must stay under two minutes)"

// quickKafka is true for the workloads -quick measures on Apache Kafka:
// those of the targets against it (of consume, kgo from the page cache
// only).
func quickKafka(w workload) bool {
	return w.main || (w.kind == kindConsume && w.txn == 0) || (w.kind == kindLatency && w.rate > 0)
}

// quickKafkaReason is why -quick leaves Kafka's other rows out.
const quickKafkaReason = "-quick measures Apache Kafka where the targets against it need figures only (base produce, " +
	"consume from the page cache with kgo, produce latency at the fixed rate): a JVM takes seconds to start and warm up, " +
	"a flush always instance would be a second one, and the suite must stay short"

// precheck says why p cannot run a measurement expected to take est now
// (a status and its reason), or "" when it can.
func (s *suite) precheck(ctx context.Context, p *peer, est time.Duration) (status, reason string) {
	switch {
	case !s.selected(p):
		return statusUnavailable, "not selected (-peers)"
	case p.unavailableReason() != "":
		return statusUnavailable, p.unavailableReason()
	case p.started && p.err != nil:
		return statusUnavailable, p.err.Error()
	case ctx.Err() != nil:
		return statusSkipped, "the suite's time limit (-timeout) was reached or it was interrupted"
	case time.Now().Add(est).After(s.deadline):
		return statusSkipped, fmt.Sprintf("not enough time left within -timeout %v", s.cfg.timeout)
	}
	return "", ""
}

// ensureRunning starts p if it has not been started, and checks that its
// processes are still there.
func (s *suite) ensureRunning(ctx context.Context, p *peer) error {
	if !p.started {
		if err := s.startPeer(ctx, p); err != nil {
			return err
		}
	}
	if why := p.exited(); why != "" {
		p.err = fmt.Errorf("exited during the suite: %s", why)
		return p.err
	}
	return nil
}

// notApplicable says why part of w cannot be measured on p, or "".
func (s *suite) notApplicable(w workload, part string, p *peer) string {
	kcatPart := part == partWarmKcat || (w.kind == kindProduce && w.client == "kcat")
	switch {
	case kcatPart && p.spec.nats:
		return "kcat speaks Kafka only; NATS is measured with nats.go in the kgo tables"
	case kcatPart && s.kcat == nil:
		return s.noKcat
	case p.spec.nats && w.compression != "none":
		return "NATS has no " + w.compression + " on the wire (its S2 stream compression is a storage setting)"
	case part == partColdKgo && p.spec.memory:
		return "kfake keeps records in memory: there is no page cache to drop"
	case w.txn > 0 && p.spec.nats:
		return "NATS JetStream has no transactions in Kafka's sense (atomic batches are not read_committed)"
	}
	return ""
}

// estimate is how long a run of w is expected to take, to decide whether
// it still fits within the suite's time limit.
func (s *suite) estimate(w workload) time.Duration {
	if w.kind == kindConsume {
		return 3*s.cfg.duration + 3*time.Second
	}
	if w.idle > 0 {
		return s.cfg.duration + 10*time.Second // opening the idle connections
	}
	return s.cfg.duration + 2*time.Second
}

// runBound is the hard bound of one run: beyond it the run is cut and
// reported as failed.
func (s *suite) runBound(w workload) time.Duration {
	if w.kind == kindConsume {
		return 5 * time.Minute
	}
	return 2*s.cfg.duration + 60*time.Second
}

// startPeer starts a peer, connects its driver and warms it up: a short
// produce run, not measured, so that the first measured run does not pay
// for first connections, page faults of fresh heaps and the like.
func (s *suite) startPeer(ctx context.Context, p *peer) error {
	s.progress.note("starting " + p.spec.name + " (" + p.durability() + ")")
	if err := p.start(s.cfg.broker, s.workDir); err != nil {
		return err
	}
	var d driver
	var err error
	switch {
	case p.spec.nats:
		d, err = newNatsDriver(p.addr)
	case p.spec.replicas() > 1:
		var kd *kafkaDriver
		kd, err = newKafkaDriver(p.seeds(), clusterBrokers, clusterTopicConfigs())
		if err == nil {
			d = kd
			// Every broker registered and unfenced before the first run.
			err = kd.waitBrokers(ctx, clusterBrokers, peerStartTimeout)
		}
	case p.sec != nil:
		// The user first, on the PLAINTEXT listener; then every client
		// over SASL_SSL.
		if err = p.sec.makeUser(ctx, p.addr, peerStartTimeout); err == nil {
			d, err = newKafkaDriver(p.seeds(), 1, nil, p.clientOpts()...)
		}
	case p.acl != nil:
		// The bindings first, as the administrator; then every client
		// as User:ANONYMOUS on the PLAINTEXT listener.
		if err = p.acl.create(ctx, peerStartTimeout); err == nil {
			d, err = newKafkaDriver(p.seeds(), 1, nil)
		}
	default:
		d, err = newKafkaDriver(p.seeds(), 1, nil)
	}
	if err != nil {
		if d != nil {
			d.close()
		}
		p.err = fmt.Errorf("connecting: %w", err)
		p.stop()
		return p.err
	}
	s.drivers[p.id()] = d
	warm := time.Second
	switch {
	case p.spec.kafkaNodes > 0:
		warm = s.kafkaWarmup(p)
	case s.cfg.quick:
		warm = 300 * time.Millisecond
	}
	wctx, cancel := context.WithTimeout(ctx, warm+30*time.Second)
	defer cancel()
	topic := s.newTopic()
	if err := d.createTopic(wctx, topic, 16); err != nil {
		p.err = fmt.Errorf("warm-up: %w", err)
		return p.err
	}
	_, err = d.produce(wctx, produceSpec{topic: topic, partitions: 16, size: 1024, acks: 1, compression: "none",
		producers: s.cfg.producers, duration: warm, records: s.cfg.maxRecords, vals: s.vals})
	if err == nil {
		err = d.deleteTopic(wctx, topic, 16)
	}
	if err != nil {
		p.err = fmt.Errorf("warm-up: %w", err)
		return p.err
	}
	return nil
}

func (s *suite) newTopic() string {
	s.topicSeq++
	return fmt.Sprintf("bench-%d", s.topicSeq)
}

// setRate sets the open-loop rate to half of the base workload's peak on
// ringlog io_uring (or, when it did not run, on the first peer that did):
// the load at which the latency targets are stated.
func (s *suite) setRate(w workload) {
	for _, t := range s.tables {
		if t.w != w {
			continue
		}
		for _, spec := range matrixSpecs() {
			r := t.rows[spec.key]
			if r == nil || len(r.samples) == 0 {
				continue
			}
			peak := r.median(metricRate)
			s.rate = roundRate(peak / 2)
			s.rateSource = fmt.Sprintf("half of %s's peak in the base produce workload (%s rec/s)", spec.name, fmtCount(peak))
			return
		}
	}
	s.rate, s.rateSource = 1000, "1000 rec/s: no peer completed the base produce workload"
}

// roundRate rounds a rate down to two significant digits, so that the
// report's rate reads as a chosen number.
func roundRate(r float64) float64 {
	if r < 10 {
		return max(1, r)
	}
	m := 1.0
	for r/m >= 100 {
		m *= 10
	}
	return float64(int64(r/m)) * m
}
