package txn

import (
	"context"
	"crypto/rand"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/ioring"
)

// The coordinator over a real engine (files, shards), driven through its
// API without a network; markers go to a recorder standing for the
// partition leaders.

type markerLog struct {
	mu      sync.Mutex
	markers []recordedMarker
	// refuse, while set, sends every marker back for a retry (its
	// leader unavailable).
	refuse bool
	// hold, when not nil, delays every marker's answer until it is
	// closed (markers being written).
	hold chan struct{}
}

type recordedMarker struct {
	m   Marker
	tps []engine.TP
}

func (l *markerLog) WriteMarkers(m Marker, tps []engine.TP, done func([]engine.TP, bool)) {
	l.mu.Lock()
	refuse, hold := l.refuse, l.hold
	if !refuse {
		l.markers = append(l.markers, recordedMarker{m, slices.Clone(tps)})
	}
	l.mu.Unlock()
	go func() {
		if hold != nil {
			<-hold
		}
		if refuse {
			done(tps, false)
			return
		}
		done(nil, false)
	}()
}

func (l *markerLog) all() []recordedMarker {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.markers)
}

func openCoordinator(t testing.TB, dir string, cfg Config) (*engine.Core, *Coordinator) {
	t.Helper()
	e, err := engine.OpenCore(engine.Config{Dir: dir, Shards: 2, IO: ioring.ModeAuto})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if cfg.Partitions == 0 {
		cfg.Partitions = 3
	}
	cfg.AllocateProducerID = e.AllocateProducerID
	cfg.OffsetsPartitionFor = func(string) int32 { return 0 }
	if cfg.Markers == nil {
		cfg.Markers = &markerLog{}
	}
	c, err := Start(e, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if _, ok := e.Topic(StateTopic); !ok {
		var id [16]byte
		rand.Read(id[:])
		if _, err := e.CreateTopicWithID(StateTopic, id, c.Partitions(), c.TopicConfigs(1)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range c.Partitions() {
		st, err := e.State(engine.TP{Topic: StateTopic, Partition: i})
		if err != nil {
			t.Fatal(err)
		}
		c.Elected(i, st.LeaderEpoch)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitLoaded(ctx); err != nil {
		t.Fatal(err)
	}
	return e, c
}

type initResult struct {
	code  int16
	pid   int64
	epoch int16
}

func initPID(c *Coordinator, id string, timeoutMs int32, pid int64, epoch int16) initResult {
	ch := make(chan initResult, 1)
	c.InitProducerID(id, timeoutMs, pid, epoch, func(code int16, pid int64, epoch int16) { ch <- initResult{code, pid, epoch} })
	return <-ch
}

// initUntilDone retries CONCURRENT_TRANSACTIONS, as clients do.
func initUntilDone(t *testing.T, c *Coordinator, id string) initResult {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := initPID(c, id, 60000, -1, -1)
		if r.code != kerr.ConcurrentTransactions.Code || time.Now().After(deadline) {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func addParts(c *Coordinator, id string, pid int64, epoch int16, tps ...engine.TP) int16 {
	ch := make(chan int16, 1)
	c.AddPartitions(id, pid, epoch, tps, func(code int16) { ch <- code })
	return <-ch
}

func endTxn(c *Coordinator, id string, pid int64, epoch int16, commit bool, version int16) initResult {
	ch := make(chan initResult, 1)
	c.EndTxn(id, pid, epoch, commit, version, func(code int16, pid int64, epoch int16) { ch <- initResult{code, pid, epoch} })
	return <-ch
}

func describe(t *testing.T, c *Coordinator, id string) (state string, epoch int16, parts int) {
	t.Helper()
	ch := make(chan struct{})
	c.Describe([]string{id}, func(s []kmsgState) {
		state, epoch = s[0].State, s[0].ProducerEpoch
		if s[0].ErrorCode != 0 {
			state = kerr.ErrorForCode(s[0].ErrorCode).Error()
		}
		for _, tp := range s[0].Topics {
			parts += len(tp.Partitions)
		}
		close(ch)
	})
	<-ch
	return state, epoch, parts
}

func waitState(t *testing.T, c *Coordinator, id, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, _, _ := describe(t, c, id)
		if s == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: state %s, want %s", id, s, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCommitWritesMarkersThenCompletes(t *testing.T) {
	ml := &markerLog{}
	_, c := openCoordinator(t, t.TempDir(), Config{Markers: ml})
	r := initPID(c, "tx", 60000, -1, -1)
	if r.code != 0 || r.epoch != 0 {
		t.Fatalf("init: %+v", r)
	}
	a, b := engine.TP{Topic: "a", Partition: 0}, engine.TP{Topic: "b", Partition: 2}
	if code := addParts(c, "tx", r.pid, r.epoch, a, b); code != 0 {
		t.Fatalf("add: %v", kerr.ErrorForCode(code))
	}
	if s, _, n := describe(t, c, "tx"); s != "Ongoing" || n != 2 {
		t.Fatalf("state %s with %d partitions", s, n)
	}
	if e := endTxn(c, "tx", r.pid, r.epoch, true, 4); e.code != 0 {
		t.Fatalf("end: %v", kerr.ErrorForCode(e.code))
	}
	waitState(t, c, "tx", "CompleteCommit")
	ms := ml.all()
	if len(ms) != 1 || !ms[0].m.Commit || ms[0].m.ProducerID != r.pid || ms[0].m.ProducerEpoch != 0 || len(ms[0].tps) != 2 {
		t.Fatalf("markers: %+v", ms)
	}
	// A retried commit is answered as done; an abort now is not valid.
	if e := endTxn(c, "tx", r.pid, r.epoch, true, 4); e.code != 0 {
		t.Fatalf("retried end: %v", kerr.ErrorForCode(e.code))
	}
	if e := endTxn(c, "tx", r.pid, r.epoch, false, 4); e.code != kerr.InvalidTxnState.Code {
		t.Fatalf("abort after commit: %v", kerr.ErrorForCode(e.code))
	}
}

func TestInitProducerIDFencesTheOldProducer(t *testing.T) {
	ml := &markerLog{}
	_, c := openCoordinator(t, t.TempDir(), Config{Markers: ml})
	old := initPID(c, "tx", 60000, -1, -1)
	if code := addParts(c, "tx", old.pid, old.epoch, engine.TP{Topic: "a"}); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	// A new instance: its transaction in flight is aborted at a bumped
	// epoch, and it gets the one after.
	r := initUntilDone(t, c, "tx")
	if r.code != 0 || r.pid != old.pid || r.epoch != old.epoch+2 {
		t.Fatalf("new instance: %+v (old %+v)", r, old)
	}
	ms := ml.all()
	if len(ms) != 1 || ms[0].m.Commit || ms[0].m.ProducerEpoch != old.epoch+1 {
		t.Fatalf("markers: %+v", ms)
	}
	if code := addParts(c, "tx", old.pid, old.epoch, engine.TP{Topic: "a"}); code != kerr.ProducerFenced.Code {
		t.Fatalf("the old producer adds a partition: %v", kerr.ErrorForCode(code))
	}
	if e := endTxn(c, "tx", old.pid, old.epoch, true, 4); e.code != kerr.ProducerFenced.Code {
		t.Fatalf("the old producer commits: %v", kerr.ErrorForCode(e.code))
	}
	// KIP-360: the current producer recovers with its id and epoch.
	rec := initPID(c, "tx", 60000, r.pid, r.epoch)
	if rec.code != 0 || rec.pid != r.pid || rec.epoch != r.epoch+1 {
		t.Fatalf("recovery: %+v", rec)
	}
	// The fenced one cannot.
	if f := initPID(c, "tx", 60000, old.pid, old.epoch); f.code != kerr.ProducerFenced.Code {
		t.Fatalf("fenced recovery: %+v", f)
	}
}

func TestEndTxnV5BumpsTheEpoch(t *testing.T) {
	_, c := openCoordinator(t, t.TempDir(), Config{})
	r := initPID(c, "tx", 60000, -1, -1)
	addParts(c, "tx", r.pid, r.epoch, engine.TP{Topic: "a"})
	e := endTxn(c, "tx", r.pid, r.epoch, false, 5)
	if e.code != 0 || e.pid != r.pid || e.epoch != r.epoch+1 {
		t.Fatalf("end v5: %+v", e)
	}
	waitState(t, c, "tx", "CompleteAbort")
	// A delayed retry of the same EndTxn is recognised; the old epoch
	// can no longer add partitions.
	if again := endTxn(c, "tx", r.pid, r.epoch, false, 5); again.code != 0 || again.epoch != e.epoch {
		t.Fatalf("retried end v5: %+v", again)
	}
	if code := addParts(c, "tx", r.pid, r.epoch, engine.TP{Topic: "a"}); code != kerr.ProducerFenced.Code {
		t.Fatalf("old epoch adds: %v", kerr.ErrorForCode(code))
	}
	if code := addParts(c, "tx", e.pid, e.epoch, engine.TP{Topic: "a"}); code != 0 {
		t.Fatalf("new epoch adds: %v", kerr.ErrorForCode(code))
	}
}

func TestTimedOutTransactionIsAborted(t *testing.T) {
	ml := &markerLog{}
	_, c := openCoordinator(t, t.TempDir(), Config{Markers: ml, AbortTimedOutInterval: 20 * time.Millisecond})
	r := initPID(c, "tx", 100, -1, -1)
	addParts(c, "tx", r.pid, r.epoch, engine.TP{Topic: "a"})
	waitState(t, c, "tx", "CompleteAbort")
	if _, epoch, _ := describe(t, c, "tx"); epoch != r.epoch+1 {
		t.Fatalf("epoch %d after the timeout, want %d", epoch, r.epoch+1)
	}
	if e := endTxn(c, "tx", r.pid, r.epoch, true, 4); e.code != kerr.ProducerFenced.Code {
		t.Fatalf("commit after the timeout: %v", kerr.ErrorForCode(e.code))
	}
}

func TestInvalidTransactionTimeout(t *testing.T) {
	_, c := openCoordinator(t, t.TempDir(), Config{MaxTimeout: time.Minute})
	if r := initPID(c, "tx", 60001, -1, -1); r.code != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("%+v", r)
	}
}

func TestStateSurvivesRestartAndPreparedIsFinished(t *testing.T) {
	dir := t.TempDir()
	ml := &markerLog{refuse: true}
	e, c := openCoordinator(t, dir, Config{Markers: ml, MarkerRetryBackoff: 10 * time.Millisecond})
	r := initPID(c, "tx", 60000, -1, -1)
	idle := initPID(c, "idle", 60000, -1, -1)
	addParts(c, "tx", r.pid, r.epoch, engine.TP{Topic: "a"}, engine.TP{Topic: "b"})
	if e := endTxn(c, "tx", r.pid, r.epoch, true, 4); e.code != 0 {
		t.Fatal(kerr.ErrorForCode(e.code))
	}
	// The markers cannot be written: the transaction stays prepared.
	time.Sleep(50 * time.Millisecond)
	waitState(t, c, "tx", "PrepareCommit")
	c.Close()
	e.Close()

	ml2 := &markerLog{}
	_, c2 := openCoordinator(t, dir, Config{Markers: ml2})
	waitState(t, c2, "tx", "CompleteCommit")
	if ms := ml2.all(); len(ms) != 1 || !ms[0].m.Commit || len(ms[0].tps) != 2 {
		t.Fatalf("markers after the restart: %+v", ms)
	}
	if s, epoch, _ := describe(t, c2, "idle"); s != "Empty" || epoch != idle.epoch {
		t.Fatalf("idle id after the restart: %s at %d", s, epoch)
	}
	// The next instance fences the one before the restart.
	if n := initPID(c2, "tx", 60000, -1, -1); n.code != 0 || n.pid != r.pid || n.epoch != r.epoch+1 {
		t.Fatalf("init after the restart: %+v", n)
	}
}

func TestIdleIDExpires(t *testing.T) {
	_, c := openCoordinator(t, t.TempDir(), Config{IDExpiration: 50 * time.Millisecond, RemoveExpiredInterval: 20 * time.Millisecond})
	initPID(c, "tx", 60000, -1, -1)
	waitState(t, c, "tx", kerr.TransactionalIDNotFound.Error())
}

type kmsgState = kmsg.DescribeTransactionsResponseTransactionState

// TestEmptyAbortV2: a transactions v2 client may abort a transaction with
// no partition (from Empty or after a completed one): the epoch is bumped,
// no marker is written; a commit of nothing stays INVALID_TXN_STATE, and
// a v1 client's abort of nothing too.
func TestEmptyAbortV2(t *testing.T) {
	ml := &markerLog{}
	_, c := openCoordinator(t, t.TempDir(), Config{Markers: ml})
	r := initPID(c, "tx", 60000, -1, -1)
	if e := endTxn(c, "tx", r.pid, r.epoch, false, 4); e.code != kerr.InvalidTxnState.Code {
		t.Fatalf("v1 abort of nothing: %v", kerr.ErrorForCode(e.code))
	}
	if e := endTxn(c, "tx", r.pid, r.epoch, true, 5); e.code != kerr.InvalidTxnState.Code {
		t.Fatalf("v2 commit of nothing: %v", kerr.ErrorForCode(e.code))
	}
	e := endTxn(c, "tx", r.pid, r.epoch, false, 5)
	if e.code != 0 || e.epoch != r.epoch+1 {
		t.Fatalf("v2 abort of nothing: %+v", e)
	}
	waitState(t, c, "tx", "CompleteAbort")
	// Again from CompleteAbort, at the new epoch; the old one is fenced
	// but for a retry of the same end.
	if again := endTxn(c, "tx", r.pid, r.epoch, false, 5); again.code != 0 || again.epoch != e.epoch {
		t.Fatalf("retried abort: %+v", again)
	}
	e2 := endTxn(c, "tx", e.pid, e.epoch, false, 5)
	if e2.code != 0 || e2.epoch != e.epoch+1 {
		t.Fatalf("second abort of nothing: %+v", e2)
	}
	waitState(t, c, "tx", "CompleteAbort")
	if ms := ml.all(); len(ms) != 0 {
		t.Fatalf("markers for empty transactions: %+v", ms)
	}
}

// TestCallsWaitForMarkers: a call that meets the previous transaction's
// markers being written waits for them (up to settleWait) instead of
// being answered CONCURRENT_TRANSACTIONS at once: a transactions v2
// producer's first add of its next transaction goes on as soon as the
// commit completes, and an InitProducerId too. Markers held past
// settleWait still get CONCURRENT_TRANSACTIONS.
func TestCallsWaitForMarkers(t *testing.T) {
	ml := &markerLog{}
	_, c := openCoordinator(t, t.TempDir(), Config{Markers: ml})
	r := initPID(c, "tx", 60000, -1, -1)
	tp := engine.TP{Topic: "a"}
	for round, hold := range []time.Duration{30 * time.Millisecond, 3 * settleWait} {
		ml.mu.Lock()
		ml.hold = make(chan struct{})
		release := ml.hold
		ml.mu.Unlock()
		if code := addParts(c, "tx", r.pid, r.epoch, tp); code != 0 {
			t.Fatalf("round %d: add: %v", round, kerr.ErrorForCode(code))
		}
		e := endTxn(c, "tx", r.pid, r.epoch, true, 5)
		if e.code != 0 {
			t.Fatalf("round %d: commit: %v", round, kerr.ErrorForCode(e.code))
		}
		began := time.Now()
		released := began.Add(hold)
		time.AfterFunc(hold, func() { close(release) })
		code := addParts(c, "tx", e.pid, e.epoch, tp)
		took := time.Since(began)
		if hold < settleWait {
			if code != 0 || time.Now().Before(released) {
				t.Fatalf("round %d: add while the markers are written: %v after %v, want success once they are (%v)", round, kerr.ErrorForCode(code), took, hold)
			}
		} else if code != kerr.ConcurrentTransactions.Code || took < settleWait {
			t.Fatalf("round %d: add while the markers are held: %v after %v, want CONCURRENT_TRANSACTIONS after %v", round, kerr.ErrorForCode(code), took, settleWait)
		}
		if hold > settleWait {
			waitState(t, c, "tx", "CompleteCommit")
			if code := addParts(c, "tx", e.pid, e.epoch, tp); code != 0 {
				t.Fatalf("round %d: add once the markers are written: %v", round, kerr.ErrorForCode(code))
			}
		}
		r = initResult{0, e.pid, e.epoch}
	}
	// An InitProducerId that meets an end being completed waits too.
	ml.mu.Lock()
	ml.hold = make(chan struct{})
	release := ml.hold
	ml.mu.Unlock()
	if e := endTxn(c, "tx", r.pid, r.epoch, false, 5); e.code != 0 {
		t.Fatalf("abort: %v", kerr.ErrorForCode(e.code))
	}
	time.AfterFunc(20*time.Millisecond, func() { close(release) })
	if i := initPID(c, "tx", 60000, -1, -1); i.code != 0 || i.epoch <= r.epoch {
		t.Fatalf("init while an abort completes: %+v", i)
	}
}

// BenchmarkCommitCycle is a transactions v2 producer's cycle on the
// coordinator over a real engine, markers answered at once: the first add
// of a transaction (parked until the last one completed), then its commit.
// ns/op is the coordinator's share of a transaction's latency.
func BenchmarkCommitCycle(b *testing.B) {
	_, c := openCoordinator(b, b.TempDir(), Config{})
	r := initPID(c, "tx", 60000, -1, -1)
	tp := engine.TP{Topic: "a"}
	b.ResetTimer()
	for range b.N {
		if code := addParts(c, "tx", r.pid, r.epoch, tp); code != 0 {
			b.Fatal(kerr.ErrorForCode(code))
		}
		e := endTxn(c, "tx", r.pid, r.epoch, true, 5)
		if e.code != 0 {
			b.Fatal(kerr.ErrorForCode(e.code))
		}
		r = e
	}
}

// TestListDurationFilter: ListTransactions' duration filter (v1, KIP-994)
// is Kafka's: whatever its state, a transaction not Dead is listed when its
// last start is more than the duration ago; an Empty one, never started,
// always is, and a completed one keeps its last start.
func TestListDurationFilter(t *testing.T) {
	_, c := openCoordinator(t, t.TempDir(), Config{})
	tp := engine.TP{Topic: "a"}
	if r := initPID(c, "empty", 60000, -1, -1); r.code != 0 {
		t.Fatal(kerr.ErrorForCode(r.code))
	}
	ongoing := initPID(c, "ongoing", 60000, -1, -1)
	if code := addParts(c, "ongoing", ongoing.pid, ongoing.epoch, tp); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	done := initPID(c, "done", 60000, -1, -1)
	if code := addParts(c, "done", done.pid, done.epoch, tp); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	if e := endTxn(c, "done", done.pid, done.epoch, true, 5); e.code != 0 {
		t.Fatal(kerr.ErrorForCode(e.code))
	}
	time.Sleep(20 * time.Millisecond)
	list := func(durationMs int64) []string {
		ch := make(chan *kmsg.ListTransactionsResponse, 1)
		c.List(ListFilter{DurationMs: durationMs}, func(r *kmsg.ListTransactionsResponse) { ch <- r })
		var ids []string
		for _, s := range (<-ch).TransactionStates {
			ids = append(ids, s.TransactionalID)
		}
		slices.Sort(ids)
		return ids
	}
	// The markers of "done" are written by then or soon: its state is
	// PrepareCommit or CompleteCommit, listed either way.
	if got := list(5); !slices.Equal(got, []string{"done", "empty", "ongoing"}) {
		t.Fatalf("started more than 5 ms ago: %v, want done, empty and ongoing", got)
	}
	if got := list(time.Hour.Milliseconds()); !slices.Equal(got, []string{"empty"}) {
		t.Fatalf("started more than an hour ago: %v, want empty (never started)", got)
	}
	if got := list(-1); !slices.Equal(got, []string{"done", "empty", "ongoing"}) {
		t.Fatalf("no duration filter: %v", got)
	}
}
