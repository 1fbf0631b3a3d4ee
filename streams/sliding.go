package streams

import (
	"encoding/binary"
	"fmt"
	"time"
)

// SlidingWindows are Kafka's SlidingWindows: windows of TimeDifference
// defined by the records rather than by the clock. Two records of a key
// fall in a common window when their timestamps differ by at most
// TimeDifference; the windows kept are, for each record at t, its left
// window [t-d, t] and, if it holds records, its right window
// [t+1, t+1+d] (both ends inclusive, d = TimeDifference), so that every
// distinct set of records a window of size d can see has exactly one
// window. A record earlier than d goes into [0, d] (no negative starts).
// A record is dropped (TaskStats.Dropped) when even its last possible
// window [t, t+d] ended before stream time minus Grace; it leaves closed
// windows as they are.
type SlidingWindows struct {
	TimeDifference time.Duration
	Grace          time.Duration
}

func (w SlidingWindows) check() error {
	if w.TimeDifference <= 0 || w.Grace < 0 || w.TimeDifference%time.Millisecond != 0 || w.Grace%time.Millisecond != 0 {
		return fmt.Errorf("sliding windows %+v: want TimeDifference > 0, Grace >= 0, whole milliseconds", w)
	}
	return nil
}

// retention is Kafka's default for a sliding store: 2 x the time
// difference + grace. A new window's aggregate is copied from a window
// up to 2d older than the record, which must still be there.
func (w SlidingWindows) retention() time.Duration { return 2*w.TimeDifference + w.Grace }

// slideWin is one stored sliding window of a key: its start, the largest
// record timestamp it holds, and its aggregate's bytes.
type slideWin struct {
	start, maxTs int64
	raw          []byte
}

// slideOp is one window a record writes: at start, the aggregate of
// window base (an index into the stored windows; -1: init()), with the
// record folded in if add, holding records up to maxTs.
type slideOp struct {
	start, maxTs int64
	base         int
	add          bool
}

// slidingPlan decides which windows of a key a record at ts writes,
// given the key's stored windows with starts in [ts-2d-1, ts+1] in start
// order. It never subtracts: a new window's aggregate is an existing
// window whose records are exactly the new window's records (but the new
// one), which exists because every left and every non-empty right
// window is kept:
//
//   - the windows holding ts get the record (unless closed);
//   - ts's left window [ts-d, ts], if missing, starts from the window
//     ending before ts with the latest start, if the previous record p
//     (the latest before ts) is within d of ts: that window holds exactly
//     the records in [ts-d, p] (p's own left window, or the right window
//     of the last record before ts-d); otherwise from nothing;
//   - ts's right window [ts+1, ts+1+d], if missing, is a copy of the
//     window holding ts with the latest start, if that one holds a record
//     after ts (then it holds exactly those of (ts, ts+1+d]);
//   - p's right window [p+1, p+1+d], if missing and reaching ts, holds ts
//     alone (records after ts in it would have created it already).
func slidingPlan(wins []slideWin, ts, d, closeTime int64) []slideOp {
	have := make(map[int64]bool, len(wins)+3)
	left, right := -1, -1
	var p int64
	hasP := false
	var ops []slideOp
	for i, w := range wins {
		have[w.start] = true
		end := w.start + d
		switch {
		case end < ts:
			left = i
		case w.start <= ts:
			right = i
			if end >= closeTime {
				ops = append(ops, slideOp{start: w.start, maxTs: max(w.maxTs, ts), base: i, add: true})
			}
		}
		if w.maxTs < ts && (!hasP || w.maxTs > p) {
			p, hasP = w.maxTs, true
		}
	}
	ls := max(0, ts-d) // records before d share [0, d]
	if !have[ls] && ls+d >= closeTime {
		base := -1
		if ts >= d && hasP && p >= ts-d {
			base = left
		}
		ops = append(ops, slideOp{start: ls, maxTs: ts, base: base, add: true})
		have[ls] = true
	}
	if rs := ts + 1; !have[rs] && right >= 0 && wins[right].maxTs > ts {
		ops = append(ops, slideOp{start: rs, maxTs: wins[right].maxTs, base: right})
		have[rs] = true
	}
	if hasP && p+1+d >= ts && !have[p+1] && p+1+d >= closeTime {
		ops = append(ops, slideOp{start: p + 1, maxTs: ts, base: -1, add: true})
	}
	return ops
}

// slidingValueSerde is the value layout of a sliding store and its
// changelog: the window's largest record timestamp (u64 big endian, what
// Kafka's timestamped store keeps beside the value) and the aggregate.
// Queries read the aggregate; Serialize writes timestamp -1 (unknown).
type slidingValueSerde[A any] struct{ inner Serde[A] }

func (s slidingValueSerde[A]) Serialize(topic string, v A) ([]byte, error) {
	b, err := s.inner.Serialize(topic, v)
	if err != nil {
		return nil, err
	}
	return append(binary.BigEndian.AppendUint64(nil, ^uint64(0)), b...), nil
}

func (s slidingValueSerde[A]) Deserialize(topic string, b []byte) (A, error) {
	if len(b) < 8 {
		var zero A
		return zero, fmt.Errorf("%w: sliding window value of %d bytes (topic %q): want 8 or more", ErrSerde, len(b), topic)
	}
	return s.inner.Deserialize(topic, b[8:])
}

func windowKey(kb []byte, start int64) []byte {
	return binary.BigEndian.AppendUint64(append(make([]byte, 0, len(kb)+8), kb...), uint64(start))
}

func slidingAggregate[K, V, A any](g *Grouped[K, V], w SlidingWindows, init func() A, agg func(K, V, A) A, opts []Opt) *Table[Windowed[K], A] {
	ws := setupWindowed[K, V, A](g, "KSTREAM-SLIDINGWINDOWAGGREGATE", opts, nil, w.retention())
	b, k, a, storeName := ws.b, ws.k, ws.a, ws.storeName
	wk := WindowedSerde(k, w.TimeDifference)
	n := b.add(kindProcessor, ws.name, ws.s.n)
	def := newStoreDef[Windowed[K], A](storeName, wk, slidingValueSerde[A]{a})
	def.windowed = true
	b.addStore(def, n)
	d, grace := w.TimeDifference.Milliseconds(), w.Grace.Milliseconds()
	// [start, end] inclusive closes once end < stream time - grace.
	n.windowFinal = func(end int64) int64 { return end + grace + 1 }
	n.inst = func(t *task) any {
		st := t.store(storeName)
		next := fanout[Windowed[K], Change[A]](t, n)
		purge := newPurger(st, ws.retention, windowStartOf)
		de := func(raw []byte) (A, bool) {
			v, err := a.Deserialize(st.changelog, raw)
			if err != nil {
				t.fail(fmt.Errorf("%s: stored value: %w", storeName, err))
				return v, false
			}
			return v, true
		}
		return func(r Record[K, V]) {
			defer purge.maybe()
			ts := r.Timestamp.UnixMilli()
			closeTime := t.streamTime - grace
			if ts < 0 || ts+d < closeTime {
				t.dropped.Add(1) // late: even [ts, ts+d] has closed
				return
			}
			kb, err := k.Serialize(st.changelog, r.Key)
			if err != nil {
				t.fail(fmt.Errorf("%s: key: %w", storeName, err))
				return
			}
			var wins []slideWin
			err = st.scan(windowKey(kb, max(0, ts-2*d-1)), windowKey(kb, ts+2), func(key, v []byte) bool {
				if len(key) != len(kb)+8 {
					return true // a longer key with kb as its prefix
				}
				if len(v) < 8 {
					err = fmt.Errorf("%s: stored value of %d bytes", storeName, len(v))
					return false
				}
				wins = append(wins, slideWin{start: int64(binary.BigEndian.Uint64(key[len(kb):])),
					maxTs: int64(binary.BigEndian.Uint64(v)), raw: append([]byte(nil), v[8:]...)})
				return true
			})
			if err != nil {
				t.fail(err)
				return
			}
			for _, op := range slidingPlan(wins, ts, d, closeTime) {
				cur, ok := init(), true
				if op.base >= 0 {
					if cur, ok = de(wins[op.base].raw); !ok {
						return
					}
				}
				var old A
				hasOld := op.base >= 0 && wins[op.base].start == op.start
				if hasOld {
					if old, ok = de(wins[op.base].raw); !ok {
						return
					}
				}
				if op.add {
					cur = agg(r.Key, r.Value, cur)
				}
				nb, err := a.Serialize(st.changelog, cur)
				if err != nil {
					t.fail(fmt.Errorf("%s: value: %w", storeName, err))
					return
				}
				st.put(windowKey(kb, op.start), append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(nb)), uint64(op.maxTs)), nb...), r.Timestamp)
				start := time.UnixMilli(op.start)
				next(Record[Windowed[K], Change[A]]{Key: Windowed[K]{Key: r.Key, Window: Window{Start: start, End: start.Add(w.TimeDifference)}},
					Value: Change[A]{Old: old, New: cur, HasOld: hasOld, HasNew: true}, Timestamp: time.UnixMilli(op.maxTs), Headers: r.Headers})
			}
		}
	}
	return &Table[Windowed[K], A]{b: b, n: n, key: wk, val: a, store: storeName}
}
