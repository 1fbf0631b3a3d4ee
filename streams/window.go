package streams

import (
	"encoding/binary"
	"fmt"
	"time"
)

// TimeWindows are Kafka's TimeWindows: windows of Size starting every
// Advance (tumbling when Advance is Size or zero, hopping when smaller),
// aligned to the epoch, in event time. A window accepts records until
// stream time (the largest timestamp its task has seen) passes its end
// plus Grace; a record for a window closed by then is dropped and counted
// (TaskStats.Dropped), as Kafka's dropped-records metric.
type TimeWindows struct {
	Size    time.Duration
	Advance time.Duration
	Grace   time.Duration
}

// Window is [Start, End).
type Window struct{ Start, End time.Time }

// Windowed is a key in a window: the key of a windowed aggregation.
type Windowed[K any] struct {
	Key    K
	Window Window
}

// windowsFor returns the starts (ms) of the windows holding ts, as
// Kafka's TimeWindows.windowsFor.
func (w TimeWindows) windowsFor(ts int64) []int64 {
	size, adv := w.Size.Milliseconds(), w.advanceMs()
	start := max(0, ts-size+adv) / adv * adv
	var out []int64
	for ; start <= ts; start += adv {
		out = append(out, start)
	}
	return out
}

func (w TimeWindows) advanceMs() int64 {
	if w.Advance <= 0 {
		return w.Size.Milliseconds()
	}
	return w.Advance.Milliseconds()
}

// WindowedSerde is Kafka's TimeWindowedSerde: the inner key's bytes
// followed by the window start (ms, u64 big endian); the end is start +
// size. It is also the store key layout, so one key's windows are
// adjacent and in time order.
func WindowedSerde[K any](inner Serde[K], size time.Duration) Serde[Windowed[K]] {
	return windowedSerde[K]{inner: inner, size: size}
}

type windowedSerde[K any] struct {
	inner Serde[K]
	size  time.Duration
}

func (s windowedSerde[K]) Serialize(topic string, w Windowed[K]) ([]byte, error) {
	kb, err := s.inner.Serialize(topic, w.Key)
	if err != nil {
		return nil, err
	}
	return binary.BigEndian.AppendUint64(kb, uint64(w.Window.Start.UnixMilli())), nil
}

func (s windowedSerde[K]) Deserialize(topic string, b []byte) (Windowed[K], error) {
	var w Windowed[K]
	if len(b) < 8 {
		return w, fmt.Errorf("%w: windowed key of %d bytes (topic %q): want 8 or more", ErrSerde, len(b), topic)
	}
	k, err := s.inner.Deserialize(topic, b[:len(b)-8])
	if err != nil {
		return w, err
	}
	start := time.UnixMilli(int64(binary.BigEndian.Uint64(b[len(b)-8:])))
	return Windowed[K]{Key: k, Window: Window{Start: start, End: start.Add(s.size)}}, nil
}

// WindowedGrouped is a TimeWindowedKStream: grouped records in windows.
type WindowedGrouped[K, V any] struct {
	g *Grouped[K, V]
	w TimeWindows
}

// WindowedBy puts g's records in windows w.
func WindowedBy[K, V any](g *Grouped[K, V], w TimeWindows) *WindowedGrouped[K, V] {
	if w.Size <= 0 || w.Advance < 0 || w.Advance > w.Size || w.Grace < 0 || w.Size%time.Millisecond != 0 || w.Advance%time.Millisecond != 0 {
		g.s.b.errorf("windows %+v: want 0 < Advance <= Size (or Advance 0: tumbling), Grace >= 0, whole milliseconds", w)
	}
	return &WindowedGrouped[K, V]{g: g, w: w}
}

// WindowedCount counts each key's records per window.
func WindowedCount[K, V any](wg *WindowedGrouped[K, V], opts ...Opt) *Table[Windowed[K], int64] {
	return WindowedAggregate(wg, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 },
		append([]Opt{ValueSerde(Int64)}, opts...)...)
}

// WindowedAggregate folds each key's records per window into an A.
func WindowedAggregate[K, V, A any](wg *WindowedGrouped[K, V], init func() A, agg func(K, V, A) A, opts ...Opt) *Table[Windowed[K], A] {
	g, w := wg.g, wg.w
	b := g.s.b
	c := conf(opts)
	name := b.name("KSTREAM-WINDOWED-AGGREGATE", c.name)
	storeName := name
	if c.name == "" {
		storeName = fmt.Sprintf("KSTREAM-WINDOWED-AGGREGATE-STATE-STORE-%010d", b.seq)
	}
	_, a := serdesOf[K, A](b, opts2conf(c), "windowedAggregate", g.key, nil)
	k := g.key
	repName := g.name
	if repName == "" {
		repName = storeName
	}
	s := g.s
	if s.repartition {
		if g.key == nil || g.val == nil {
			b.errorf("%s: the key may have changed so the records are repartitioned through <app>-%s-repartition, which needs a key and a value serde", name, repName)
		} else {
			s = repartitioned(s, repName, g.key, g.val)
		}
	}
	if k == nil || a == nil {
		b.errorf("%s: store %q needs a key and a value serde", name, storeName)
	}
	wk := WindowedSerde(k, w.Size)
	n := b.add(kindProcessor, name, s.n)
	def := newStoreDef(storeName, wk, a)
	def.windowed = true
	b.addStore(def, n)
	size, grace := w.Size.Milliseconds(), w.Grace.Milliseconds()
	n.inst = func(t *task) any {
		st := t.store(storeName)
		next := fanout[Windowed[K], Change[A]](t, n)
		return func(r Record[K, V]) {
			kb, err := k.Serialize(st.changelog, r.Key)
			if err != nil {
				t.fail(fmt.Errorf("%s: key: %w", storeName, err))
				return
			}
			ts := r.Timestamp.UnixMilli()
			closeTime := t.streamTime - grace
			for _, start := range w.windowsFor(ts) {
				if start+size <= closeTime {
					t.dropped.Add(1) // late: the window closed
					continue
				}
				key := binary.BigEndian.AppendUint64(append([]byte(nil), kb...), uint64(start))
				ob, hasOld, err := st.get(key)
				if err != nil {
					t.fail(err)
					return
				}
				old := init()
				var prev A
				if hasOld {
					if old, err = a.Deserialize(st.changelog, ob); err != nil {
						t.fail(fmt.Errorf("%s: stored value: %w", storeName, err))
						return
					}
					prev = old
				}
				nv := agg(r.Key, r.Value, old)
				nb, err := a.Serialize(st.changelog, nv)
				if err != nil {
					t.fail(err)
					return
				}
				st.put(key, nb, r.Timestamp)
				ws := time.UnixMilli(start)
				next(Record[Windowed[K], Change[A]]{Key: Windowed[K]{Key: r.Key, Window: Window{Start: ws, End: ws.Add(w.Size)}},
					Value: Change[A]{Old: prev, New: nv, HasOld: hasOld, HasNew: true}, Timestamp: r.Timestamp, Headers: r.Headers})
			}
		}
	}
	return &Table[Windowed[K], A]{b: b, n: n, key: wk, val: a, store: storeName}
}

func opts2conf(c opConf) opConf { return opConf{val: c.val} }
