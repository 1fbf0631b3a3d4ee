package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"ringlog/segment"
	"ringlog/segment/batch"
)

// Record is one record of a partition.
type Record struct {
	// Offset is the record's position in its partition (set by Fetch and
	// Subscription.Next; ignored by Produce, which assigns offsets).
	Offset int64
	// Timestamp is the record's time; zero in Produce means now.
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   []Header
}

// Header is a record header: a key and a value, as Kafka's.
type Header struct {
	Key   string
	Value []byte
}

// ErrOffsetOutOfRange is Fetch or Subscribe at an offset below the
// partition's start or above its end.
var ErrOffsetOutOfRange = errors.New("engine: offset out of range")

// ErrNoRecords is Produce with no record.
var ErrNoRecords = errors.New("engine: no records to produce")

// Produce appends records to tp, in order and as one batch, and returns
// the offset of the first (the others follow one by one). It returns once
// the records are written, and synced under FlushAlways, and readable by
// Fetch and subscriptions. If ctx ends first, Produce returns ctx's error,
// but the records may still be written.
func (e *Engine) Produce(ctx context.Context, tp TP, records ...Record) (int64, error) {
	if len(records) == 0 {
		return 0, ErrNoRecords
	}
	b, err := buildBatch(records, time.Now())
	if err != nil {
		return 0, err
	}
	type result struct {
		res AppendResult
		err error
	}
	done := make(chan result, 1)
	// An append is answered once its high watermark covers it (acks=all),
	// which, alone in its ISR, is once it is written.
	e.core.Append(tp, b, AppendOptions{RequireISR: true}, func(r AppendResult, err error) { done <- result{r, err} })
	select {
	case r := <-done:
		return r.res.BaseOffset, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// buildBatch makes records a RecordBatch of no producer (not idempotent:
// nothing an embedder sets can make the engine take a write for a retry).
func buildBatch(records []Record, now time.Time) ([]byte, error) {
	ts := make([]int64, len(records))
	base, maxTs := int64(0), int64(0)
	for i, r := range records {
		ts[i] = now.UnixMilli()
		if !r.Timestamp.IsZero() {
			ts[i] = r.Timestamp.UnixMilli()
		}
		if i == 0 || ts[i] < base {
			base = ts[i]
		}
		maxTs = max(maxTs, ts[i])
	}
	recs := make([]batch.Record, len(records))
	for i, r := range records {
		recs[i] = batch.Record{OffsetDelta: int32(i), TimestampDelta: ts[i] - base, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			recs[i].Headers = append(recs[i].Headers, batch.RecordHeader{Key: []byte(h.Key), Value: h.Value})
		}
	}
	h := batch.Header{LastOffsetDelta: int32(len(records) - 1), BaseTimestamp: base, MaxTimestamp: maxTs,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1}
	b, err := batch.Build(nil, h, batch.None, recs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return b, nil
}

// FetchResult is what Fetch read.
type FetchResult struct {
	// Records are the records read, in offset order.
	Records []Record
	// Next is the offset to fetch from next: after the last record
	// returned (compaction may leave gaps), or the offset asked for when
	// there was nothing new.
	Next int64
	// End is the partition's end: the offset the next record produced will
	// have.
	End int64
}

// fetchBytes bounds what one Fetch reads (a larger first batch is read
// whole).
const fetchBytes = 1 << 20

// Fetch reads up to limit records of tp from offset (limit <= 0: up to
// 1 MiB of them). It does not wait: at the partition's end it returns no records
// (Subscribe waits). An offset below the partition's start (retention
// deleted it) or past its end is ErrOffsetOutOfRange.
func (e *Engine) Fetch(ctx context.Context, tp TP, offset int64, limit int) (FetchResult, error) {
	if err := ctx.Err(); err != nil {
		return FetchResult{}, err
	}
	p, err := e.core.partition(tp)
	if err != nil {
		return FetchResult{}, err
	}
	st := p.state()
	res := FetchResult{Next: offset, End: st.HW}
	if offset < st.LogStartOffset || offset > st.HW {
		return res, fmt.Errorf("%w: %d, %s-%d holds [%d, %d)", ErrOffsetOutOfRange, offset, tp.Topic, tp.Partition, st.LogStartOffset, st.HW)
	}
	if offset == st.HW {
		return res, nil
	}
	// A few records are read from a few KiB (a larger first batch is
	// read whole); the read grows to fetchBytes until it holds limit.
	size := int64(fetchBytes)
	if limit > 0 && limit < fetchBytes/256 {
		size = int64(limit) * 256
	}
	for {
		b, err := p.log().ReadBatches(offset, size, st.HW)
		switch {
		case errors.Is(err, segment.ErrClosed):
			return res, ErrClosed
		case errors.Is(err, segment.ErrOutOfRange):
			// Retention moved the start past offset since the state was read.
			return res, fmt.Errorf("%w: %w", ErrOffsetOutOfRange, err)
		case err != nil:
			return res, storageError(err)
		}
		res.Records, res.Next, err = decodeRecords(b, offset, limit)
		if err != nil || limit <= 0 || len(res.Records) == limit || size == fetchBytes || res.Next >= st.HW {
			return res, err
		}
		size = min(fetchBytes, size*4)
	}
}

// decodeRecords returns the records of the whole batches in b from offset
// on, at most limit of them (limit <= 0: all), and the offset after them.
func decodeRecords(b []byte, offset int64, limit int) ([]Record, int64, error) {
	var out []Record
	next := offset
	for len(b) > 0 && (limit <= 0 || len(out) < limit) {
		h, err := batch.ParseHeader(b)
		if err != nil || h.Size() > len(b) {
			return out, next, fmt.Errorf("%w: a batch of the log does not parse: %v", ErrStorage, err)
		}
		full := true
		if !h.Control() && h.NextOffset() > offset {
			err := batch.Records(h, b, maxDecompressed, func(r *batch.Record) error {
				o := h.BaseOffset + int64(r.OffsetDelta)
				if o < offset {
					return nil
				}
				if limit > 0 && len(out) == limit {
					full = false
					return errStop
				}
				ts := h.BaseTimestamp + r.TimestampDelta
				if h.LogAppendTime() {
					ts = h.MaxTimestamp
				}
				rec := Record{Offset: o, Timestamp: time.UnixMilli(ts), Key: r.Key, Value: r.Value}
				for _, hd := range r.Headers {
					rec.Headers = append(rec.Headers, Header{Key: string(hd.Key), Value: hd.Value})
				}
				out = append(out, rec)
				next = o + 1
				return nil
			})
			if err != nil && !errors.Is(err, errStop) {
				return out, next, fmt.Errorf("%w: %w", ErrStorage, err)
			}
		}
		if full {
			// Past the whole batch, even past records compaction removed.
			next = max(next, h.NextOffset())
		}
		b = b[h.Size():]
	}
	return out, next, nil
}

// errStop ends a walk of records early.
var errStop = errors.New("stop")

// Offsets returns tp's start (the first offset still kept) and end (the
// offset the next record will have).
func (e *Engine) Offsets(tp TP) (start, end int64, err error) {
	p, err := e.core.partition(tp)
	if err != nil {
		return 0, 0, err
	}
	st := p.state()
	return st.LogStartOffset, st.HW, nil
}
