package bench

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// sample is one run's measurement of one table on one peer.
type sample struct {
	round   int
	records int64
	bytes   int64
	elapsed time.Duration
	lat     *hdrhistogram.Histogram // microseconds; nil when not measured
	rate    float64                 // planned records/s of an open-loop run

	cpu    time.Duration // broker CPU during the run
	cpuSys time.Duration // of cpu, in the kernel (stime)
	cpuOK  bool
	// syscalls the broker made during the run (perf), and the requests
	// it served: from its own counter (requestsBroker) or as written by
	// the suite's kgo clients.
	syscalls       float64
	syscallsOK     bool
	requests       float64
	requestsOK     bool
	requestsBroker bool
	rss            int64 // broker peak RSS during the run
	rssOK          bool
	sendfile       float64 // fetched record bytes sent by sendfile during the run
	copied         float64 // ... and copied instead
	fetchOK        bool
	client         time.Duration // this process's CPU during the run (the clients)
	// brokerP99 is the broker's own produce TotalTimeMs p99 over the run
	// (its histogram's buckets, see brokerhist.go), in microseconds.
	brokerP99   float64
	brokerP99OK bool
	// kernel is the broker's kernel samples by cause over the run
	// (kernelsplit.go), for the same runs as syscalls.
	kernel   kernelSplit
	kernelOK bool
}

// outcome is a sample or the reason there is none.
type outcome struct {
	sample sample
	err    error
}

// meter reads a peer's counters around one measured stretch.
type meter struct {
	p      *peer
	before usage
	// sys counts the broker's system calls, for the workloads of issue
	// 13's table on ringlog's single brokers; nil otherwise.
	sys *syscallCounter
	// kprof samples the broker's kernel stacks in the same runs.
	kprof *kernelProfiler
	// kd is the peer's Kafka driver, whose clients count the requests
	// they write; nil for NATS.
	kd            *kafkaDriver
	clientsBefore int64
}

func (s *suite) meter(ctx context.Context, p *peer, w workload) meter {
	p.resetPeakRSS()
	m := meter{p: p}
	if kd, ok := s.drivers[p.id()].(*kafkaDriver); ok {
		m.kd = kd
	}
	if countsSyscalls(w, p) {
		// Each returns once its perf has attached.
		m.kprof = startKernelProfiler(ctx, p.pids()[0])
		m.sys = startSyscallCounter(ctx, p.pids()[0])
	}
	m.before = p.snapshot(ctx)
	if m.kd != nil {
		m.clientsBefore = m.kd.requests.Load()
	}
	return m
}

func (m meter) sample(ctx context.Context, res loadResult) sample {
	after := m.p.snapshot(ctx)
	smp := sample{records: res.records, bytes: res.bytes, elapsed: res.elapsed, lat: res.lat,
		client: after.client - m.before.client}
	if m.kd != nil {
		smp.requests, smp.requestsOK = float64(m.kd.requests.Load()-m.clientsBefore), true
	}
	if m.before.requestsOK && after.requestsOK {
		smp.requests, smp.requestsOK, smp.requestsBroker = after.requests-m.before.requests, true, true
	}
	if m.sys != nil {
		smp.syscalls, smp.syscallsOK = m.sys.stop()
	}
	if m.kprof != nil {
		smp.kernel, smp.kernelOK = m.kprof.stop(ctx)
	}
	if m.before.cpuOK && after.cpuOK {
		smp.cpu, smp.cpuSys, smp.cpuOK = cpuBetween(m.before, after)
	}
	if m.before.produceHistOK && after.produceHistOK {
		if d, err := histDelta(m.before.produceHist, after.produceHist); err == nil {
			var ms float64
			ms, smp.brokerP99OK = histQuantile(0.99, d)
			smp.brokerP99 = ms * 1000
		}
	}
	smp.rss, smp.rssOK = m.p.peakRSS()
	if m.before.fetchOK && after.fetchOK {
		smp.sendfile, smp.copied, smp.fetchOK = after.sendfile-m.before.sendfile, after.copied-m.before.copied, true
	}
	return smp
}

// settle leaves the next run nothing of the previous one to pay for: the
// data file system is synced (the previous peer's dirty pages would
// otherwise be written back during this run) and the clients' garbage is
// collected.
func (s *suite) settle() {
	syncFS(s.workDir)
	runtime.GC()
	debug.FreeOSMemory()
}

// recordsBound is the record bound of a produce run of values of size.
func (s *suite) recordsBound(size int) int64 {
	return max(1, min(s.cfg.maxRecords, s.cfg.maxBytes/int64(size)))
}

// exec runs w on p and returns an outcome per part of the workload. Parts
// already marked unavailable in rows are not run.
func (s *suite) exec(ctx context.Context, w workload, p *peer, round int, rows map[string]*row) map[string]outcome {
	d := s.drivers[p.id()]
	out := map[string]outcome{}
	fail := func(err error) map[string]outcome {
		for part, r := range rows {
			if r.status == "" {
				out[part] = outcome{err: err}
			}
		}
		return out
	}
	s.settle()
	topic := s.newTopic()
	if err := d.createTopic(ctx, topic, w.partitions); err != nil {
		return fail(err)
	}
	defer func() {
		// Deleting frees kfake's memory and the others' disk before the
		// next run; a failure here is reported against the run.
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.deleteTopic(dctx, topic, w.partitions); err != nil {
			for part, o := range out {
				if o.err == nil {
					out[part] = outcome{err: fmt.Errorf("after the run: %w", err)}
				}
			}
		}
	}()
	spec := produceSpec{topic: topic, partitions: w.partitions, size: w.size, acks: w.acks,
		compression: w.compression, producers: w.producers, duration: s.cfg.duration,
		records: s.recordsBound(w.size), vals: s.vals, txn: w.txn}
	if connsWorkload(w) {
		spec.buffered = connsBuffered
	}
	cspec := consumeSpec{topic: topic, partitions: w.partitions, consumers: w.consumers, size: w.size, vals: s.vals}
	switch w.kind {
	case kindProduce, kindLatency:
		if rows[partProduce].status != "" {
			return out
		}
		if w.kind == kindLatency {
			spec.rate = s.openLoopRate(w)
		}
		var prof sync.WaitGroup
		if w.main && round == 0 && p.spec.key == referencePeer && !p.fsync {
			secs := max(1, int(s.cfg.duration/time.Second))
			spec.sending = func() { prof.Go(func() { s.profile = captureProfile(ctx, p, secs, s.cfg.outDir) }) }
		}
		var idle *idleConns
		if w.idle > 0 {
			var err error
			if idle, err = openIdle(ctx, p.seeds()[0], w.idle); err != nil {
				return fail(fmt.Errorf("opening %s idle connections: %w", fmtThousands(w.idle), err))
			}
			defer idle.close()
		}
		m := s.meter(ctx, p, w)
		var res loadResult
		var err error
		if w.client == "kcat" {
			spec.records = s.kcatRecords(p, w)
			res, err = s.kcat.produce(ctx, p.kcatConn(), spec)
		} else {
			res, err = d.produce(ctx, spec)
		}
		prof.Wait()
		smp := m.sample(ctx, res)
		smp.rate = spec.rate
		if err == nil && idle != nil {
			// Every idle connection must have lasted the run.
			var closed int
			if closed, err = idle.closedByPeer(); err == nil && closed > 0 {
				err = fmt.Errorf("the broker closed %d of the %s idle connections during the run", closed, fmtThousands(w.idle))
			}
		}
		if err == nil {
			err = s.checkStored(ctx, d, w, topic, res.records)
		}
		if err == nil && w.kind == kindProduce && w.client == "kgo" {
			s.peakBytes[fmt.Sprintf("%s/%d", p.id(), w.size)] = float64(res.bytes) / res.elapsed.Seconds()
		}
		out[partProduce] = outcome{sample: smp, err: err}
	case kindConsume:
		fill := spec
		fill.acks, fill.compression = 1, "none"
		if w.txn > 0 {
			fill.acks = -1
		}
		fill.records = max(1, s.cfg.fillBytes/int64(w.size))
		fill.duration = 4 * time.Minute // the records bound ends it
		filled, err := d.produce(ctx, fill)
		if err != nil {
			return fail(fmt.Errorf("filling the topic: %w", err))
		}
		n, err := storedAtLeast(ctx, d, topic, w.partitions, filled.records)
		if err != nil {
			return fail(fmt.Errorf("counting the records: %w", err))
		}
		cspec.want = n
		// The cached consumes read from the page cache (readFileCache).
		if err := readFileCache(p.dataDir); err != nil {
			return fail(fmt.Errorf("reading the data into the page cache: %w", err))
		}
		if w.txn > 0 {
			// The end offsets count the commit markers too, which no
			// consumer sees as records.
			cspec.want = filled.records
			for _, rc := range []bool{false, true} {
				part := map[bool]string{false: partWarmKgo, true: partWarmKgoRC}[rc]
				if rows[part].status != "" {
					continue
				}
				c := cspec
				c.readCommitted = rc
				m := s.meter(ctx, p, w)
				res, err := d.consume(ctx, c)
				out[part] = outcome{sample: m.sample(ctx, res), err: err}
			}
			break
		}
		if rows[partWarmKgo].status == "" {
			m := s.meter(ctx, p, w)
			res, err := d.consume(ctx, cspec)
			out[partWarmKgo] = outcome{sample: m.sample(ctx, res), err: err}
		}
		if rows[partWarmKcat].status == "" {
			m := s.meter(ctx, p, w)
			res, err := s.kcat.consume(ctx, p.kcatConn(), cspec)
			out[partWarmKcat] = outcome{sample: m.sample(ctx, res), err: err}
		}
		if rows[partColdKgo].status == "" {
			if err := dropFileCache(p.dataDir); err != nil {
				out[partColdKgo] = outcome{err: fmt.Errorf("dropping the cache: %w", err)}
			} else {
				m := s.meter(ctx, p, w)
				res, err := d.consume(ctx, cspec)
				out[partColdKgo] = outcome{sample: m.sample(ctx, res), err: err}
			}
		}
	case kindE2E, kindBoth:
		if w.kind == kindE2E {
			spec.rate = s.openLoopRate(w)
		}
		target := make(chan int64, 1)
		cspec.target, cspec.latency = target, true
		var cres loadResult
		var cerr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			cres, cerr = d.consume(ctx, cspec)
		}()
		// Let the consumers connect and park in their first fetch, so
		// that connection set-up is not counted as latency.
		time.Sleep(300 * time.Millisecond)
		m := s.meter(ctx, p, w)
		pres, perr := d.produce(ctx, spec)
		// Even after a failure the consumers get a target (what was
		// acknowledged), so that they stop instead of waiting out the
		// run's bound.
		target <- pres.records
		<-done
		if perr != nil && cerr == nil {
			cerr = fmt.Errorf("the producers failed: %w", perr)
		}
		both := m.sample(ctx, cres)
		both.rate = spec.rate
		// Consumers are measured from the producers' first send.
		if pres.first >= 0 && cres.last > pres.first {
			both.elapsed = time.Duration(cres.last - pres.first)
		}
		out[partConsume] = outcome{sample: both, err: cerr}
		if w.kind == kindBoth {
			ps := both
			ps.records, ps.bytes, ps.elapsed, ps.lat = pres.records, pres.bytes, pres.elapsed, pres.lat
			if perr == nil {
				perr = s.checkStored(ctx, d, w, topic, pres.records)
			}
			out[partProduce] = outcome{sample: ps, err: perr}
		}
	}
	return out
}

// openLoopRate is the rate of an open-loop run of w: its own, or the
// suite's.
func (s *suite) openLoopRate(w workload) float64 {
	if w.rate > 0 {
		return w.rate
	}
	return s.rate
}

// checkStored verifies that a peer holds every record it acknowledged.
func (s *suite) checkStored(ctx context.Context, d driver, w workload, topic string, acked int64) error {
	if w.acks == 0 {
		return nil // nothing was promised
	}
	n, err := storedAtLeast(ctx, d, topic, w.partitions, acked)
	if err != nil {
		return fmt.Errorf("counting the records stored: %w", err)
	}
	if n < acked {
		return fmt.Errorf("the peer holds %d records %v after acknowledging %d", n, storedPatience, acked)
	}
	return nil
}

// storedPatience is how long a peer may take to show what it acknowledged:
// a cluster acknowledges an acks=1 produce before its followers have the
// records, and ListOffsets reports the high watermark, which waits for them.
const storedPatience = 10 * time.Second

// storedAtLeast counts the records the peer holds for topic, asking again
// for up to storedPatience while the count is below want.
func storedAtLeast(ctx context.Context, d driver, topic string, partitions int, want int64) (int64, error) {
	deadline := time.Now().Add(storedPatience)
	for {
		n, err := d.stored(ctx, topic, partitions)
		if err != nil || n >= want || time.Now().After(deadline) {
			return n, err
		}
		select {
		case <-ctx.Done():
			return n, nil
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kcatRecords sizes a kcat produce run, which kcat cannot end on a clock:
// as many records as kgo produced on the same peer in the run's duration
// (or, before kgo ran, as ringlog io_uring did), within the run's bounds.
func (s *suite) kcatRecords(p *peer, w workload) int64 {
	mbs, ok := s.peakBytes[fmt.Sprintf("%s/%d", p.id(), w.size)]
	if !ok {
		mbs, ok = s.peakBytes[fmt.Sprintf("%s/%d", referencePeer, w.size)]
	}
	if !ok {
		mbs = 50e6
	}
	return max(int64(w.producers), min(s.recordsBound(w.size), int64(mbs*s.cfg.duration.Seconds()/float64(w.size))))
}

// cpuBetween is the CPU the peer's processes used between two snapshots,
// and the kernel's part of it. The total is the threads' precise count
// when every thread of before is still there in after (an exited thread
// took its count with it); the ticks of utime and stime otherwise. The
// kernel's part is the ticks' share of the precise total (ticks are all
// that say which side a moment was spent on).
func cpuBetween(before, after usage) (cpu, sys time.Duration, ok bool) {
	ticks, ticksSys := after.cpu-before.cpu, after.cpuSys-before.cpuSys
	if !before.threadsOK || !after.threadsOK {
		return ticks, ticksSys, true
	}
	var precise time.Duration
	for tid, t0 := range before.threads {
		t1, ok := after.threads[tid]
		if !ok || t1 < t0 {
			return ticks, ticksSys, true
		}
		precise += t1 - t0
	}
	for tid, t1 := range after.threads {
		if _, ok := before.threads[tid]; !ok {
			precise += t1 // a thread started during the run
		}
	}
	if ticks > 0 {
		sys = time.Duration(float64(precise) * float64(ticksSys) / float64(ticks))
	}
	return precise, sys, true
}
