package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/streams"
)

// The Streams section (issue 17, see doc.go): a word count over the same
// lines with the streams library at least once and exactly once, and the
// same job written by hand with kgo (consume, count in a map, produce,
// commit), against ringlog io_uring, in the same rounds.

// streamsRun is one row of the section.
type streamsRun struct {
	id   string // in results.json
	name string // in the table
	// guarantee is the streams application's; handWritten marks the kgo
	// loop.
	guarantee   streams.Guarantee
	handWritten bool
	row         *row
}

// The section's goals (issue 17): at least once at no less than
// streamsALOTarget of the hand-written loop's records/s, exactly once at
// no less than streamsEOSTarget of at least once's.
const (
	streamsALOTarget = 0.8
	streamsEOSTarget = 0.7
)

// Shape of the input: lines of streamsWordsPerLine words drawn from
// streamsVocabulary words ("w0000" ...), 16 partitions like the suite's
// base workload.
const (
	streamsWordsPerLine = 2
	streamsVocabulary   = 10_000
	streamsPartitions   = 16
)

// Commit intervals: every row commits at least once each second (the
// hand-written loop as the streams application does) and exactly once
// each 100 ms, Kafka Streams' default for exactly_once_v2. Kafka's 30 s
// for at least once would keep 30 s of store writes in memory here (the
// stores are written at commit) for nothing the run measures: its end is
// a commit either way.
const (
	streamsCommitALO = time.Second
	streamsCommitEOS = 100 * time.Millisecond
)

type streamsSection struct {
	runs []*streamsRun
	ran  bool
	// input is the topic of lines, filled once for the whole section
	// (every row of every round reads it from the start), with inputBytes
	// of values; "" until filled.
	input      string
	inputBytes int64
	seq        int
}

func newStreamsSection() *streamsSection {
	return &streamsSection{runs: []*streamsRun{
		{id: "kgo-hand-written", name: "hand-written kgo loop (consume, count in a map, produce, commit; at least once)", handWritten: true, row: &row{}},
		{id: "streams-at-least-once", name: "streams word count, at least once", guarantee: streams.AtLeastOnce, row: &row{}},
		{id: "streams-exactly-once", name: "streams word count, exactly once (transactions, KIP-447)", guarantee: streams.ExactlyOnce, row: &row{}},
	}}
}

func (m *streamsSection) run(id string) *streamsRun {
	for _, r := range m.runs {
		if r.id == id {
			return r
		}
	}
	return nil
}

func (s *suite) streamsSelected() bool { return s.cfg.only == "" || s.cfg.only == onlyStreams }

// streamsSteps is the number of progress steps of the section.
func (s *suite) streamsSteps() int {
	if !s.streamsSelected() {
		return 0
	}
	return len(s.strm.runs) * s.cfg.runs
}

// streamsRecords is the number of lines each run counts the words of:
// 10 million, 100,000 with -quick.
func (s *suite) streamsRecords() int64 {
	if s.cfg.quick {
		return 100_000
	}
	return 10_000_000
}

// streamsRound measures each row once, in an order that rotates from
// round to round; the last round deletes the input.
func (s *suite) streamsRound(ctx context.Context, round int) {
	s.strm.ran = true
	p := s.peerFor(referencePeer, false, 0)
	rs := s.strm.runs
	for i := range rs {
		r := rs[(i+round)%len(rs)]
		s.progress.step("streams: " + r.name)
		s.streamsRunOn(ctx, r, p, round)
	}
	if round == s.cfg.runs-1 && s.strm.input != "" {
		if d, ok := s.drivers[p.id()].(*kafkaDriver); ok {
			if err := s.deleteAfter(d, s.strm.input); err != nil {
				fmt.Fprintf(s.out, "warning: streams: %v\n", err)
			}
		}
		s.strm.input = ""
	}
}

// streamsRunOn measures one row once.
func (s *suite) streamsRunOn(ctx context.Context, r *streamsRun, p *peer, round int) {
	n := s.streamsRecords()
	// At 10k lines/s at worst on this machine, the fill included.
	est := time.Duration(n/10_000)*time.Second + 10*time.Second
	if status, reason := s.precheck(ctx, p, est); status != "" {
		r.row.mark(status, reason)
		return
	}
	if err := s.ensureRunning(ctx, p); err != nil {
		r.row.mark(statusUnavailable, fmt.Sprintf("%s: %v", p.spec.name, err))
		return
	}
	d, ok := s.drivers[p.id()].(*kafkaDriver)
	if !ok {
		r.row.mark(statusUnavailable, p.spec.name+" has no Kafka driver")
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 2*est+60*time.Second)
	defer cancel()
	smp, err := s.streamsOnce(rctx, r, p, d)
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
}

// streamsFill writes the section's input once: n lines of
// streamsWordsPerLine words into a fresh topic.
func (s *suite) streamsFill(ctx context.Context, d *kafkaDriver, n int64) error {
	if s.strm.input != "" {
		return nil
	}
	topic := s.newTopic()
	if err := d.createTopic(ctx, topic, streamsPartitions); err != nil {
		return err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(d.seeds...), kgo.ProducerLinger(10 * time.Millisecond),
		kgo.MaxBufferedRecords(50_000), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}, d.opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(17, 17))
	var bytes int64
	var produceErr error
	errc := make(chan error, 1)
	for range n {
		v := streamsLine(rng)
		bytes += int64(len(v))
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("filling %s: %w", topic, err)
	}
	select {
	case produceErr = <-errc:
	default:
	}
	if produceErr != nil {
		return fmt.Errorf("filling %s: %w", topic, produceErr)
	}
	s.strm.input, s.strm.inputBytes = topic, bytes
	return nil
}

// streamsLine is one line of the input: words "w0000" to "w9999".
func streamsLine(rng *rand.Rand) []byte {
	b := make([]byte, 0, streamsWordsPerLine*6)
	for i := range streamsWordsPerLine {
		if i > 0 {
			b = append(b, ' ')
		}
		b = fmt.Appendf(b, "w%04d", rng.IntN(streamsVocabulary))
	}
	return b
}

// streamsOnce runs one row over the whole input into a fresh output
// topic, timed from the first line processed to the end of the commit
// that follows the last line's last count update (Close for the
// application, which commits; the loop's flush and offset commit). The
// first line, not the start: joining a fresh group waits for the
// broker's group.initial.rebalance.delay.ms (3 s, Kafka's default), which
// is no part of the job. The output must then hold one update per word
// (the loop) or at most that (the application, whose record cache
// merges a word's updates between commits).
func (s *suite) streamsOnce(ctx context.Context, r *streamsRun, p *peer, d *kafkaDriver) (smp sample, err error) {
	n := s.streamsRecords()
	if err := s.streamsFill(ctx, d, n); err != nil {
		return smp, err
	}
	words := n * streamsWordsPerLine
	out := s.newTopic()
	if err := d.createTopic(ctx, out, streamsPartitions); err != nil {
		return smp, err
	}
	s.strm.seq++
	app := fmt.Sprintf("bench-wc-%d", s.strm.seq)
	cleanup := []string{out}
	if !r.handWritten {
		cleanup = append(cleanup, app+"-words-repartition", app+"-counts-changelog")
	}
	state := filepath.Join(s.workDir, "streams-state", app)
	defer func() {
		for _, t := range cleanup {
			if derr := s.deleteAfter(d, t); derr != nil && err == nil && !strings.Contains(derr.Error(), "UNKNOWN_TOPIC") {
				err = derr
			}
		}
		os.RemoveAll(state)
	}()
	s.settle()
	m := s.meter(ctx, p, workload{})
	var elapsed time.Duration
	if r.handWritten {
		elapsed, err = s.handWrittenWordCount(ctx, d, app, out, n)
	} else {
		elapsed, err = s.streamsWordCount(ctx, r.guarantee, d, app, out, state, n, words)
	}
	if err != nil {
		return smp, err
	}
	smp = m.sample(ctx, loadResult{records: n, bytes: s.strm.inputBytes, elapsed: elapsed})
	stored, err := d.stored(ctx, out, streamsPartitions)
	if err != nil {
		return smp, fmt.Errorf("end offsets of the output: %w", err)
	}
	// The loop: one update per word. The application (its record cache
	// on): at most one update per word, at least one per word of the
	// vocabulary seen; exactly once adds a commit marker per transaction
	// and partition.
	switch {
	case r.handWritten && stored != words:
		return smp, fmt.Errorf("the output holds %d records, %d words were counted", stored, words)
	case !r.handWritten && (stored < min(words, streamsVocabulary/2) || (r.guarantee == streams.AtLeastOnce && stored > words)):
		return smp, fmt.Errorf("the output holds %d records, %d words were counted", stored, words)
	}
	return smp, nil
}

// streamsTopology is examples/wordcount's: lines split into words,
// repartitioned by word, counted in store "counts", the updates written
// to out (with the record cache: each word's latest count once per
// commit).
func streamsTopology(in, out string) (*streams.Topology, error) {
	b := streams.NewBuilder()
	lines := streams.Source(b, []string{in}, streams.String, streams.String)
	words := streams.FlatMapValues(lines, strings.Fields)
	byWord := streams.GroupBy(words, func(_, w string) string { return w },
		streams.KeySerde(streams.String), streams.ValueSerde(streams.String), streams.Named("words"))
	streams.Count(byWord, streams.Named("counts")).ToStream().To(out)
	return b.Build()
}

// streamsWordCount runs the application until its tasks processed every
// line (subtopology 0) and every word (subtopology 1), then closes it,
// which commits: the time from the first line processed (seen within the
// 10 ms between two reads of Stats) to Close's return.
func (s *suite) streamsWordCount(ctx context.Context, g streams.Guarantee, d *kafkaDriver, app, out, state string, n, words int64) (time.Duration, error) {
	topo, err := streamsTopology(s.strm.input, out)
	if err != nil {
		return 0, err
	}
	interval := streamsCommitALO
	if g == streams.ExactlyOnce {
		interval = streamsCommitEOS
	}
	a, err := streams.New(topo, streams.Config{ApplicationID: app, Brokers: d.seeds, StateDir: state, Guarantee: g,
		CommitInterval: interval, CacheMaxBytes: streams.DefaultCacheMaxBytes, ClientOpts: d.opts,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return 0, err
	}
	if err := a.Start(ctx); err != nil {
		return 0, err
	}
	var start time.Time
	stopped := make(chan error, 1)
	go func() { stopped <- a.Wait() }()
	for {
		lines, counted := streamsProcessed(a.Stats())
		if start.IsZero() && lines > 0 {
			start = time.Now()
		}
		if lines >= n && counted >= words {
			break
		}
		select {
		case err := <-stopped:
			return 0, fmt.Errorf("the application stopped after %d lines and %d words: %v", lines, counted, err)
		case <-ctx.Done():
			_ = a.Close()
			return 0, fmt.Errorf("%d of %d lines and %d of %d words processed: %w", lines, n, counted, words, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := a.Close(); err != nil {
		return 0, fmt.Errorf("closing the application: %w", err)
	}
	return time.Since(start), nil
}

// streamsProcessed sums the records processed by the tasks of each
// subtopology: lines (0_*) and words (1_*).
func streamsProcessed(st streams.Stats) (lines, words int64) {
	for _, t := range st.Tasks {
		switch {
		case strings.HasPrefix(t.Task, "0_"):
			lines += t.Processed
		case strings.HasPrefix(t.Task, "1_"):
			words += t.Processed
		}
	}
	return lines, words
}

// handWrittenWordCount is the yardstick: one kgo client in a consumer
// group of its own reads the lines, counts each word in a map, produces
// every count update (the word as key, the count as a big-endian int64,
// as the application writes them), and each second flushes the producer
// and commits the offsets (at least once; the counts are lost with the
// process). It ends with a flush and a commit once it has read n lines.
func (s *suite) handWrittenWordCount(ctx context.Context, d *kafkaDriver, group, out string, n int64) (time.Duration, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(d.seeds...), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(s.strm.input), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond), kgo.ProducerLinger(5 * time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression())}, d.opts...)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var start time.Time
	counts := make(map[string]int64, streamsVocabulary)
	errc := make(chan error, 1)
	onErr := func(_ *kgo.Record, err error) {
		if err != nil {
			select {
			case errc <- err:
			default:
			}
		}
	}
	commit := func() error {
		if err := cl.Flush(ctx); err != nil {
			return err
		}
		select {
		case err := <-errc:
			return fmt.Errorf("produce: %w", err)
		default:
		}
		return cl.CommitUncommittedOffsets(ctx)
	}
	var read int64
	lastCommit := time.Now()
	for read < n {
		fs := cl.PollRecords(ctx, 1000)
		if ctx.Err() != nil {
			return 0, fmt.Errorf("%d of %d lines read: %w", read, n, ctx.Err())
		}
		if err := fs.Err0(); err != nil {
			return 0, err
		}
		if start.IsZero() && !fs.Empty() {
			start = time.Now()
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			for _, w := range strings.Fields(string(r.Value)) {
				counts[w]++
				v := binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(counts[w]))
				cl.Produce(ctx, &kgo.Record{Topic: out, Key: []byte(w), Value: v}, onErr)
			}
		})
		if time.Since(lastCommit) >= streamsCommitALO {
			if err := commit(); err != nil {
				return 0, err
			}
			lastCommit = time.Now()
		}
	}
	if err := commit(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// streamsTargets are issue 17's two goals, from the section's medians.
func (s *suite) streamsTargets() []ratioTarget {
	alo := ratioTarget{target: fmt.Sprintf("streams word count at least once records/s ≥ %.1fx the same job hand-written with kgo", streamsALOTarget),
		atLeast: true, bound: streamsALOTarget, format: fmtCount, where: " lines/s; Streams section"}
	eos := ratioTarget{target: fmt.Sprintf("streams word count exactly once records/s ≥ %.1fx at least once", streamsEOSTarget),
		atLeast: true, bound: streamsEOSTarget, format: fmtCount, where: " lines/s; Streams section"}
	if s.streamsSelected() && s.strm.ran {
		alo.compare(metricRate, s.strm.run("streams-at-least-once").row, s.strm.run("kgo-hand-written").row,
			"streams at least once", "the hand-written kgo loop")
		eos.compare(metricRate, s.strm.run("streams-exactly-once").row, s.strm.run("streams-at-least-once").row,
			"streams exactly once", "streams at least once")
	}
	return []ratioTarget{alo, eos}
}
