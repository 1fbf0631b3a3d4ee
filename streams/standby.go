package streams

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Standby tasks (Kafka's num.standby.replicas): a member given a task as
// a standby keeps a copy of the task's stores by reading their changelog
// partitions into the task's own state directory, with the checkpoints a
// restore writes (applyChangelog). When the task becomes active here,
// its restore starts from the standby's checkpoint and reads only what
// the standby had not applied yet. A standby processes nothing, writes
// no changelog and output, and is not queryable (App.Store reads active
// tasks only).
//
// One kgo client per instance reads every standby partition, assigned
// directly (no group), read_committed under exactly once. Its goroutine
// applies each fetch under standbys.mu; the processing goroutine opens
// and closes standby tasks under the same lock, so a task's database is
// never open twice: a standby is closed before its task is created
// active here, and opened only for a task not active here.
type standbys struct {
	app *App

	mu      sync.Mutex
	cl      *kgo.Client // created with the first standby
	tasks   map[taskID]*standbyTask
	byTopic map[string]string // changelog topic -> store
	cancel  context.CancelFunc
	done    chan struct{}
}

// standbyTask is one task's stores kept as a standby.
type standbyTask struct {
	id   taskID
	db   *stateDB
	next map[string]int64 // store -> next changelog offset to apply

	applied atomic.Int64 // changelog records applied
	lag     atomic.Int64 // records behind the changelogs' high watermarks, as of the last fetch
	lagBy   map[string]int64
}

// StandbyStats is one standby task's progress: changelog records applied
// to its stores, and how far they are behind the changelogs (as of its
// last fetch). Kafka Streams reports standby tasks' records through the
// same task metrics with a standby tag; here they are apart, so that
// TaskStats stays the active tasks'.
type StandbyStats struct {
	Task    string
	Applied int64
	Lag     int64
}

func newStandbys(a *App) *standbys {
	sb := &standbys{app: a, tasks: map[taskID]*standbyTask{}, byTopic: map[string]string{}}
	for _, sub := range a.topo.subs {
		for _, s := range sub.stores {
			sb.byTopic[a.changelogTopic(s.name)] = s.name
		}
	}
	return sb
}

// setStandbysWanted keeps the standby tasks of the last assignment (from
// the group goroutine) for the processing goroutine.
func (a *App) setStandbysWanted(ids []taskID) {
	a.assignMu.Lock()
	defer a.assignMu.Unlock()
	a.standbyWant = ids
	a.wakeLocked() // the loop opens and closes standbys between polls
}

// standbysHeld lists the standby tasks this member holds or was last
// told to hold, for its subscription (from the group goroutine).
func (a *App) standbysHeld() []taskID {
	a.assignMu.Lock()
	ids := append([]taskID(nil), a.standbyWant...)
	a.assignMu.Unlock()
	a.standby.mu.Lock()
	for id := range a.standby.tasks {
		if !containsTask(ids, id) {
			ids = append(ids, id)
		}
	}
	a.standby.mu.Unlock()
	sortTaskIDs(ids)
	return ids
}

func containsTask(ids []taskID, id taskID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func (a *App) stateful(id taskID) bool {
	return id.sub >= 0 && id.sub < len(a.topo.subs) && len(a.topo.subs[id.sub].stores) > 0
}

// syncStandbysLocked opens the standby tasks the assignment asks for and
// closes the others, and those whose task is active here (processing
// goroutine, App.mu held). A standby for a task still active here (its
// revoke not yet taken) waits for a later pass.
func (a *App) syncStandbysLocked(ctx context.Context) error {
	a.assignMu.Lock()
	want := a.standbyWant
	a.assignMu.Unlock()
	sb := a.standby
	sb.mu.Lock()
	var drop []taskID
	for id := range sb.tasks {
		if !containsTask(want, id) || a.tasks[id] != nil {
			drop = append(drop, id)
		}
	}
	sb.mu.Unlock()
	for _, id := range drop {
		sb.drop(id)
	}
	var open []taskID
	sb.mu.Lock()
	for _, id := range want {
		if _, ok := sb.tasks[id]; !ok && a.tasks[id] == nil && a.stateful(id) {
			open = append(open, id)
		}
	}
	sb.mu.Unlock()
	if len(open) == 0 {
		return nil
	}
	return sb.open(ctx, open)
}

// open starts standby tasks: each store from its checkpoint (wiped when
// past the changelog's end: the topic was recreated), as rangeFrom
// decides for a restore.
func (sb *standbys) open(ctx context.Context, ids []taskID) error {
	a := sb.app
	var topics []string
	for _, id := range ids {
		for _, s := range a.topo.subs[id.sub].stores {
			topics = append(topics, a.changelogTopic(s.name))
		}
	}
	ends, err := a.endOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("streams: standby changelog end offsets: %w", err)
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.cl == nil {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.cfg.Brokers...),
			kgo.KeepControlRecords(), kgo.FetchIsolationLevel(a.isolation()), kgo.FetchMaxWait(500 * time.Millisecond)}, a.cfg.ClientOpts...)...)
		if err != nil {
			return err
		}
		pctx, cancel := context.WithCancel(context.Background())
		sb.cl, sb.cancel, sb.done = cl, cancel, make(chan struct{})
		go sb.run(pctx)
	}
	// The partitions of the tasks opened are fetched even if a later one
	// fails to open.
	offsets := map[string]map[int32]kgo.Offset{}
	defer func() {
		if len(offsets) > 0 {
			sb.cl.AddConsumePartitions(offsets)
		}
	}()
	for _, id := range ids {
		dir := filepath.Join(a.cfg.StateDir, a.cfg.ApplicationID, id.String())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("streams: standby task %s: %w", id, err)
		}
		db, err := openStateDB(dir)
		if err != nil {
			return err
		}
		st := &standbyTask{id: id, db: db, next: map[string]int64{}, lagBy: map[string]int64{}}
		from := map[string]int64{} // changelog topic -> offset
		for _, s := range a.topo.subs[id.sub].stores {
			topic := a.changelogTopic(s.name)
			lo, ok := ends.Lookup(topic, id.partition)
			if !ok || lo.Err != nil {
				_ = db.close()
				return fmt.Errorf("streams: end offset of %s/%d: %v", topic, id.partition, lo.Err)
			}
			r, err := rangeFrom(db, id.String(), s.name, topic, id.partition, lo.Offset)
			if err != nil {
				_ = db.close()
				return err
			}
			st.next[s.name] = r.from
			st.lagBy[s.name] = r.end - r.from
			from[topic] = r.from
		}
		st.sumLag()
		sb.tasks[id] = st
		for topic, o := range from {
			if offsets[topic] == nil {
				offsets[topic] = map[int32]kgo.Offset{}
			}
			offsets[topic][id.partition] = kgo.NewOffset().At(o)
		}
	}
	return nil
}

func (st *standbyTask) sumLag() {
	var sum int64
	for _, l := range st.lagBy {
		sum += l
	}
	st.lag.Store(sum)
}

// drop closes a standby task: its partitions are no longer fetched (kgo
// drops what it buffered of them), its database is closed with what it
// applied, checkpointed.
func (sb *standbys) drop(id taskID) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.dropLocked(id)
}

func (sb *standbys) dropLocked(id taskID) {
	st, ok := sb.tasks[id]
	if !ok {
		return
	}
	rm := map[string][]int32{}
	for store := range st.next {
		rm[sb.app.changelogTopic(store)] = []int32{id.partition}
	}
	sb.cl.RemoveConsumePartitions(rm)
	if err := st.db.close(); err != nil {
		sb.app.log.Warn("streams: close standby task", "task", id.String(), "err", err)
	}
	delete(sb.tasks, id)
}

// run applies fetched changelog records until ctx ends.
func (sb *standbys) run(ctx context.Context) {
	defer close(sb.done)
	for {
		fetches := sb.cl.PollFetches(ctx)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			return
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				sb.app.log.Warn("streams: standby fetch", "topic", topic, "partition", p, "err", err)
			}
		})
		sb.apply(fetches)
	}
}

// apply writes one poll's records into the standby tasks' stores, one
// pebble batch per task with the new checkpoints. A task whose write
// fails is dropped; the next pass of the processing goroutine opens it
// again from its checkpoint.
func (sb *standbys) apply(fetches kgo.Fetches) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	batches := map[*standbyTask]*pebble.Batch{}
	var failed []taskID
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		store, ok := sb.byTopic[p.Topic]
		if !ok {
			return
		}
		st := sb.tasks[taskID{sb.app.topo.stores[store].node.sub, p.Partition}]
		if st == nil {
			return // dropped since the fetch
		}
		from, ok := st.next[store]
		if !ok {
			return
		}
		b := batches[st]
		if b == nil {
			b = st.db.db.NewBatch()
			batches[st] = b
		}
		next, n, err := applyChangelog(b, store, p.Records, from, math.MaxInt64)
		if err == nil {
			err = putCheckpoint(b, store, p.Partition, next)
		}
		if err != nil {
			sb.app.log.Error("streams: standby store", "task", st.id.String(), "store", store, "err", err)
			failed = append(failed, st.id)
			return
		}
		st.next[store] = next
		st.applied.Add(n)
		if p.HighWatermark >= 0 {
			st.lagBy[store] = max(0, p.HighWatermark-next)
			st.sumLag()
		}
	})
	for st, b := range batches {
		if containsTask(failed, st.id) {
			_ = b.Close()
			continue
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			sb.app.log.Error("streams: standby store", "task", st.id.String(), "err", err)
			failed = append(failed, st.id)
		}
	}
	for _, id := range failed {
		sb.dropLocked(id)
	}
}

// close stops the standby client and closes the standby tasks' stores.
func (sb *standbys) close() {
	if sb.cl != nil {
		sb.cancel()
		sb.cl.Close()
		<-sb.done
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for id, st := range sb.tasks {
		if err := st.db.close(); err != nil {
			sb.app.log.Warn("streams: close standby task", "task", id.String(), "err", err)
		}
		delete(sb.tasks, id)
	}
}

// stats lists the standby tasks' progress, sorted by task id.
func (sb *standbys) stats() []StandbyStats {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	out := make([]StandbyStats, 0, len(sb.tasks))
	for id, st := range sb.tasks {
		out = append(out, StandbyStats{Task: id.String(), Applied: st.applied.Load(), Lag: st.lag.Load()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Task < out[j].Task })
	return out
}
