package streams

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Restoring between polls, as Kafka Streams' StreamThread does: a task
// whose stores lag their changelogs is created restoring, its input
// partitions kept paused on the main consumer (every assigned partition
// is paused by the assignment callback, before kgo fetches it, and
// resumed once its task runs), and the processing loop reads a little of the
// changelogs at each pass (restoreStep: one fetch of the restore
// consumer), between its polls of the main consumer. The loop keeps
// polling, committing the other tasks' work and letting rebalances
// through: a long restore no longer holds the group's rebalance back
// (kgo's BlockRebalanceOnPoll waited for it, and so did every other
// member). A task whose restore ends gets a fresh batch over the
// restored store, its processors' Init, and its partitions resumed; a
// task revoked while restoring stops reading (its ranges are dropped,
// the checkpoint written so far kept for the next owner here).

// restoreStepWait bounds one restore step's wait for changelog records,
// and so how long the loop stays away from the main consumer.
const restoreStepWait = 100 * time.Millisecond

// restorer is the restores under way (processing goroutine only, mu
// held).
type restorer struct {
	cl    *kgo.Client // nil while nothing is restoring
	left  map[string]map[int32]*restoreRange
	tasks map[taskID]*restoringTask
}

type restoringTask struct {
	t      *task
	ranges int // not yet done
}

func (r *restorer) active() bool { return r != nil && len(r.tasks) > 0 }

// startRestores computes what the fresh tasks need restored; those with
// nothing are returned, ready to run; the others are paused and left to
// restoreStep.
func (a *App) startRestores(ctx context.Context, fresh []*task) ([]*task, error) {
	var topics []string
	for _, t := range fresh {
		for _, s := range t.sub.stores {
			topics = append(topics, a.changelogTopic(s.name))
		}
	}
	if len(topics) == 0 {
		return fresh, nil
	}
	ends, err := a.endOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("streams: changelog end offsets: %w", err)
	}
	var ready []*task
	for _, t := range fresh {
		var ranges []restoreRange
		for _, s := range t.sub.stores {
			topic := a.changelogTopic(s.name)
			lo, ok := ends.Lookup(topic, t.id.partition)
			if !ok || lo.Err != nil {
				return nil, fmt.Errorf("streams: end offset of %s/%d: %v", topic, t.id.partition, lo.Err)
			}
			r, err := rangeFrom(t.db, t.id.String(), s.name, topic, t.id.partition, lo.Offset)
			if err != nil {
				return nil, err
			}
			if r.from < r.end {
				r.t = t
				ranges = append(ranges, r)
			}
		}
		if len(ranges) == 0 {
			ready = append(ready, t)
			continue
		}
		if err := a.addRestore(t, ranges); err != nil {
			return nil, err
		}
	}
	return ready, nil
}

// addRestore adds t's ranges to the restore consumer (t's input stays
// paused: takeAssignedLocked does not resume it).
func (a *App) addRestore(t *task, ranges []restoreRange) error {
	if a.restorer == nil {
		a.restorer = &restorer{}
	}
	r := a.restorer
	if r.cl == nil {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.cfg.Brokers...), kgo.KeepControlRecords(),
			kgo.FetchIsolationLevel(a.isolation()), kgo.FetchMaxWait(restoreStepWait)}, a.cfg.ClientOpts...)...)
		if err != nil {
			return fmt.Errorf("streams: restore consumer: %w", err)
		}
		r.cl, r.left, r.tasks = cl, map[string]map[int32]*restoreRange{}, map[taskID]*restoringTask{}
	}
	t.restoring.Store(true)
	offsets := map[string]map[int32]kgo.Offset{}
	for i := range ranges {
		rg := ranges[i]
		if r.left[rg.topic] == nil {
			r.left[rg.topic] = map[int32]*restoreRange{}
		}
		r.left[rg.topic][rg.partition] = &rg
		if offsets[rg.topic] == nil {
			offsets[rg.topic] = map[int32]kgo.Offset{}
		}
		offsets[rg.topic][rg.partition] = kgo.NewOffset().At(rg.from)
	}
	r.tasks[t.id] = &restoringTask{t: t, ranges: len(ranges)}
	r.cl.AddConsumePartitions(offsets)
	return nil
}

// restoringTasks is the tasks restoring now.
func (a *App) restoringTasks() []*task {
	if a.restorer == nil {
		return nil
	}
	out := make([]*task, 0, len(a.restorer.tasks))
	for _, rt := range a.restorer.tasks {
		out = append(out, rt.t)
	}
	return out
}

// inputs is the task's partition of each of its source topics.
func (t *task) inputs() map[string][]int32 {
	out := map[string][]int32{}
	for topic := range t.srcs {
		out[topic] = []int32{t.id.partition}
	}
	return out
}

// restoreStep reads one fetch of the changelogs being restored into the
// tasks' stores, and starts the tasks whose restore is done.
func (a *App) restoreStep(ctx context.Context) error {
	r := a.restorer
	if !r.active() {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, restoreStepWait)
	fetches := r.cl.PollFetches(sctx)
	cancel()
	if ctx.Err() != nil {
		return nil // the loop is stopping
	}
	var ferr error
	fetches.EachError(func(topic string, p int32, err error) {
		if ferr == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && r.left[topic][p] != nil {
			ferr = fmt.Errorf("streams: restore %s/%d: %w", topic, p, err)
		}
	})
	if ferr != nil {
		return ferr
	}
	batches := map[*task]*pebble.Batch{}
	var reports []RestoreProgress
	var done []*task
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		rg := r.left[p.Topic][p.Partition]
		if rg == nil || len(p.Records) == 0 || ferr != nil {
			return
		}
		t := rg.t
		b := batches[t]
		if b == nil {
			b = t.db.db.NewBatch()
			batches[t] = b
		}
		rp, err := rg.apply(b, p.Records, &t.restored)
		ferr = firstErr(ferr, err)
		reports = append(reports, rp)
		if rp.Done {
			r.forget(rg.topic, rg.partition)
			if rt := r.tasks[t.id]; rt != nil {
				if rt.ranges--; rt.ranges == 0 {
					done = append(done, t)
				}
			}
		}
	})
	for _, b := range batches {
		if ferr == nil {
			ferr = b.Commit(pebble.NoSync)
		}
		_ = b.Close()
	}
	if ferr != nil {
		return fmt.Errorf("streams: restore: %w", ferr)
	}
	if a.cfg.OnRestore != nil {
		for _, rp := range reports {
			a.cfg.OnRestore(rp)
		}
	}
	sort.Slice(done, func(i, j int) bool {
		return done[i].id.sub < done[j].id.sub || done[i].id.sub == done[j].id.sub && done[i].id.partition < done[j].id.partition
	})
	for _, t := range done {
		delete(r.tasks, t.id)
		// The pending batch was opened before the restore wrote to the
		// database: a new one sees the restored state.
		t.discardState()
		t.restoring.Store(false)
		if err := t.initProcessors(); err != nil {
			return err
		}
		a.cl.ResumeFetchPartitions(t.inputs())
	}
	return nil
}

// forget stops reading one changelog partition (kgo drops what it
// buffered of it).
func (r *restorer) forget(topic string, p int32) {
	delete(r.left[topic], p)
	r.cl.RemoveConsumePartitions(map[string][]int32{topic: {p}})
}

// dropRestore stops restoring t (revoked, or the instance closing): its
// changelog partitions are no longer read, its input resumed (the
// partitions are revoked, and may come back), what it restored so far
// kept with its checkpoints.
func (a *App) dropRestore(t *task) {
	r := a.restorer
	if r == nil || r.tasks[t.id] == nil {
		return
	}
	delete(r.tasks, t.id)
	for topic, ps := range r.left {
		for p, rg := range ps {
			if rg.t == t {
				r.forget(topic, p)
			}
		}
	}
	t.restoring.Store(false)
	a.cl.ResumeFetchPartitions(t.inputs())
}

// closeRestorer closes the restore consumer (the loop ended).
func (a *App) closeRestorer() {
	if a.restorer != nil && a.restorer.cl != nil {
		a.restorer.cl.Close()
		a.restorer.cl = nil
	}
}
