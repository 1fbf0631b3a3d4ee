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

// batch is what one of a task's producers has produced since it last
// committed: with exactly once, its open transaction. A batch spans polls
// (the next poll's records are produced while the previous poll's are
// still in flight, and the producer's pipeline stays full) until it holds
// Options.TxnRecordsMax records or TxnBytesMax bytes, has been open
// TxnInterval, or the source has nothing more to give: a transaction's
// fixed costs (AddPartitionsToTxn, draining the pipeline, the offsets'
// produce, EndTxn and its markers: five round trips to the target) are
// paid once per batch rather than once per poll.
// syncPoint is a record of a batch whose target offset, once known,
// makes an offset sync.
type syncPoint struct {
	out *kgo.Record
	up  int64
}

type batch struct {
	ctx    context.Context // bounds the batch's produce, flush and end (txnTimeout)
	cancel context.CancelFunc
	began  time.Time
	recs   int
	bytes  int64
	// Per source partition, its first and last record's copy on the
	// target (their offsets there are known once acknowledged) and their
	// source offsets: the offset syncs and the source offsets committed.
	first, last     map[tp]*kgo.Record
	firstUp, lastUp map[tp]int64
	// Per source partition, the records between its first and last
	// that get an offset sync of their own (every Flow.OffsetLagMax
	// records), with their source offsets, in order; and the records
	// since the last sync point.
	syncs map[tp][]syncPoint
	since map[tp]int
	hb    bool // holds a heartbeat

	mu   sync.Mutex
	perr error // the first produce error
	done func(*kgo.Record, error)
}

func newBatch() *batch {
	b := &batch{began: time.Now(), first: map[tp]*kgo.Record{}, last: map[tp]*kgo.Record{},
		firstUp: map[tp]int64{}, lastUp: map[tp]int64{}, syncs: map[tp][]syncPoint{}, since: map[tp]int{}}
	b.ctx, b.cancel = context.WithTimeout(context.Background(), txnTimeout)
	b.done = func(_ *kgo.Record, err error) {
		if err != nil {
			b.mu.Lock()
			if b.perr == nil {
				b.perr = err
			}
			b.mu.Unlock()
		}
	}
	return b
}

func (b *batch) err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.perr
}

// holdsAny says whether the batch holds a record of any of recs' source
// partitions.
func (b *batch) holdsAny(recs []*kgo.Record) bool {
	for _, r := range recs {
		if _, ok := b.last[tp{r.Topic, r.Partition}]; ok {
			return true
		}
	}
	return false
}

// remoteTopic is the target topic of source topic t, computed once per
// topic and run (not once per record). w.mu is held.
func (w *worker) remoteTopic(t string) string {
	if r, ok := w.remote[t]; ok {
		return r
	}
	if w.remote == nil {
		w.remote = map[string]string{}
	}
	r := w.f.Policy.RemoteTopic(w.f.SourceAlias, t)
	w.remote[t] = r
	return r
}

// produce adds recs (all of source codec c) and, when hb, a heartbeat to
// task t's open batch for codec c, opening it (and with exactly once, a
// transaction) when there is none. The records are produced, not waited
// for: commitBatch waits. w.mu is held.
func (w *worker) produce(ctx context.Context, t *task, c int8, recs []*kgo.Record, hb bool) error {
	prod, err := w.producer(ctx, t, c)
	if err != nil {
		return err
	}
	b := t.open[c]
	if b == nil {
		if w.f.ExactlyOnce {
			if err := prod.BeginTransaction(); err != nil {
				return fmt.Errorf("begin transaction: %w", err)
			}
		}
		b = newBatch()
		t.open[c] = b
	}
	for _, r := range recs {
		out := &kgo.Record{
			Topic:     w.remoteTopic(r.Topic),
			Partition: r.Partition,
			Key:       r.Key,
			Value:     r.Value,
			Headers:   r.Headers,
			Timestamp: r.Timestamp,
		}
		b.bytes += int64(len(r.Key) + len(r.Value))
		k := tp{r.Topic, r.Partition}
		if _, ok := b.last[k]; !ok {
			b.first[k], b.firstUp[k] = out, r.Offset
		} else if b.since[k]++; b.since[k] >= w.f.OffsetLagMax {
			b.syncs[k] = append(b.syncs[k], syncPoint{out, r.Offset})
			b.since[k] = 0
		}
		b.last[k], b.lastUp[k] = out, r.Offset
		prod.Produce(b.ctx, out, b.done)
	}
	b.recs += len(recs)
	if hb {
		h := Heartbeat{SourceAlias: w.f.SourceAlias, TargetAlias: w.f.TargetAlias, TimestampMs: time.Now().UnixMilli()}
		prod.Produce(b.ctx, &kgo.Record{Topic: heartbeatsTopic, Key: h.Key(), Value: h.Value()}, b.done)
		b.hb = true
		w.lastHeartbeat = time.Now()
	}
	return nil
}

// commitBatch ends task t's open batch for codec c: it waits for the
// batch's records, then writes the offset syncs of the batch and the
// flow's source offsets. With exactly once it is one transaction on the
// target: the records and the offsets that say they were mirrored are
// committed together or not at all. w.mu is held.
func (w *worker) commitBatch(t *task, c int8) error {
	b := t.open[c]
	if b == nil {
		return nil
	}
	t.open[c] = nil
	defer b.cancel()
	prod := t.prods[c]
	// The records' target offsets are known once they are acknowledged:
	// the offset syncs need them.
	if err := prod.Flush(b.ctx); err != nil {
		return w.abort(prod, fmt.Errorf("flush records: %w", err))
	}
	if err := b.err(); err != nil {
		return w.abort(prod, fmt.Errorf("produce to the target: %w", err))
	}
	if t.pending == nil {
		t.pending = map[tp]OffsetSync{}
	}
	for k, out := range b.last {
		t.pending[k] = OffsetSync{Topic: k.topic, Partition: k.partition, Upstream: b.lastUp[k], Downstream: out.Offset}
	}
	// With exactly once the offsets go in every transaction, with a sync
	// at each end of each partition's range in it and every
	// offset.lag.max records between (in order, the last one from
	// produceOffsets): a group's offset translates to at most
	// offset.lag.max records before it, however large the transaction.
	// Without, they are flushed every offset.flush.interval.ms, as Kafka
	// Connect flushes a source task's offsets: a crash mirrors again what
	// was produced since the last flush.
	if w.f.ExactlyOnce && w.f.EmitOffsetSyncs {
		sync := func(k tp, up int64, out *kgo.Record) {
			s := OffsetSync{Topic: k.topic, Partition: k.partition, Upstream: up, Downstream: out.Offset}
			prod.Produce(b.ctx, &kgo.Record{Topic: w.f.OffsetSyncsTopic(), Key: s.Key(), Value: s.Value()}, b.done)
		}
		for k, out := range b.first {
			if out != b.last[k] {
				sync(k, b.firstUp[k], out)
			}
			for _, p := range b.syncs[k] {
				if p.out != b.last[k] {
					sync(k, p.up, p.out)
				}
			}
		}
	}
	if w.f.ExactlyOnce || time.Since(t.lastOffsetFlush) >= w.f.OffsetFlushInterval {
		w.produceOffsets(b.ctx, t, prod, b.done)
	}
	if err := prod.Flush(b.ctx); err != nil {
		return w.abort(prod, fmt.Errorf("flush offsets: %w", err))
	}
	if err := b.err(); err != nil {
		return w.abort(prod, fmt.Errorf("produce offsets to the target: %w", err))
	}
	if w.f.ExactlyOnce {
		if err := prod.EndTransaction(b.ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("commit transaction: %w", err)
		}
	}
	for k := range b.last {
		w.next[k.topic][k.partition] = b.lastUp[k] + 1
	}
	w.m.add(b.recs, b.bytes, w.lag)
	return nil
}

// produceOffsets produces task t's pending offset syncs and source
// offsets, and forgets them. w.mu is held.
func (w *worker) produceOffsets(ctx context.Context, t *task, prod *kgo.Client, done func(*kgo.Record, error)) {
	for k, s := range t.pending {
		if w.f.EmitOffsetSyncs {
			prod.Produce(ctx, &kgo.Record{Topic: w.f.OffsetSyncsTopic(), Key: s.Key(), Value: s.Value()}, done)
		}
		prod.Produce(ctx, &kgo.Record{Topic: w.f.OffsetsTopic(), Key: OffsetKey(w.f.SourceAlias, k.topic, k.partition), Value: OffsetValue(s.Upstream)}, done)
	}
	clear(t.pending)
	t.lastOffsetFlush = time.Now()
}

// abortBatch gives up task t's open batch for codec c: with exactly once
// its transaction is aborted (the next owner resumes from the target's
// committed offsets); without, its records are waited for and their
// offsets kept pending, as a commit would. w.mu is held.
func (w *worker) abortBatch(t *task, c int8) error {
	if !w.f.ExactlyOnce {
		return w.commitBatch(t, c)
	}
	b := t.open[c]
	if b == nil {
		return nil
	}
	t.open[c] = nil
	defer b.cancel()
	return w.abort(t.prods[c], nil)
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
//
// With countOnly, only the task count is read, read_uncommitted: count
// records are written outside transactions, and an open transaction
// cannot hold this read back (takeTasks needs the count to fence a
// previous count's tasks before it may wait for their transactions).
func (w *worker) readOffsets(ctx context.Context, countOnly bool) (map[tp]int64, int, error) {
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
	isolation := kgo.ReadCommitted()
	if countOnly {
		isolation = kgo.ReadUncommitted()
	}
	cl, err := w.f.targetClient(kgo.ClientID("ringlog-mirror-"+w.f.Name()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		kgo.FetchIsolationLevel(isolation), kgo.KeepControlRecords())
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
			if countOnly {
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
