package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// driver is a protocol's way to drive a peer: franz-go kgo for the Kafka
// peers, nats.go for NATS. Both implement the same workloads with the same
// records, rates and bounds.
type driver interface {
	createTopic(ctx context.Context, topic string, partitions int) error
	deleteTopic(ctx context.Context, topic string, partitions int) error
	// stored counts the records the peer holds for topic.
	stored(ctx context.Context, topic string, partitions int) (int64, error)
	produce(ctx context.Context, s produceSpec) (loadResult, error)
	consume(ctx context.Context, s consumeSpec) (loadResult, error)
	close()
}

// produceSpec is one produce run.
type produceSpec struct {
	topic       string
	partitions  int
	size        int
	acks        int // 0, 1 or -1 (all)
	compression string
	producers   int
	// duration bounds a closed-loop run (no record is sent after it) and is
	// the length of an open-loop schedule.
	duration time.Duration
	records  int64   // bound on the records sent, all producers together
	rate     float64 // records/s of all producers together; 0 is closed loop
	vals     *values
	// sending, when set, is called once just before the first record goes
	// out (the broker's CPU profile starts then).
	sending func()
	// txn, when not 0, makes each producer transactional, committing every
	// txn records (kgo only; closed loop).
	txn int
	// buffered bounds each producer's kgo buffer in bytes; 0 is 32 MiB.
	buffered int
}

// bufferBytes is each producer's kgo buffer.
func (s produceSpec) bufferBytes() int {
	if s.buffered > 0 {
		return s.buffered
	}
	return 32 << 20
}

// consumeSpec is one consume run. Consumers split the partitions between
// them (partition p goes to consumer p mod n): no group coordinator is
// involved, so the run measures fetching alone.
type consumeSpec struct {
	topic      string
	partitions int
	consumers  int
	size       int // value bytes of every record
	// want is the number of records to read. For a consumer that tails
	// producers, want is 0 and target delivers the number once the
	// producers are done.
	want   int64
	target <-chan int64
	// latency records, for every record, the time from the stamp in its
	// value (when it was planned or sent) to its arrival: end-to-end.
	latency bool
	vals    *values
	// readCommitted reads with isolation level read_committed (kgo only).
	readCommitted bool
}

// loadResult is what a client side measured.
type loadResult struct {
	records int64
	bytes   int64 // value bytes
	elapsed time.Duration
	// first and last are the stamps of the run's first send (or the
	// consumer's start) and of its last acknowledgement (or arrival).
	first, last int64
	lat         *hdrhistogram.Histogram // nil when the client measures none
	// unsent counts open-loop records whose planned time came and went
	// without the client being able to send them before the run's hard
	// bound; each is recorded at the latency it had reached by then.
	unsent int64
}

// schedule plans an open-loop run: record j of producer k (of n) is due at
// start + (j*n + k)/rate. Times are planned before the run, not taken when a
// send happens, so a stall delays every record behind it and each of them
// counts the delay (no coordinated omission).
type schedule struct {
	start    int64   // values stamp clock
	interval float64 // nanoseconds between two records of all producers
	n, k     int
}

func (s schedule) due(j int64) int64 {
	return s.start + int64(float64(j*int64(s.n)+int64(s.k))*s.interval)
}

// waitUntil sleeps until the stamp clock reaches at; it returns false when
// ctx ends first.
func waitUntil(ctx context.Context, v *values, at int64) bool {
	d := time.Duration(at - v.now())
	if d <= 0 {
		return ctx.Err() == nil
	}
	// Short waits sleep; Go's timers wake within tens of microseconds, and
	// that lateness is counted in the record's latency as any other.
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// quota splits a total of records between n producers.
func quota(total int64, n, k int) int64 {
	q := total / int64(n)
	if int64(k) < total%int64(n) {
		q++
	}
	return q
}

// openLoopTotal is the number of records an open-loop run plans.
func openLoopTotal(s produceSpec) int64 {
	return min(s.records, max(1, int64(s.rate*s.duration.Seconds())))
}

// span tracks the first and last events of a run across goroutines, in
// the values stamp clock.
type span struct {
	first, last atomic.Int64
}

func newSpan() *span {
	s := &span{}
	s.first.Store(-1)
	return s
}

func (s *span) begin(t int64) { s.first.CompareAndSwap(-1, t) }

func (s *span) end(t int64) {
	for {
		l := s.last.Load()
		if t <= l || s.last.CompareAndSwap(l, t) {
			return
		}
	}
}

func (s *span) elapsed() time.Duration {
	f := s.first.Load()
	if f < 0 {
		return 0
	}
	return time.Duration(max(0, s.last.Load()-f))
}

// firstErr keeps the first of many errors and counts them.
type firstErr struct {
	mu  sync.Mutex
	err error
	n   int64
}

func (f *firstErr) add(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	if f.err == nil {
		f.err = err
	}
}

func (f *firstErr) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		return nil
	}
	if f.n == 1 {
		return f.err
	}
	return fmt.Errorf("%w (and %d more errors)", f.err, f.n-1)
}

// tally is the shared count of a consume run: the consumers add what they
// read, and done closes when the target is reached.
type tally struct {
	got     atomic.Int64
	want    atomic.Int64 // -1 until known
	done    chan struct{}
	once    sync.Once
	span    *span
	targetC <-chan int64
}

func newTally(s consumeSpec, sp *span) *tally {
	t := &tally{done: make(chan struct{}), span: sp, targetC: s.target}
	if s.want > 0 {
		t.want.Store(s.want)
	} else {
		t.want.Store(-1)
	}
	return t
}

// add counts n records read at stamp time now.
func (t *tally) add(n int64, now int64) {
	if n == 0 {
		return
	}
	t.span.end(now)
	got := t.got.Add(n)
	if w := t.want.Load(); w >= 0 && got >= w {
		t.once.Do(func() { close(t.done) })
	}
}

// watch waits for the target of a tailing run, then for the count to
// reach it; it returns when done or ctx ends.
func (t *tally) watch(ctx context.Context) {
	if t.targetC != nil && t.want.Load() < 0 {
		select {
		case w := <-t.targetC:
			t.want.Store(w)
			if t.got.Load() >= w {
				t.once.Do(func() { close(t.done) })
			}
		case <-ctx.Done():
			return
		}
	}
	select {
	case <-t.done:
	case <-ctx.Done():
	}
}

func (t *tally) result(bytesPerRecord int) (loadResult, error) {
	got, want := t.got.Load(), t.want.Load()
	r := loadResult{records: got, bytes: got * int64(bytesPerRecord), elapsed: t.span.elapsed(),
		first: t.span.first.Load(), last: t.span.last.Load()}
	if want < 0 {
		return r, errors.New("the producers never finished")
	}
	if got < want {
		return r, fmt.Errorf("consumed %d of %d records within the run's bound", got, want)
	}
	return r, nil
}
