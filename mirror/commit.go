package mirror

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type tp struct {
	topic     string
	partition int32
}

// txnTimeout bounds one transaction's produce, flush and end: the run's
// context is not used, so that a SIGTERM lets the open transaction finish.
const txnTimeout = 60 * time.Second

// commit writes recs to their remote topics, in their source partitions,
// with their keys, values, headers and timestamps; then the offset syncs
// of the batch, a heartbeat when hb, and the flow's source offsets. With
// exactly once it is one transaction on the target: the records and the
// offsets that say they were mirrored are committed together or not at all.
// prod is one of task t's producers; w.mu is held.
func (w *worker) commit(t *task, prod *kgo.Client, recs []*kgo.Record, hb bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), txnTimeout)
	defer cancel()
	if w.f.ExactlyOnce {
		if err := prod.BeginTransaction(); err != nil {
			return fmt.Errorf("begin transaction: %w", err)
		}
	}
	var (
		perr  error
		bytes int64
		last  = map[tp]*kgo.Record{} // per source partition, its last record's copy on the target
		up    = map[tp]int64{}       // and that record's source offset
		// The first record of each partition too: a sync at each end of
		// the transaction's range lets a group's offset inside it
		// translate to at most the range's length before it.
		first   = map[tp]*kgo.Record{}
		firstUp = map[tp]int64{}
		mu      sync.Mutex
		done    = func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && perr == nil {
				perr = err
			}
		}
	)
	for _, r := range recs {
		out := &kgo.Record{
			Topic:     w.f.Policy.RemoteTopic(w.f.SourceAlias, r.Topic),
			Partition: r.Partition,
			Key:       r.Key,
			Value:     r.Value,
			Headers:   r.Headers,
			Timestamp: r.Timestamp,
		}
		bytes += int64(len(r.Key) + len(r.Value))
		k := tp{r.Topic, r.Partition}
		if _, ok := last[k]; !ok {
			first[k], firstUp[k] = out, r.Offset
		}
		last[k], up[k] = out, r.Offset
		prod.Produce(ctx, out, done)
	}
	if hb {
		h := Heartbeat{SourceAlias: w.f.SourceAlias, TargetAlias: w.f.TargetAlias, TimestampMs: time.Now().UnixMilli()}
		prod.Produce(ctx, &kgo.Record{Topic: heartbeatsTopic, Key: h.Key(), Value: h.Value()}, done)
	}
	// The records' target offsets are known once they are acknowledged:
	// the offset syncs need them.
	if err := prod.Flush(ctx); err != nil {
		return w.abort(prod, fmt.Errorf("flush records: %w", err))
	}
	if err := firstErr(&mu, &perr); err != nil {
		return w.abort(prod, fmt.Errorf("produce to the target: %w", err))
	}
	if t.pending == nil {
		t.pending = map[tp]OffsetSync{}
	}
	for k, out := range last {
		t.pending[k] = OffsetSync{Topic: k.topic, Partition: k.partition, Upstream: up[k], Downstream: out.Offset}
	}
	// With exactly once the offsets go in every transaction. Without, they
	// are flushed every offset.flush.interval.ms, as Kafka Connect flushes
	// a source task's offsets: a crash mirrors again what was produced
	// since the last flush.
	if w.f.ExactlyOnce && w.f.EmitOffsetSyncs {
		for k, out := range first {
			if out != last[k] {
				s := OffsetSync{Topic: k.topic, Partition: k.partition, Upstream: firstUp[k], Downstream: out.Offset}
				prod.Produce(ctx, &kgo.Record{Topic: w.f.OffsetSyncsTopic(), Key: s.Key(), Value: s.Value()}, done)
			}
		}
	}
	if w.f.ExactlyOnce || time.Since(t.lastOffsetFlush) >= w.f.OffsetFlushInterval {
		for k, s := range t.pending {
			if w.f.EmitOffsetSyncs {
				prod.Produce(ctx, &kgo.Record{Topic: w.f.OffsetSyncsTopic(), Key: s.Key(), Value: s.Value()}, done)
			}
			prod.Produce(ctx, &kgo.Record{Topic: w.f.OffsetsTopic(), Key: OffsetKey(w.f.SourceAlias, k.topic, k.partition), Value: OffsetValue(s.Upstream)}, done)
		}
		clear(t.pending)
		t.lastOffsetFlush = time.Now()
	}
	if err := prod.Flush(ctx); err != nil {
		return w.abort(prod, fmt.Errorf("flush offsets: %w", err))
	}
	if err := firstErr(&mu, &perr); err != nil {
		return w.abort(prod, fmt.Errorf("produce offsets to the target: %w", err))
	}
	if w.f.ExactlyOnce {
		if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("commit transaction: %w", err)
		}
	}
	for k := range last {
		w.next[k.topic][k.partition] = up[k] + 1
	}
	if hb {
		w.lastHeartbeat = time.Now()
	}
	w.m.add(len(recs), bytes, w.lag)
	return nil
}

// abort ends a failed transaction; the caller starts over from the
// target's committed offsets either way.
func (w *worker) abort(prod *kgo.Client, cause error) error {
	if !w.f.ExactlyOnce {
		return cause
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := prod.AbortBufferedRecords(ctx); err != nil {
		return errors.Join(cause, err)
	}
	if err := prod.EndTransaction(ctx, kgo.TryAbort); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

// readOffsets reads the flow's committed source offsets from the target's
// offsets topic, read_committed, up to its high watermark: the last
// source offset mirrored per source partition; and the flow's task count
// recorded there (tasks.go), 0 when none is. Control records are kept
// so that the reader sees the end of the log even when its last entry is
// a transaction marker. Not up to the last stable offset: an open
// transaction of another task (a process killed mid-transaction, whose
// tasks are not yet fenced by their next owner) holds it below offsets
// this task committed later, and resuming from the older ones mirrored
// records twice (TestMirrorSharedFlow saw it). Reading committed up to the
// high watermark waits for that transaction to end instead: its task's
// next owner fences it, or the coordinator aborts it at its timeout.
func (w *worker) readOffsets(ctx context.Context) (map[tp]int64, int, error) {
	topic := w.f.OffsetsTopic()
	ends, err := w.dstAdm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, 0, fmt.Errorf("list %s's end: %w", topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadmListed) {
		if o.Err == nil && o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	if err := ends.Error(); err != nil {
		return nil, 0, fmt.Errorf("list %s's end: %w", topic, err)
	}
	out := map[tp]int64{}
	tasks := 0 // the flow's recorded tasks.max, 0 if none is
	if len(want) == 0 {
		return out, tasks, nil
	}
	start := map[int32]kgo.Offset{}
	for p := range want {
		start[p] = kgo.NewOffset().AtStart()
	}
	cl, err := w.f.targetClient(kgo.ClientID("ringlog-mirror-"+w.f.Name()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, txnTimeout+30*time.Second)
	defer cancel()
	for len(want) > 0 {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			return nil, 0, fmt.Errorf("read %s: %w", topic, rctx.Err())
		}
		if err := fs.Err(); err != nil {
			return nil, 0, fmt.Errorf("read %s: %w", topic, err)
		}
		for _, r := range fs.Records() {
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
			if r.Attrs.IsControl() {
				continue
			}
			if flow, n, ok, err := decodeTaskCount(r.Key, r.Value); err != nil {
				return nil, 0, fmt.Errorf("read %s at %d/%d: %w", topic, r.Partition, r.Offset, err)
			} else if ok {
				if flow == w.f.Name() {
					tasks = n
				}
				continue
			}
			sp, off, ok, err := DecodeOffset(r.Key, r.Value)
			if err != nil {
				return nil, 0, fmt.Errorf("read %s at %d/%d: %w", topic, r.Partition, r.Offset, err)
			}
			k := tp{sp.Topic, sp.Partition}
			switch {
			case sp.Cluster != w.f.SourceAlias:
			case !ok:
				delete(out, k) // a tombstone: the offset was reset
			default:
				out[k] = off
			}
		}
	}
	return out, tasks, nil
}

type kadmListed = kadm.ListedOffset

func firstErr(mu *sync.Mutex, err *error) error {
	mu.Lock()
	defer mu.Unlock()
	return *err
}
