package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Replication section (see doc.go): what replication costs on three
// brokers sharing this machine, how far followers trail their leaders
// under load, and how long a partition is without a leader after a crash.

// replRun is one row of the section's throughput tables: the base produce
// workload with some acks on one peer.
type replRun struct {
	id    string // in results.json
	name  string // in the tables
	spec  string // peer key
	fsync bool
	slots int // cluster: ringlog.replica.fetch.slots, 0 for the default
	acks  int
	// quick runs in -quick too.
	quick bool
	row   *row
	// lag is the followers' lag sampled during the runs; nil for a
	// single broker and for Kafka (its offsets are in JMX, not in a
	// /metrics page).
	lag *lagStats
	// kafka is the id of the same setup's run on Apache Kafka; "" for
	// Kafka's own runs.
	kafka string
}

// replication is what the section measured.
type replication struct {
	runs      []*replRun
	failovers []failoverResult
	// failStatus and failReason say why failovers were not (all)
	// measured.
	failStatus, failReason string
	ran                    bool
}

func newReplication() *replication {
	mk := func(id, name, spec string, fsync bool, slots, acks int, quick bool) *replRun {
		r := &replRun{id: id, name: name, spec: spec, fsync: fsync, slots: slots, acks: acks, quick: quick, row: &row{}}
		if spec == clusterPeer {
			r.lag = newLagStats()
		}
		return r
	}
	repl := &replication{runs: []*replRun{
		mk("rf1-acks1", "ringlog io_uring, 1 broker: RF 1, acks=1", referencePeer, false, 0, 1, true),
		mk("rf3-acks1", "ringlog 3-broker cluster: RF 3, acks=1", clusterPeer, false, 0, 1, false),
		mk("rf3-acksall", "ringlog 3-broker cluster: RF 3, acks=all", clusterPeer, false, 0, -1, true),
		mk("rf3-acksall-slots1", "ringlog 3-broker cluster: RF 3, acks=all, 1 fetch in flight", clusterPeer, false, 1, -1, false),
		mk("rf3-acksall-fsync", "ringlog 3-broker cluster: RF 3, acks=all, flush always", clusterPeer, true, 0, -1, false),
		mk("rf3-acksall-fsync-slots1", "ringlog 3-broker cluster: RF 3, acks=all, flush always, 1 fetch in flight", clusterPeer, true, 1, -1, false),
		// The same setups on Apache Kafka: one node for RF 1, three for
		// RF 3 (the target against Kafka is RF 3 acks=all, which -quick
		// runs).
		mk("kafka-rf1-acks1", "Apache Kafka, 1 node: RF 1, acks=1", kafkaPeer, false, 0, 1, false),
		mk("kafka-rf3-acks1", fmt.Sprintf("Apache Kafka %d-node cluster: RF 3, acks=1", clusterBrokers), kafkaClusterPeer, false, 0, 1, false),
		mk("kafka-rf3-acksall", fmt.Sprintf("Apache Kafka %d-node cluster: RF 3, acks=all", clusterBrokers), kafkaClusterPeer, false, 0, -1, true),
	}}
	for _, r := range repl.runs {
		if twin := repl.run("kafka-" + r.id); twin != nil {
			r.kafka = twin.id
		}
	}
	return repl
}

func (r *replication) run(id string) *replRun {
	for _, x := range r.runs {
		if x.id == id {
			return x
		}
	}
	return nil
}

// replWorkload is the base produce workload with the run's acks and
// durability: the workload every row of the section shares.
func (s *suite) replWorkload(r *replRun) workload {
	return workload{kind: kindProduce, client: "kgo", size: 1024, partitions: 16, acks: r.acks,
		compression: "none", producers: s.cfg.producers, consumers: s.cfg.consumers, fsync: r.fsync}
}

// replSteps is the number of progress steps of the section: its runs in
// every round, and the failovers.
func (s *suite) replSteps() int {
	if !s.replicationSelected() {
		return 0
	}
	n := 0
	for _, r := range s.repl.runs {
		if r.quick || !s.cfg.quick || s.cfg.only == onlyReplication {
			n++
		}
	}
	return n*s.cfg.runs + s.failoverRepeats()
}

func (s *suite) replicationSelected() bool { return s.cfg.only == "" || s.cfg.only == onlyReplication }

// replicationRound runs the section's throughput rows once, in an order
// that rotates from round to round, then stops the peers that only this
// section uses (idle brokers still cost the others some CPU: three idle
// JVMs more than three ringlog brokers).
func (s *suite) replicationRound(ctx context.Context, round int) {
	s.repl.ran = true
	rs := s.repl.runs
	for i := range rs {
		r := rs[(i+round)%len(rs)]
		if s.cfg.quick && !r.quick && s.cfg.only != onlyReplication {
			r.row.mark(statusSkipped, "-quick leaves it out (it runs without -quick, or with -quick -only replication)")
			continue
		}
		s.progress.step("replication: " + r.name)
		s.replRunOn(ctx, r, round)
	}
	for _, r := range rs {
		spec, _ := peerSpecByKey(r.spec)
		if p, ok := s.peers[(&peer{spec: spec, fsync: r.fsync, slots: r.slots}).id()]; ok && (r.slots > 0 || spec.replicationOnly) {
			s.stopPeer(p)
		}
	}
}

// replRunOn measures one throughput row once.
func (s *suite) replRunOn(ctx context.Context, r *replRun, round int) {
	p := s.peerFor(r.spec, r.fsync, r.slots)
	w := s.replWorkload(r)
	if status, reason := s.precheck(ctx, p, s.estimate(w)+2*time.Second); status != "" {
		r.row.mark(status, reason)
		return
	}
	if err := s.ensureRunning(ctx, p); err != nil {
		if r.slots > 0 && strings.Contains(err.Error(), "unknown config key") {
			// The broker refuses the key: say so plainly, once for all
			// rounds.
			p.err = fmt.Errorf("this ringlog has no %s setting: its brokers refuse the key at start "+
				"(unknown config key), and its follower fetch streams always keep the default 4 requests in flight",
				clusterSlotsKey)
			err = p.err
		}
		r.row.mark(statusUnavailable, err.Error())
		return
	}
	rctx, cancel := context.WithTimeout(ctx, s.runBound(w))
	defer cancel()
	logged := p.lastProblem()
	smp, err := s.replProduce(rctx, p, r, w)
	if err != nil {
		reason := err.Error()
		if l := p.lastProblem(); l != "" && l != logged {
			reason += "; the broker logged: " + l
		}
		r.row.fails = append(r.row.fails, reason)
		return
	}
	smp.round = round
	r.row.samples = append(r.row.samples, smp)
}

// replProduce runs the base produce workload with r's acks on a fresh
// topic of p, sampling the followers' lag from the first send to the last
// acknowledgement when r asks for it.
func (s *suite) replProduce(ctx context.Context, p *peer, r *replRun, w workload) (smp sample, err error) {
	d, ok := s.drivers[p.id()].(*kafkaDriver)
	if !ok {
		return smp, fmt.Errorf("bench: %s is not a Kafka peer", p.id())
	}
	s.settle()
	topic := s.newTopic()
	if err := d.createTopic(ctx, topic, w.partitions); err != nil {
		return smp, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if derr := d.deleteTopic(dctx, topic, w.partitions); derr != nil && err == nil {
			err = fmt.Errorf("after the run: %w", derr)
		}
	}()
	spec := produceSpec{topic: topic, partitions: w.partitions, size: w.size, acks: w.acks, compression: w.compression,
		producers: w.producers, duration: s.cfg.duration, records: s.recordsBound(w.size), vals: s.vals}
	var stopLag func()
	if r.lag != nil {
		leaders, err := d.leaders(ctx, topic)
		if err != nil {
			return smp, fmt.Errorf("leaders of %s: %w", topic, err)
		}
		admins := append([]string(nil), p.admins...)
		spec.sending = func() { stopLag = startLagSampler(ctx, admins, topic, leaders, r.lag) }
	}
	m := s.meter(ctx, p, workload{}) // no system call count here: issue 13 reads the matrix
	res, err := d.produce(ctx, spec)
	if stopLag != nil {
		stopLag()
	}
	smp = m.sample(ctx, res)
	if err == nil {
		err = s.checkStored(ctx, d, w, topic, res.records)
	}
	return smp, err
}

// lagEvery is the followers' lag sampling period.
const lagEvery = 100 * time.Millisecond

// lagStats are the followers' distances behind their leaders, in records,
// over every sample of every run of a row: each tick scrapes the three
// brokers' /metrics at once and adds, for every partition and each of its
// two followers, leader LEO - follower LEO and leader HW - follower HW.
type lagStats struct {
	mu      sync.Mutex
	leo, hw *hdrhistogram.Histogram
	ticks   int // ticks whose scrapes all answered
	missed  int // ticks with a broker that did not answer in time
}

func newLagStats() *lagStats {
	return &lagStats{leo: newLagHist(), hw: newLagHist()}
}

func newLagHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 1<<40, histDigits) }

// startLagSampler samples every lagEvery until the returned stop is called.
func startLagSampler(ctx context.Context, admins []string, topic string, leaders map[int32]int32, st *lagStats) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(lagEvery)
		defer t.Stop()
		for {
			st.tick(ctx, admins, topic, leaders)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// tick scrapes every broker at once and adds one sample.
func (st *lagStats) tick(ctx context.Context, admins []string, topic string, leaders map[int32]int32) {
	offs := make([]map[int32]partitionOffsets, len(admins))
	errs := make([]error, len(admins))
	var wg sync.WaitGroup
	for i, a := range admins {
		wg.Go(func() { offs[i], errs[i] = scrapePartitionOffsets(ctx, a, topic) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // the run ended during the scrape
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if errors.Join(errs...) != nil {
		st.missed++
		return
	}
	st.addLocked(offs, leaders)
}

// addLocked adds one tick: offs[i] is broker i's (node id i+1) offsets by
// partition, leaders the node id leading each partition. The brokers are
// scraped at once but not at the same instant: a follower read a moment
// after its leader can look ahead of it, and counts as 0 behind.
func (st *lagStats) addLocked(offs []map[int32]partitionOffsets, leaders map[int32]int32) {
	for part, l := range leaders {
		li := int(l) - 1
		if li < 0 || li >= len(offs) {
			continue
		}
		lo, ok := offs[li][part]
		if !ok || !lo.hasLEO || !lo.hasHW {
			continue
		}
		for f := range offs {
			fo, ok := offs[f][part]
			if f == li || !ok || !fo.hasLEO || !fo.hasHW {
				continue
			}
			st.leo.RecordValue(max(0, lo.leo-fo.leo))
			st.hw.RecordValue(max(0, lo.hw-fo.hw))
		}
	}
	st.ticks++
}

// failoverResult is one failover: the leader of the partition killed, and
// the time to the first acks=all produce acknowledged after it.
type failoverResult struct {
	victim       int32 // node id killed: the partition's leader
	quorumLeader bool  // the victim also led the metadata quorum
	newLeader    int32
	took         time.Duration
	err          string
}

// Failover client settings: kgo's defaults (metadata at most every 5 s,
// retries after 250 ms to 2.5 s) would add seconds of the client's own.
const (
	failoverRepeatsMax     = 3
	failoverMetadataMinAge = 100 * time.Millisecond
	failoverRetryBackoff   = 50 * time.Millisecond
	failoverTimeout        = 60 * time.Second
)

func (s *suite) failoverRepeats() int {
	if s.cfg.quick {
		return 1
	}
	return failoverRepeatsMax
}

// measureFailovers kills the leader of a one-partition topic (RF 3, min
// ISR 2) with SIGKILL, times the first acks=all produce acknowledged
// after it, restarts the broker and waits for the ISR to be whole again,
// failoverRepeats times. The cluster is stopped afterwards.
func (s *suite) measureFailovers(ctx context.Context) {
	n := s.failoverRepeats()
	fail := func(status, reason string) {
		s.repl.failStatus, s.repl.failReason = status, reason
	}
	p := s.peerFor(clusterPeer, false, 0)
	// Each failover takes the session timeout and a little more; each
	// restart a few seconds more.
	est := time.Duration(n)*(clusterSessionTimeout+3*time.Second) + time.Duration(n-1)*8*time.Second
	if status, reason := s.precheck(ctx, p, est); status != "" {
		fail(status, reason)
		return
	}
	if err := s.ensureRunning(ctx, p); err != nil {
		fail(statusUnavailable, err.Error())
		return
	}
	// The cluster has one broker fewer, or one just restarted, after this:
	// no other measurement may run on it.
	defer s.stopPeer(p)
	d, ok := s.drivers[p.id()].(*kafkaDriver)
	if !ok {
		fail("failed", "bench: the cluster has no Kafka driver")
		return
	}
	topic := "failover-" + s.newTopic()
	cctx, cancel := context.WithTimeout(ctx, topicReadyTimeout)
	err := d.createTopic(cctx, topic, 1)
	cancel()
	if err != nil {
		fail("failed", err.Error())
		return
	}
	for rep := range n {
		s.progress.step(fmt.Sprintf("replication: failover %d of %d", rep+1, n))
		res := s.failoverOnce(ctx, p, d, topic, rep == n-1)
		s.repl.failovers = append(s.repl.failovers, res)
		if res.err != "" {
			break
		}
	}
}

// failoverOnce kills the partition's leader and times the first acks=all
// acknowledgement after it; unless last, it restarts the broker and waits
// until the ISR has every replica again.
func (s *suite) failoverOnce(ctx context.Context, p *peer, d *kafkaDriver, topic string, last bool) (res failoverResult) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.seeds()...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.MetadataMinAge(failoverMetadataMinAge),
		kgo.RetryBackoffFn(func(int) time.Duration { return failoverRetryBackoff }),
		kgo.RecordDeliveryTimeout(failoverTimeout))
	if err != nil {
		res.err = err.Error()
		return res
	}
	defer cl.Close()
	produce := func(ctx context.Context) error {
		v := s.vals.make(0, 1024, s.vals.now())
		return cl.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr()
	}
	// The producer knows the leader and is connected to it, as a producer
	// that was writing when the leader died.
	for range 10 {
		if err := produce(ctx); err != nil {
			res.err = fmt.Sprintf("before the kill: %v", err)
			return res
		}
	}
	leader, controller, err := d.partitionLeader(ctx, topic, 0)
	if err != nil {
		res.err = err.Error()
		return res
	}
	res.victim, res.quorumLeader = leader, leader == controller
	i := int(leader) - 1
	if i < 0 || i >= len(p.procs) {
		res.err = fmt.Sprintf("partition 0 is led by node %d, not one of the cluster's", leader)
		return res
	}
	killed := time.Now()
	p.killBroker(i)
	pctx, cancel := context.WithTimeout(ctx, failoverTimeout)
	err = produce(pctx)
	res.took = time.Since(killed)
	cancel()
	if err != nil {
		res.err = fmt.Sprintf("no acks=all produce acknowledged within %v of the kill: %v", failoverTimeout, err)
		return res
	}
	res.newLeader, _, err = d.partitionLeader(ctx, topic, 0)
	switch {
	case err != nil:
		res.err = err.Error()
		return res
	case res.newLeader == leader:
		res.err = fmt.Sprintf("the metadata still names the killed broker %d as the leader", leader)
		return res
	}
	if last {
		return res
	}
	if err := p.startBroker(i); err != nil {
		res.err = fmt.Sprintf("restarting broker %d: %v", leader, err)
		return res
	}
	if err := d.waitBrokers(ctx, clusterBrokers, peerStartTimeout); err != nil {
		res.err = fmt.Sprintf("after restarting broker %d: %v", leader, err)
		return res
	}
	if err := d.waitISR(ctx, topic, clusterBrokers, topicReadyTimeout); err != nil {
		res.err = fmt.Sprintf("after restarting broker %d: %v", leader, err)
	}
	return res
}

// partitionLeader asks for fresh metadata (not the client's cache) and
// returns the leader of topic's partition and the metadata quorum's
// leader (Kafka's controller id).
func (d *kafkaDriver) partitionLeader(ctx context.Context, topic string, partition int32) (leader, controller int32, err error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, d.cl)
	if err != nil {
		return 0, 0, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Partition == partition {
				return p.Leader, resp.ControllerID, nil
			}
		}
	}
	return 0, 0, fmt.Errorf("no metadata for %s partition %d", topic, partition)
}
