package streams

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// RestoreProgress reports a store's restore from its changelog (or a
// global store's bootstrap from its topic): Restored of Total records
// (offsets, so compacted-away records count as done), Done on the last
// report of a partition.
type RestoreProgress struct {
	Task      string // "<sub>_<partition>", or "global"
	Store     string
	Topic     string
	Partition int32
	Restored  int64
	Total     int64
	Done      bool
}

// restoreRange is one changelog partition to read into a store, from the
// checkpoint to the end offset taken when the restore began.
type restoreRange struct {
	t         *task // restoring between polls (restoring.go)
	task      string
	store     string
	topic     string
	partition int32
	from, end int64
}

// endOffsets lists the high watermark of each topic's partitions: where a
// restore ends. Exactly once, the restore reads read_committed up to it,
// so it waits for the transactions open there (a killed owner's) to end:
// stopping at the last stable offset instead would miss what the task's
// previous owner committed after a zombie's transaction began, and a
// checkpoint past that LSO would look like a recreated changelog.
func (a *App) endOffsets(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
	return a.adm.ListEndOffsets(ctx, topics...)
}

// rangeFrom returns what to restore of one partition into store: from
// the checkpoint (or the start) to end. A checkpoint past the end means
// the changelog was recreated: the store is wiped and restored whole.
func rangeFrom(db *stateDB, task, store, topic string, partition int32, end int64) (restoreRange, error) {
	cp, err := db.checkpoint(store, partition)
	if err != nil {
		return restoreRange{}, err
	}
	if cp > end {
		if err := db.wipe(store); err != nil {
			return restoreRange{}, err
		}
		cp = -1
	}
	if cp < 0 {
		cp = 0
	}
	return restoreRange{task: task, store: store, topic: topic, partition: partition, from: cp, end: end}, nil
}

// restoreRanges reads the ranges into db with a consumer of its own,
// read_committed under exactly once, control records kept so that a
// changelog ending in a transaction marker is seen to end.
func (a *App) restoreRanges(ctx context.Context, db *stateDB, ranges []restoreRange, counter interface{ Add(int64) int64 }) error {
	offsets := map[string]map[int32]kgo.Offset{}
	left := map[string]map[int32]*restoreRange{}
	for i := range ranges {
		r := &ranges[i]
		if offsets[r.topic] == nil {
			offsets[r.topic] = map[int32]kgo.Offset{}
			left[r.topic] = map[int32]*restoreRange{}
		}
		offsets[r.topic][r.partition] = kgo.NewOffset().At(r.from)
		left[r.topic][r.partition] = r
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.cfg.Brokers...), kgo.ConsumePartitions(offsets),
		kgo.KeepControlRecords(), kgo.FetchIsolationLevel(a.isolation()), kgo.FetchMaxWait(200 * time.Millisecond)}, a.cfg.ClientOpts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	remaining := len(ranges)
	for remaining > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("streams: restore %s/%d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		b := db.db.NewBatch()
		var reports []RestoreProgress
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			r := left[p.Topic][p.Partition]
			if r == nil || len(p.Records) == 0 {
				return
			}
			rp, err := r.apply(b, p.Records, counter)
			ferr = firstErr(ferr, err)
			reports = append(reports, rp)
			if rp.Done {
				delete(left[p.Topic], p.Partition)
				remaining--
				cl.PauseFetchPartitions(map[string][]int32{p.Topic: {p.Partition}})
			}
		})
		if ferr != nil {
			return ferr
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			return fmt.Errorf("streams: restore: %w", err)
		}
		if a.cfg.OnRestore != nil {
			for _, rp := range reports {
				a.cfg.OnRestore(rp)
			}
		}
	}
	return nil
}

// apply writes a fetch of the range's changelog partition into b, with
// the checkpoint, counts the records in counter and moves the range on;
// it returns the progress to report.
func (r *restoreRange) apply(b *pebble.Batch, recs []*kgo.Record, counter interface{ Add(int64) int64 }) (RestoreProgress, error) {
	next, n, err := applyChangelog(b, r.store, recs, r.from, r.end)
	counter.Add(n)
	err = firstErr(err, putCheckpoint(b, r.store, r.partition, next))
	r.from = next
	return RestoreProgress{Task: r.task, Store: r.store, Topic: r.topic, Partition: r.partition, Restored: next, Total: r.end, Done: next >= r.end}, err
}

// applyChangelog writes the records of one changelog partition (fetched
// in offset order) into b, for store, from offset from up to end
// (exclusive): records before from are skipped (a standby's fetch
// buffered before its position moved), a record at or past end stops
// it. It returns the next offset to read and the data records written
// (control records advance the offset, nothing else). The restore and
// the standby tasks share it, and so the checkpoint they leave.
func applyChangelog(b *pebble.Batch, store string, recs []*kgo.Record, from, end int64) (next, n int64, err error) {
	next = from
	for _, rec := range recs {
		if rec.Offset < from {
			continue
		}
		if rec.Offset >= end {
			// A marker (or a record) past the end: the transactions
			// open at the end have ended.
			return end, n, nil
		}
		next = rec.Offset + 1
		if rec.Attrs.IsControl() {
			continue
		}
		k := dataKey(store, rec.Key)
		if rec.Value == nil {
			err = b.Delete(k, nil)
		} else {
			err = b.Set(k, rec.Value, nil)
		}
		if err != nil {
			return next, n, err
		}
		n++
	}
	return next, n, nil
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
