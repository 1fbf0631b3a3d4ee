package streams

import (
	"encoding/binary"
	"fmt"
	"time"
)

// SessionWindows are Kafka's SessionWindows: a key's records closer than
// Gap (inactivity gap) to each other form one session [first, last],
// both ends inclusive. A record within Gap of one or more sessions of
// its key merges them (their aggregates combined by the merger) into
// one; otherwise it starts a session of its own. A record whose merged
// session would end before stream time minus Grace minus Gap is dropped
// (TaskStats.Dropped), as Kafka's KStreamSessionWindowAggregate does.
type SessionWindows struct {
	Gap   time.Duration
	Grace time.Duration
}

func (w SessionWindows) check() error {
	if w.Gap <= 0 || w.Grace < 0 || w.Gap%time.Millisecond != 0 || w.Grace%time.Millisecond != 0 {
		return fmt.Errorf("session windows %+v: want Gap > 0, Grace >= 0, whole milliseconds", w)
	}
	return nil
}

// SessionWindowedSerde is Kafka's SessionWindowedSerde, whose layout is
// SessionKeySchema's: the inner key's bytes, then the session end and
// start (ms, u64 big endian each). It is also the session store's key
// and its changelog's: one key's sessions are adjacent and ordered by
// end, so the sessions a record may merge with are one range scan.
func SessionWindowedSerde[K any](inner Serde[K]) Serde[Windowed[K]] {
	return sessionSerde[K]{inner: inner}
}

type sessionSerde[K any] struct{ inner Serde[K] }

func (s sessionSerde[K]) Serialize(topic string, w Windowed[K]) ([]byte, error) {
	kb, err := s.inner.Serialize(topic, w.Key)
	if err != nil {
		return nil, err
	}
	return sessionKey(kb, w.Window.End.UnixMilli(), w.Window.Start.UnixMilli()), nil
}

func (s sessionSerde[K]) Deserialize(topic string, b []byte) (Windowed[K], error) {
	var w Windowed[K]
	if len(b) < 16 {
		return w, fmt.Errorf("%w: session key of %d bytes (topic %q): want 16 or more", ErrSerde, len(b), topic)
	}
	k, err := s.inner.Deserialize(topic, b[:len(b)-16])
	if err != nil {
		return w, err
	}
	end := int64(binary.BigEndian.Uint64(b[len(b)-16:]))
	start := int64(binary.BigEndian.Uint64(b[len(b)-8:]))
	return Windowed[K]{Key: k, Window: Window{Start: time.UnixMilli(start), End: time.UnixMilli(end)}}, nil
}

func sessionKey(kb []byte, end, start int64) []byte {
	out := append(make([]byte, 0, len(kb)+16), kb...)
	out = binary.BigEndian.AppendUint64(out, uint64(end))
	return binary.BigEndian.AppendUint64(out, uint64(start))
}

// SessionWindowedGrouped is a SessionWindowedKStream.
type SessionWindowedGrouped[K, V any] struct {
	g *Grouped[K, V]
	w SessionWindows
}

// SessionWindowedBy puts g's records in session windows w.
func SessionWindowedBy[K, V any](g *Grouped[K, V], w SessionWindows) *SessionWindowedGrouped[K, V] {
	if err := w.check(); err != nil {
		g.s.b.errorf("%v", err)
	}
	return &SessionWindowedGrouped[K, V]{g: g, w: w}
}

// SessionCount counts each key's records per session.
func SessionCount[K, V any](sg *SessionWindowedGrouped[K, V], opts ...Opt) *Table[Windowed[K], int64] {
	return sessionAggregate(sg, "KSTREAM-SESSION-COUNT", func() (int64, bool) { return 0, true },
		func(_ K, _ V, n int64, _ bool) int64 { return n + 1 },
		func(_ K, a, b int64) int64 { return a + b }, Int64, opts)
}

// SessionReduce combines each session's values with f (the first value
// standing as it is); merged sessions combine with f too.
func SessionReduce[K, V any](sg *SessionWindowedGrouped[K, V], f func(acc, v V) V, opts ...Opt) *Table[Windowed[K], V] {
	var zero V
	return sessionAggregate(sg, "KSTREAM-SESSION-REDUCE", func() (V, bool) { return zero, false }, func(_ K, v V, acc V, has bool) V {
		if !has {
			return v
		}
		return f(acc, v)
	}, func(_ K, a, b V) V { return f(a, b) }, sg.g.val, opts)
}

// SessionAggregate folds each session's records into an A from init();
// when a record joins sessions, merger combines their aggregates (in
// session order), as Kafka's Merger.
func SessionAggregate[K, V, A any](sg *SessionWindowedGrouped[K, V], init func() A, agg func(K, V, A) A, merger func(K, A, A) A, opts ...Opt) *Table[Windowed[K], A] {
	// As Kafka: the merged aggregate starts from init() and takes each
	// session's in turn through the merger, then the record.
	return sessionAggregate(sg, "KSTREAM-SESSION-AGGREGATE", func() (A, bool) { return init(), true },
		func(k K, v V, acc A, _ bool) A { return agg(k, v, acc) }, merger, nil, opts)
}

// storedSession is one session of a key read from the store.
type storedSession struct {
	key        []byte // store key
	start, end int64
	raw        []byte
}

// sessionAggregate: first is the aggregate before any session is merged
// (has false: none, as reduce's null); merge combines it with each
// merged session's; agg folds the record in.
func sessionAggregate[K, V, A any](sg *SessionWindowedGrouped[K, V], kind string, first func() (A, bool), agg func(K, V, A, bool) A, merge func(K, A, A) A, def Serde[A], opts []Opt) *Table[Windowed[K], A] {
	w := sg.w
	ws := setupWindowed[K, V, A](sg.g, kind, opts, def, w.Gap+w.Grace)
	b, k, a, storeName := ws.b, ws.k, ws.a, ws.storeName
	wk := SessionWindowedSerde(k)
	n := b.add(kindProcessor, ws.name, ws.s.n)
	sdef := newStoreDef(storeName, wk, a)
	sdef.session = true
	b.addStore(sdef, n)
	gap, grace := w.Gap.Milliseconds(), w.Grace.Milliseconds()
	// A session [start, end] can take no more records once end < stream
	// time - grace - gap (a record merging with it would be dropped).
	n.windowFinal = func(end int64) int64 { return end + gap + grace + 1 }
	n.inst = func(t *task) any {
		st := t.store(storeName)
		next := fanout[Windowed[K], Change[A]](t, n)
		purge := newPurger(st, ws.retention, sessionEndOf)
		de := func(raw []byte) (A, bool) {
			v, err := a.Deserialize(st.changelog, raw)
			if err != nil {
				t.fail(fmt.Errorf("%s: stored value: %w", storeName, err))
				return v, false
			}
			return v, true
		}
		window := func(start, end int64) Window { return Window{Start: time.UnixMilli(start), End: time.UnixMilli(end)} }
		return func(r Record[K, V]) {
			defer purge.maybe()
			ts := r.Timestamp.UnixMilli()
			closeTime := t.streamTime - grace - gap
			kb, err := k.Serialize(st.changelog, r.Key)
			if err != nil {
				t.fail(fmt.Errorf("%s: key: %w", storeName, err))
				return
			}
			// The sessions within gap of ts: end >= ts-gap and start <=
			// ts+gap. A key's sessions are disjoint, so in end order
			// their starts grow too: the scan stops at the first start
			// past ts+gap.
			var merged []storedSession
			err = st.scan(sessionKey(kb, max(0, ts-gap), 0), prefixEnd(kb), func(key, v []byte) bool {
				if len(key) != len(kb)+16 {
					return true // a longer key with kb as its prefix
				}
				end := int64(binary.BigEndian.Uint64(key[len(kb):]))
				start := int64(binary.BigEndian.Uint64(key[len(kb)+8:]))
				if start > ts+gap {
					return false
				}
				merged = append(merged, storedSession{key: append([]byte(nil), key...), start: start, end: end, raw: append([]byte(nil), v...)})
				return true
			})
			if err != nil {
				t.fail(err)
				return
			}
			start, end := ts, ts
			acc, has := first()
			for _, s := range merged {
				v, ok := de(s.raw)
				if !ok {
					return
				}
				if has {
					acc = merge(r.Key, acc, v)
				} else {
					acc, has = v, true
				}
				start, end = min(start, s.start), max(end, s.end)
			}
			if end < closeTime {
				t.dropped.Add(1) // late: the (merged) session has closed
				return
			}
			newKey := sessionKey(kb, end, start)
			var old A
			hasOld := false
			for _, s := range merged {
				if string(s.key) == string(newKey) {
					old, hasOld = de(s.raw)
					continue // overwritten below
				}
				st.delete(s.key, r.Timestamp)
				prev, ok := de(s.raw)
				if !ok {
					return
				}
				next(Record[Windowed[K], Change[A]]{Key: Windowed[K]{Key: r.Key, Window: window(s.start, s.end)},
					Value: Change[A]{Old: prev, HasOld: true}, Timestamp: r.Timestamp, Headers: r.Headers})
			}
			nv := agg(r.Key, r.Value, acc, has)
			nb, err := a.Serialize(st.changelog, nv)
			if err != nil {
				t.fail(fmt.Errorf("%s: value: %w", storeName, err))
				return
			}
			st.put(newKey, nb, r.Timestamp)
			next(Record[Windowed[K], Change[A]]{Key: Windowed[K]{Key: r.Key, Window: window(start, end)},
				Value: Change[A]{Old: old, New: nv, HasOld: hasOld, HasNew: true}, Timestamp: time.UnixMilli(end), Headers: r.Headers})
		}
	}
	return &Table[Windowed[K], A]{b: b, n: n, key: wk, val: a, store: storeName}
}
