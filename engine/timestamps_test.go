package engine

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"ringlog/ioring"
	"ringlog/segment/batch"
)

// tsBatch builds a producer batch whose records have the timestamps ts
// (the first is the batch's base timestamp), compressed with c.
func tsBatch(t *testing.T, c batch.Codec, attrs int16, ts ...int64) []byte {
	t.Helper()
	recs := make([]batch.Record, len(ts))
	for i := range ts {
		recs[i] = batch.Record{OffsetDelta: int32(i), TimestampDelta: ts[i] - ts[0], Value: []byte(strconv.Itoa(i))}
	}
	h := batch.Header{Attributes: attrs, LastOffsetDelta: int32(len(ts) - 1), BaseTimestamp: ts[0], MaxTimestamp: slices.Max(ts),
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	b, err := batch.Build(nil, h, c, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAppendRecordTimestamps: the timestamp bounds hold for each record,
// not for the batch's header, and a refused batch names every record at
// fault by its index (Kafka's record_errors, KIP-467). ringlog checked
// the header's base and max timestamps and named no record, which
// internal/difftest found against Kafka: a record before the batch's
// base timestamp went through.
func TestAppendRecordTimestamps(t *testing.T) {
	e := openEngine(t, t.TempDir(), ioring.ModeAuto)
	defer e.Close()
	const hour = int64(time.Hour / time.Millisecond)
	for name, cfg := range map[string]map[string]string{
		"w":   {"message.timestamp.before.max.ms": "3600000", "message.timestamp.after.max.ms": "3600000"},
		"lat": {"message.timestamp.type": "LogAppendTime"},
		"d":   nil, // the default bounds: before unbounded, after one hour
	} {
		if _, err := e.CreateTopic(name, 1, -1, cfg, false); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UnixMilli()
	for _, c := range []struct {
		name  string
		topic string
		b     []byte
		want  []int32 // the records refused; nil: taken
	}{
		{"in range", "w", tsBatch(t, batch.None, 0, now-1000, now), nil},
		{"first too old, last too new", "w", tsBatch(t, batch.None, 0, now-2*hour, now, now+2*hour), []int32{0, 2}},
		{"a record before the base timestamp", "w", tsBatch(t, batch.None, 0, now, now-3*hour), []int32{1}},
		{"compressed, one too new", "w", tsBatch(t, batch.Zstd, 0, now, now+3*hour), []int32{1}},
		{"compressed, one too old", "w", tsBatch(t, batch.Gzip, 0, now, now-3*hour, now), []int32{1}},
		{"no timestamp", "w", tsBatch(t, batch.None, 0, -1, -1), nil},
		{"LogAppendTime topic, any timestamp", "lat", tsBatch(t, batch.None, 0, now-9*hour, now+9*hour), nil},
		{"LogAppendTime claimed by the producer", "lat", tsBatch(t, batch.None, batch.AttrLogAppendTime, now, now), []int32{0, 1}},
		// Under the default bounds Kafka refuses a record at
		// Long.MIN_VALUE + 5: its timestamp - now wraps to a large
		// positive number, more than after.max.ms. ringlog skipped the
		// record walk when the batch's maxTimestamp was in range and
		// before.max.ms unbounded, and accepted it (the maxTimestamp of
		// such a batch is NO_TIMESTAMP, -1, which no bound refuses).
		// Timestamps near 0 or negative but far from wrapping stay
		// accepted, as in Kafka.
		{"at Long.MIN_VALUE + 5", "d", tsBatch(t, batch.None, 0, math.MinInt64+5), []int32{0}},
		{"compressed, at Long.MIN_VALUE + 5", "d", tsBatch(t, batch.LZ4, 0, math.MinInt64+5, math.MinInt64+6), []int32{0, 1}},
		{"negative, and now", "d", tsBatch(t, batch.None, 0, -1000, now), nil},
		{"years ago", "d", tsBatch(t, batch.None, 0, 1000, now), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := appendSync(e, TP{c.topic, 0}, c.b)
			if c.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			re, ok := AsRecordsError(err)
			if !ok || !errors.Is(err, ErrInvalidTimestamp) {
				t.Fatalf("want INVALID_TIMESTAMP naming records %v, got %v", c.want, err)
			}
			var got []int32
			for _, r := range re.Records {
				got = append(got, r.BatchIndex)
				if r.Message == "" {
					t.Errorf("record %d: no message", r.BatchIndex)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("records %v refused, want %v", got, c.want)
			}
		})
	}
}

// BenchmarkNewAppend measures the caller's side of an append of one 16 KiB
// batch of 100-byte records: the CRC, the record walk and the timestamp
// rules, everything a produce costs before its shard.
func BenchmarkNewAppend(b *testing.B) {
	e := openEngine(b, b.TempDir(), ioring.ModeAuto)
	defer e.Close()
	if _, err := e.CreateTopic("t", 1, -1, nil, false); err != nil {
		b.Fatal(err)
	}
	now := time.Now().UnixMilli()
	recs := make([]batch.Record, 140)
	for i := range recs {
		recs[i] = batch.Record{OffsetDelta: int32(i), Value: make([]byte, 100)}
	}
	h := batch.Header{LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	buf, err := batch.Build(nil, h, batch.None, recs)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if r := e.newAppend(TP{"t", 0}, buf, AppendOptions{}, func(AppendResult, error) { b.Fatal("refused") }); r == nil {
			b.Fatal("no request")
		}
	}
}
