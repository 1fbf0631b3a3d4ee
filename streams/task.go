package streams

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// taskID names a task as Kafka Streams does: "<subtopology>_<partition>".
type taskID struct {
	sub       int
	partition int32
}

func (id taskID) String() string { return fmt.Sprintf("%d_%d", id.sub, id.partition) }

// task processes partition `partition` of every source topic of one
// subtopology, with its own instance of the subtopology's processors and
// its own stores. Only the processing goroutine touches a task, but for
// its counters (atomics) and its database, which interactive queries
// read under App.tasksMu.
type task struct {
	app *App
	id  taskID
	sub *subtopology

	db     *stateDB
	batch  *pebble.Batch // writes since the last commit; reads see them
	stores map[string]*taskStore
	caches []*namedCache // of the caching stores, in creation order
	// beforeAdvance run before a record moves stream time forward, with
	// the new time: a windowed store's cache forwards the windows that
	// time closes (window.go) while they are still open downstream.
	beforeAdvance []func(int64)
	insts         map[*node]any
	srcs          map[string]*taskSource // by topic
	err           error                  // sticky: the first processing failure

	// streamTime is the largest record timestamp the task has seen (ms),
	// the largest of its partitions' times (streamtime.go): windows close
	// when it passes their end plus grace. Restored at task start from the
	// committed offsets' metadata, rewound with them by discardState.
	streamTime int64
	// discards counts discardState calls: state a processor keeps in
	// memory beside its stores (a join's stream time) is stale after one.
	discards int

	clMu   sync.Mutex
	clNext map[string]int64 // store -> next changelog offset written since the last commit

	processed atomic.Int64 // records processed
	lag       atomic.Int64 // records behind the high watermark, summed over the task's partitions
	lagByTP   map[string]int64
	dropped   atomic.Int64 // records dropped for windows closed (late: stream time past end + grace), stale foreign-key join answers
	restored  atomic.Int64 // changelog records restored
	restoring atomic.Bool

	procs            []*taskProc    // Process operators' instances (processor.go)
	puncts           []*punctuation // scheduled punctuations (punctuate.go)
	punctuations     atomic.Int64   // punctuations fired
	punctuationNanos atomic.Int64   // time spent in punctuators
}

func (a *App) newTask(id taskID) (*task, error) {
	dir := filepath.Join(a.cfg.StateDir, a.cfg.ApplicationID, id.String())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("streams: task %s: %w", id, err)
	}
	t := &task{app: a, id: id, sub: a.topo.subs[id.sub], stores: map[string]*taskStore{},
		insts: map[*node]any{}, srcs: map[string]*taskSource{}, clNext: map[string]int64{}, lagByTP: map[string]int64{}}
	if len(t.sub.stores) > 0 {
		db, err := openStateDB(dir)
		if err != nil {
			return nil, err
		}
		t.db = db
		t.batch = db.db.NewIndexedBatch()
	}
	for _, src := range t.sub.sources {
		fn := t.instance(src).(sourceFn)
		for _, topic := range a.sourceTopics[src] {
			t.srcs[topic] = &taskSource{fn: fn, time: unknownTime, committed: unknownTime}
		}
	}
	return t, nil
}

// instance returns n's processing function for this task, built once.
func (t *task) instance(n *node) any {
	if f, ok := t.insts[n]; ok {
		return f
	}
	f := n.inst(t)
	t.insts[n] = f
	return f
}

func (t *task) fail(err error) {
	if t.err == nil {
		t.err = fmt.Errorf("streams: task %s: %w", t.id, err)
	}
}

func (t *task) process(r *kgo.Record) error {
	src, ok := t.srcs[r.Topic]
	if !ok {
		return fmt.Errorf("streams: task %s: no source for topic %q", t.id, r.Topic)
	}
	ts := r.Timestamp.UnixMilli()
	if ts > src.time {
		src.time = ts
	}
	if ts > t.streamTime {
		for _, f := range t.beforeAdvance {
			f(ts)
		}
		t.streamTime = ts
	}
	if err := src.fn(r); err != nil {
		t.fail(err)
	}
	t.processed.Add(1)
	if t.err == nil {
		t.punctuate(StreamTimePunctuation, t.streamTime)
	}
	return t.err
}

// send produces a record of the task (output, repartition, changelog).
func (t *task) send(r *kgo.Record) { t.app.produce(r, nil) }

// taskStore is one store of a task: reads and writes go through the
// task's pending batch, and each write is also sent to the changelog,
// partition = the task's partition.
type taskStore struct {
	t         *task
	name      string
	changelog string
	cache     *namedCache // count, reduce, aggregate with Config.CacheMaxBytes > 0
}

func (t *task) store(name string) *taskStore {
	if s, ok := t.stores[name]; ok {
		return s
	}
	s := &taskStore{t: t, name: name, changelog: t.app.changelogTopic(name)}
	t.stores[name] = s
	return s
}

// get reads through the store's cache, if it has one (a cached nil is a
// delete not yet flushed: a table's).
func (s *taskStore) get(k []byte) ([]byte, bool, error) {
	if s.cache != nil {
		if v, ok := s.cache.get(k); ok {
			return v, v != nil, nil
		}
	}
	return get(s.t.batch, s.name, k)
}

func (s *taskStore) put(k, v []byte, ts time.Time) {
	if err := s.t.batch.Set(dataKey(s.name, k), v, nil); err != nil {
		s.t.fail(err)
		return
	}
	s.log(k, v, ts)
}

func (s *taskStore) delete(k []byte, ts time.Time) {
	if err := s.t.batch.Delete(dataKey(s.name, k), nil); err != nil {
		s.t.fail(err)
		return
	}
	s.log(k, nil, ts)
}

func (s *taskStore) log(k, v []byte, ts time.Time) {
	t := s.t
	r := &kgo.Record{Topic: s.changelog, Partition: t.id.partition, Key: k, Value: v, Timestamp: ts}
	t.app.produce(r, func(r *kgo.Record) {
		t.clMu.Lock()
		if r.Offset+1 > t.clNext[s.name] {
			t.clNext[s.name] = r.Offset + 1
		}
		t.clMu.Unlock()
	})
}

// commitState writes the pending batch and the changelog checkpoints to
// the database: called once the records it logged are durable in Kafka
// (flushed, or their transaction committed).
func (t *task) commitState() error {
	t.timesCommitted()
	t.punctuationsCommitted()
	if t.db == nil {
		return nil
	}
	t.clMu.Lock()
	for store, next := range t.clNext {
		if err := putCheckpoint(t.batch, store, t.id.partition, next); err != nil {
			t.clMu.Unlock()
			return err
		}
	}
	clear(t.clNext)
	t.clMu.Unlock()
	if err := t.batch.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("streams: task %s: commit state: %w", t.id, err)
	}
	t.batch = t.db.db.NewIndexedBatch()
	return nil
}

// flushCache writes and forwards what one caching store holds, as
// flushCaches does for all (evictions wait).
func (t *task) flushCache(nc *namedCache) {
	c := t.app.cache
	c.flushing = true
	nc.flushDirty()
	c.flushing = false
}

// discardState drops the writes since the last commit (an aborted
// transaction, or partitions lost).
func (t *task) discardState() {
	for _, nc := range t.caches {
		nc.drop()
	}
	t.rewindTimes()
	t.rewindPunctuations()
	if t.db == nil {
		return
	}
	t.clMu.Lock()
	clear(t.clNext)
	t.clMu.Unlock()
	_ = t.batch.Close()
	t.batch = t.db.db.NewIndexedBatch()
	t.err = nil
	t.discards++
}

func (t *task) close() error {
	t.closeProcessors()
	for _, nc := range t.caches { // clean after a commit; dirty if discarded
		nc.drop()
	}
	if t.db == nil {
		return nil
	}
	_ = t.batch.Close()
	return t.db.close()
}
