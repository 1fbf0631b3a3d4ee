//go:build unix

package kafka_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/segment/batch"
)

// A process-level chaos test: three brokers on loopback, a topic with
// replication factor 3 and min.insync.replicas 2, an idempotent acks=all
// producer writing all along, while the leader of a partition is SIGKILLed
// and restarted, again and again, and between kills a broker is SIGSTOPped
// for longer than the broker session timeout (so it is fenced, then comes
// back as a stale member and must rejoin). Afterwards the invariants of
// acks=all hold: every acknowledged record is in the log once, at the
// offset it was acknowledged at; offsets are contiguous; and the three
// replicas' logs are byte for byte the same below the high watermark.
//
// The fault schedule comes from a seed (logged; RINGLOG_CHAOS_SEED replays
// it). Process timing is not reproducible, so a replay repeats the choices
// (which partition's leader, how long down, which broker stopped), not the
// interleaving. RINGLOG_CHAOS_HARSH=1 overlaps the faults (see chaosHarsh);
// RINGLOG_TEST_KEEP=dir keeps the brokers' logs and data of a failed run.

const (
	chaosPartitions = 6
	// chaosRun bounds the fault phase; the whole test (build, start,
	// faults, drain, read, compare) stays well under 90 s on two cores.
	chaosRun = 30 * time.Second
	// chaosStop is how long a broker stays SIGSTOPped: longer than
	// broker.session.timeout.ms (2000 in clusterProps), so the controller
	// fences it while it cannot answer.
	chaosStop = 3 * time.Second
	// chaosWindow bounds the records produced and not yet acknowledged or
	// failed; the producer blocks when it is full (a partition without
	// enough ISR holds it).
	chaosWindow = 2000
	// chaosRate is the records produced per second when nothing blocks:
	// enough for every fault to land in the middle of produce traffic,
	// little enough to leave the two cores to the brokers' failover.
	chaosRate = 3000
)

// chaosHarsh is the schedule of RINGLOG_CHAOS_HARSH=1, for hunting rather
// than for CI, in rounds of four: a kill; two brokers killed at once and
// back within the session timeout (the quorum and every partition's min
// ISR lost meanwhile, nobody fenced); at once the kill of a leader (an
// election among replicas that have just restarted); a stop. The cluster
// gets back to full ISR only after the stop, and the producer runs at
// chaosHarshRate with chaosHarshWindow records in flight.
const (
	chaosHarshRate   = 20000
	chaosHarshWindow = 10000
)

func TestClusterChaos(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	if testing.Short() {
		t.Skip("starts three broker processes and kills them for 30 s")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RINGLOG_CHAOS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("RINGLOG_CHAOS_SEED=%q: %v", s, err)
		}
	}
	harsh := os.Getenv("RINGLOG_CHAOS_HARSH") != ""
	rate, window := chaosRate, chaosWindow
	if harsh {
		rate, window = chaosHarshRate, chaosHarshWindow
	}
	t.Logf("seed %d (RINGLOG_CHAOS_SEED=%d replays the fault schedule), harsh %v", seed, seed, harsh)
	rng := rand.New(rand.NewPCG(seed, 0))
	began := time.Now()

	c := startCluster(t, 3, clusterProps)
	const topic = "chaos"
	adm := kadm.NewClient(c.client(kgo.Dialer(c.dial)))
	c.createTopic(adm, topic, chaosPartitions, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})

	prod := newChaosProducer(c.client(kgo.Dialer(c.dial), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(window),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })), topic, rate, window)
	go prod.run()
	live := newChaosReader(c, topic)
	go live.run()

	// The faults: two kills, then a stop, and so on until chaosRun is
	// spent. A kill takes the leader of a partition drawn from the seed
	// down for 0.3 to 3 s. The stops alternate between a broker that
	// leads nothing (after a kill, leadership stays where it moved: the
	// automatic preferred-leader election runs every 300 s), a follower
	// fenced and back, and the broker that leads the most, a stale leader
	// whose parked acks=all produces must not be acknowledged. After each
	// fault the cluster must be back to full strength (every ISR at three
	// replicas) within 20 s: a liveness check of fencing, restart,
	// catch-up and ISR expansion, and what makes every kill land on a
	// partition with a full ISR.
	var kills, stops int
	var schedule []string
	faultsStart := time.Now()
	faultsEnd := faultsStart.Add(chaosRun)
	for i := 0; time.Now().Before(faultsEnd); i++ {
		td := chaosMetadata(t, adm, topic)
		round, last := 3, 2
		if harsh {
			round, last = 4, 3
		}
		switch {
		case i%round == last:
			victim := chaosStopVictim(td, rng, stops%2 == 1)
			led := chaosLeads(td, int32(victim+1))
			t.Logf("SIGSTOP broker %d (leads %d partitions) for %v", victim+1, led, chaosStop)
			c.pause(victim, chaosStop)
			stops++
			schedule = append(schedule, fmt.Sprintf("stop %d (leading %d)", victim+1, led))
		case harsh && i%round == 1:
			a := rng.IntN(3)
			b := (a + 1 + rng.IntN(2)) % 3
			down := time.Duration(300+rng.IntN(1500)) * time.Millisecond
			t.Logf("SIGKILL brokers %d and %d, restart after %v", a+1, b+1, down)
			c.procs[a].signal(syscall.SIGKILL)
			c.procs[b].signal(syscall.SIGKILL)
			time.Sleep(down)
			// Together: either alone waits for a quorum that needs both.
			var wg sync.WaitGroup
			for _, v := range []int{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c.start(v)
				}()
			}
			wg.Wait()
			kills += 2
			schedule = append(schedule, fmt.Sprintf("kill %d and %d (down %v)", a+1, b+1, down))
		default:
			part := rng.IntN(chaosPartitions)
			down := time.Duration(300+rng.IntN(2700)) * time.Millisecond
			if harsh && i%round == 2 {
				// Right after the double kill: the partition's
				// leader as the metadata has it by now, if any.
				time.Sleep(time.Duration(rng.IntN(1000)) * time.Millisecond)
				td = chaosMetadata(t, adm, topic)
				if td.Partitions[int32(part)].Leader < 1 {
					t.Logf("partition %d has no leader yet; no kill", part)
					continue
				}
			}
			leader := td.Partitions[int32(part)].Leader
			if leader < 1 || int(leader) > len(c.procs) {
				t.Fatalf("partition %d: leader %d", part, leader)
			}
			t.Logf("SIGKILL broker %d, leader of partition %d, restart after %v", leader, part, down)
			c.procs[leader-1].signal(syscall.SIGKILL) // its exit status is "killed"
			time.Sleep(down)
			c.start(int(leader - 1))
			kills++
			schedule = append(schedule, fmt.Sprintf("kill %d (leader of %d, down %v)", leader, part, down))
		}
		if !harsh || i%round == last {
			if err := c.waitISR(adm, topic, 3, 20*time.Second); err != nil {
				t.Fatalf("after %s: %v", schedule[len(schedule)-1], err)
			}
		}
		if !harsh || i%round != 1 {
			time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
		}
	}
	faults := time.Since(faultsStart)
	live.stop()

	// Drain: what was produced is acknowledged or failed within 30 s.
	prod.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := prod.cl.Flush(ctx); err != nil {
		t.Errorf("records still unacknowledged 30 s after the faults stopped: %v", err)
	}
	if err := c.waitISR(adm, topic, 3, 20*time.Second); err != nil {
		t.Error(err) // the ISR is full after every fault but in harsh runs
	}
	cancel()
	prod.mu.Lock()
	defer prod.mu.Unlock() // the callbacks are done (or the test failed)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	ends, err := adm.ListEndOffsets(ctx, topic)
	cancel()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	hw := make([]int64, chaosPartitions)
	ends.Each(func(o kadm.ListedOffset) { hw[o.Partition] = o.Offset })

	// Read every partition from 0 to its high watermark.
	parts := map[int32]kgo.Offset{}
	for p := range int32(chaosPartitions) {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cons := c.client(kgo.Dialer(c.dial), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}), kgo.FetchMaxWait(200*time.Millisecond))
	logs := make([][]string, chaosPartitions) // logs[p][offset] = value
	gaps := 0
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	for p := 0; p < chaosPartitions; {
		if int64(len(logs[p])) >= hw[p] {
			p++
			continue
		}
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			cancel()
			t.Fatalf("partition %d: read %d records of %d after 30 s", p, len(logs[p]), hw[p])
		}
		fs.EachError(func(_ string, p int32, err error) { t.Logf("consume partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			l := &logs[r.Partition]
			if r.Offset != int64(len(*l)) {
				gaps++
				t.Errorf("partition %d: record at offset %d after %d records (not contiguous)", r.Partition, r.Offset, len(*l))
			}
			for int64(len(*l)) < r.Offset {
				*l = append(*l, "") // a hole: no value there
			}
			if r.Offset == int64(len(*l)) {
				*l = append(*l, string(r.Value))
			}
		})
	}
	cancel()

	// The invariants, counted, then reported.
	var read, missing, moved, dups, reordered, failedThere, unknown int
	for p := range chaosPartitions {
		at := map[string]int64{}
		lastSeq := -1
		for off, v := range logs[p] {
			if v == "" {
				continue
			}
			read++
			if prev, ok := at[v]; ok {
				dups++
				t.Errorf("partition %d: %q at offsets %d and %d", p, v, prev, off)
				continue
			}
			at[v] = int64(off)
			seq, ok := chaosSeq(v, p)
			if !ok {
				unknown++
				t.Errorf("partition %d offset %d: %q was never produced to this partition", p, off, v)
				continue
			}
			// The idempotent producer keeps a partition's records in the
			// order it produced them (KIP-98: at most 5 in flight).
			if seq < lastSeq {
				reordered++
				t.Errorf("partition %d offset %d: sequence %d after %d", p, off, seq, lastSeq)
			}
			lastSeq = seq
		}
		for v, off := range prod.acked[p] {
			got, ok := at[v]
			switch {
			case !ok:
				missing++
				if missing <= 10 {
					var there string
					if off < int64(len(logs[p])) {
						there = logs[p][off]
					}
					t.Errorf("partition %d: %q acknowledged at offset %d, not in the log (high watermark %d); the log has %q there, a consumer read %q there during the faults",
						p, v, off, hw[p], there, live.seen[p][off])
				}
			case got != off:
				moved++
				if moved <= 10 {
					t.Errorf("partition %d: %q acknowledged at offset %d, read at %d", p, v, off, got)
				}
			}
		}
		for v := range prod.failed[p] {
			if _, ok := at[v]; ok {
				failedThere++ // allowed: a failure is not a promise of absence
			}
		}
	}
	// What a consumer read during the faults is committed: it is in the
	// final log at the offset it was read at.
	liveRead, phantoms := 0, 0
	for p := range chaosPartitions {
		for off, v := range live.seen[p] {
			liveRead++
			var now string
			if off < int64(len(logs[p])) {
				now = logs[p][off]
			}
			if now != v {
				phantoms++
				if phantoms <= 10 {
					t.Errorf("partition %d offset %d: a consumer read %q during the faults, the log has %q there (high watermark %d)", p, off, v, now, hw[p])
				}
			}
		}
	}
	for _, ch := range live.changes {
		t.Errorf("a consumer read two values at one offset during the faults: %s", ch)
	}

	var acked, failed int
	for p := range chaosPartitions {
		acked += len(prod.acked[p])
		failed += len(prod.failed[p])
	}
	var errs []string
	for e, n := range prod.errs {
		errs = append(errs, fmt.Sprintf("%dx %s", n, e))
	}
	slices.Sort(errs)
	if len(errs) > 0 {
		t.Logf("produce failures: %s", strings.Join(errs, "; "))
	}

	// Stop every broker cleanly; the replicas hold the same bytes below the
	// high watermark.
	for i, p := range c.procs {
		if err := p.signal(syscall.SIGTERM); err != nil {
			t.Errorf("broker %d: SIGTERM: %v", i+1, err)
		}
	}
	var replicasSame, replicasDiffer, tailsDiffer int
	for p := range chaosPartitions {
		var sums [][sha256.Size]byte
		var whole [][]byte
		for i, pr := range c.procs {
			b := readPartitionLog(t, pr.dir, fmt.Sprintf("%s-%d", topic, p))
			below, next, err := logBelow(b, hw[p])
			if err != nil || next != hw[p] {
				t.Errorf("partition %d broker %d: batches below the high watermark %d end at %d (%d of %d bytes; %v)", p, i+1, hw[p], next, len(below), len(b), err)
			}
			sums = append(sums, sha256.Sum256(below))
			whole = append(whole, b)
		}
		if sums[0] == sums[1] && sums[0] == sums[2] {
			replicasSame++
		} else {
			replicasDiffer++
			t.Errorf("partition %d: logs below the high watermark %d differ: sha256 %x %x %x", p, hw[p], sums[0][:8], sums[1][:8], sums[2][:8])
		}
		if string(whole[0]) != string(whole[1]) || string(whole[0]) != string(whole[2]) {
			tailsDiffer++
			t.Logf("partition %d: whole logs differ beyond the high watermark %d: %d, %d, %d bytes", p, hw[p], len(whole[0]), len(whole[1]), len(whole[2]))
		}
	}

	t.Logf("chaos: seed=%d kills=%d stops=%d produced=%d acked=%d failed=%d (in log %d) read=%d missing=%d moved=%d duplicates=%d gaps=%d reordered=%d unknown=%d live-read=%d (not in the log %d, changed %d) replicas same=%d differ=%d (tails differ %d) faults=%v total=%v",
		seed, kills, stops, prod.sent, acked, failed, failedThere, read, missing, moved, dups, gaps, reordered, unknown,
		liveRead, phantoms, live.changed, replicasSame, replicasDiffer, tailsDiffer, faults.Round(time.Second), time.Since(began).Round(time.Second))
	t.Logf("schedule: %s", strings.Join(schedule, ", "))
	if acked == 0 || kills == 0 || stops == 0 {
		t.Errorf("a run without acknowledged records, kills or stops tests nothing")
	}
	if read < acked {
		t.Errorf("read %d records, fewer than the %d acknowledged", read, acked)
	}
}

// chaosProducer produces to every partition in turn at rate records per
// second, with at most window records in flight, and keeps what became of
// each.
type chaosProducer struct {
	cl           *kgo.Client
	topic        string
	rate, window int
	quit         chan struct{}
	done         chan struct{}

	mu     sync.Mutex
	sent   int
	acked  []map[string]int64 // per partition: value -> offset acknowledged
	failed []map[string]error
	errs   map[string]int // failures by error text
}

func newChaosProducer(cl *kgo.Client, topic string, rate, window int) *chaosProducer {
	p := &chaosProducer{cl: cl, topic: topic, rate: rate, window: window, quit: make(chan struct{}), done: make(chan struct{}), errs: map[string]int{}}
	for range chaosPartitions {
		p.acked = append(p.acked, map[string]int64{})
		p.failed = append(p.failed, map[string]error{})
	}
	return p
}

// chaosValue is a record's value: its partition and its sequence number in
// that partition, unique in the run, padded to 64 bytes.
func chaosValue(p, seq int) string {
	v := fmt.Sprintf("%d-%08d-", p, seq)
	return v + strings.Repeat("x", 64-len(v))
}

// chaosSeq parses chaosValue's sequence number; ok is false for a value
// that is not one of partition p's.
func chaosSeq(v string, p int) (int, bool) {
	var gotP, seq int
	if _, err := fmt.Sscanf(v, "%d-%d-", &gotP, &seq); err != nil || gotP != p || chaosValue(p, seq) != v {
		return 0, false
	}
	return seq, true
}

func (p *chaosProducer) run() {
	defer close(p.done)
	window := make(chan struct{}, p.window)
	const tick = 10 * time.Millisecond
	perTick := p.rate * int(tick) / int(time.Second)
	tk := time.NewTicker(tick)
	defer tk.Stop()
	seqs := make([]int, chaosPartitions)
	for n := 0; ; {
		select {
		case <-p.quit:
			return
		case <-tk.C:
		}
		for range perTick {
			select {
			case window <- struct{}{}:
			case <-p.quit:
				return
			}
			part := n % chaosPartitions
			n++
			v := chaosValue(part, seqs[part])
			seqs[part]++
			p.mu.Lock()
			p.sent++
			p.mu.Unlock()
			p.cl.Produce(context.Background(), &kgo.Record{Topic: p.topic, Partition: int32(part), Value: []byte(v)},
				func(r *kgo.Record, err error) {
					<-window
					p.mu.Lock()
					defer p.mu.Unlock()
					if err != nil {
						p.failed[r.Partition][v] = err
						p.errs[err.Error()]++
						return
					}
					p.acked[r.Partition][v] = r.Offset
				})
		}
	}
}

func (p *chaosProducer) stop() {
	close(p.quit)
	<-p.done
}

// pause stops broker i (SIGSTOP) for d, then lets it run on (SIGCONT): to
// the others it is silent, its sockets open, as in a long GC pause or a VM
// migration.
func (c *testCluster) pause(i int, d time.Duration) {
	c.t.Helper()
	p := c.procs[i].cmd.Process
	stopProcess(c.t, p)
	time.Sleep(d)
	if err := p.Signal(syscall.SIGCONT); err != nil {
		c.t.Fatal(err)
	}
}

// chaosMetadata returns topic's metadata, retrying for up to 10 s.
func chaosMetadata(t *testing.T, adm *kadm.Client, topic string) kadm.TopicDetail {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		td, err := adm.ListTopics(ctx, topic)
		cancel()
		if err == nil {
			err = td[topic].Err
		}
		if err == nil {
			return td[topic]
		}
		if time.Now().After(deadline) {
			t.Fatalf("metadata of %s: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// chaosLeads counts the partitions broker id leads.
func chaosLeads(td kadm.TopicDetail, id int32) int {
	n := 0
	for _, p := range td.Partitions {
		if p.Leader == id {
			n++
		}
	}
	return n
}

// chaosStopVictim picks the broker (index) to SIGSTOP: the one leading the
// fewest partitions, or with leader set the most; ties are broken by the
// seed.
func chaosStopVictim(td kadm.TopicDetail, rng *rand.Rand, leader bool) int {
	best, bestLeads := -1, 0
	for _, i := range rng.Perm(3) {
		n := chaosLeads(td, int32(i+1))
		if best < 0 || (!leader && n < bestLeads) || (leader && n > bestLeads) {
			best, bestLeads = i, n
		}
	}
	return best
}

// logBelow returns the prefix of a partition's log (its segments
// concatenated) made of the whole batches below offset hw, and the offset
// that prefix ends at (the next offset after its last batch). Replicas copy
// the leader's batches verbatim, so their prefixes are the same bytes.
func logBelow(b []byte, hw int64) (below []byte, next int64, err error) {
	pos := 0
	for pos < len(b) {
		h, err := batch.ParseHeader(b[pos:])
		if err != nil {
			return b[:pos], next, fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		if h.LastOffset() >= hw || pos+h.Size() > len(b) {
			break
		}
		if h.BaseOffset != next {
			return b[:pos], next, fmt.Errorf("batch at byte %d starts at offset %d, want %d", pos, h.BaseOffset, next)
		}
		pos += h.Size()
		next = h.NextOffset()
	}
	return b[:pos], next, nil
}

// chaosReader consumes every partition during the faults and keeps what it
// read. A consumer only ever sees committed records (below the HW), so
// every one is in the final log at the offset it was read at, and no
// offset is read with two values.
type chaosReader struct {
	cl   *kgo.Client
	quit chan struct{}
	done chan struct{}

	seen    []map[int64]string // per partition: offset -> value
	changed int                // offsets read with two values
	changes []string           // the first 10 of them
}

func newChaosReader(c *testCluster, topic string) *chaosReader {
	parts := map[int32]kgo.Offset{}
	for p := range int32(chaosPartitions) {
		parts[p] = kgo.NewOffset().AtStart()
	}
	r := &chaosReader{quit: make(chan struct{}), done: make(chan struct{}),
		cl: c.client(kgo.Dialer(c.dial), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}), kgo.FetchMaxWait(200*time.Millisecond))}
	for range chaosPartitions {
		r.seen = append(r.seen, map[int64]string{})
	}
	return r
}

func (r *chaosReader) run() {
	defer close(r.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-r.quit
		cancel()
	}()
	for ctx.Err() == nil {
		r.cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
			v := string(rec.Value)
			if old, ok := r.seen[rec.Partition][rec.Offset]; ok && old != v {
				r.changed++
				if len(r.changes) < 10 {
					r.changes = append(r.changes, fmt.Sprintf("partition %d offset %d: %q, then %q (leader epoch %d) at %s",
						rec.Partition, rec.Offset, old, v, rec.LeaderEpoch, time.Now().Format("15:04:05.000")))
				}
			}
			r.seen[rec.Partition][rec.Offset] = v
		})
	}
}

// stop ends run; seen and changes are the caller's from then on.
func (r *chaosReader) stop() {
	close(r.quit)
	<-r.done
}
