package streams

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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

// Windows are the windows WindowedBy accepts: TimeWindows (tumbling,
// hopping) or SlidingWindows. Session windows, whose aggregations need a
// merger, have SessionWindowedBy.
type Windows interface {
	check() error
	retention() time.Duration // Kafka's default store retention
}

func (w TimeWindows) check() error {
	if w.Size <= 0 || w.Advance < 0 || w.Advance > w.Size || w.Grace < 0 || w.Size%time.Millisecond != 0 || w.Advance%time.Millisecond != 0 {
		return fmt.Errorf("windows %+v: want 0 < Advance <= Size (or Advance 0: tumbling), Grace >= 0, whole milliseconds", w)
	}
	return nil
}

// retention is Kafka's default for a TimeWindows store: size + grace,
// so a window is purged once it has closed.
func (w TimeWindows) retention() time.Duration { return w.Size + w.Grace }

// WindowedGrouped is a TimeWindowedKStream (or SlidingWindowedKStream):
// grouped records in windows.
type WindowedGrouped[K, V any] struct {
	g *Grouped[K, V]
	w Windows
}

// WindowedBy puts g's records in windows w (TimeWindows or
// SlidingWindows).
func WindowedBy[K, V any](g *Grouped[K, V], w Windows) *WindowedGrouped[K, V] {
	if err := w.check(); err != nil {
		g.s.b.errorf("%v", err)
	}
	return &WindowedGrouped[K, V]{g: g, w: w}
}

// Retention keeps a windowed store's windows for d of stream time (by
// the window start; a session by its end), as Kafka's
// Materialized.withRetention; older ones are deleted from the store and
// tombstoned in its changelog. The default is Kafka's: size + grace
// (TimeWindows), 2 x time difference + grace (SlidingWindows), gap +
// grace (SessionWindows); a shorter retention is a topology error, since
// windows still open would be purged.
func Retention(d time.Duration) Opt { return func(c *opConf) { c.retention = d } }

// WindowedCount counts each key's records per window.
func WindowedCount[K, V any](wg *WindowedGrouped[K, V], opts ...Opt) *Table[Windowed[K], int64] {
	return WindowedAggregate(wg, func() int64 { return 0 }, func(_ K, _ V, n int64) int64 { return n + 1 },
		append([]Opt{ValueSerde(Int64)}, opts...)...)
}

// windowedSetup is what every windowed aggregation starts with: names,
// the records repartitioned if their key may have changed, serdes
// checked, the retention chosen.
type windowedSetup[K, V, A any] struct {
	b         *Builder
	name      string
	storeName string
	s         *Stream[K, V]
	k         Serde[K]
	a         Serde[A]
	retention int64 // ms
}

func setupWindowed[K, V, A any](g *Grouped[K, V], kind string, opts []Opt, def Serde[A], minRetention time.Duration) windowedSetup[K, V, A] {
	b := g.s.b
	c := conf(opts)
	name := b.name(kind, c.name)
	storeName := name
	if c.name == "" {
		storeName = fmt.Sprintf("%s-STATE-STORE-%010d", kind, b.seq)
	}
	_, a := serdesOf[K, A](b, opts2conf(c), kind, g.key, def)
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
	if g.key == nil || a == nil {
		b.errorf("%s: store %q needs a key and a value serde", name, storeName)
	}
	ret := c.retention
	if ret == 0 {
		ret = minRetention
	} else if ret < minRetention || ret%time.Millisecond != 0 {
		b.errorf("%s: retention %v: want whole milliseconds, at least %v (the windows' size or time difference and grace), or windows still open would be purged", name, ret, minRetention)
	}
	return windowedSetup[K, V, A]{b: b, name: name, storeName: storeName, s: s, k: g.key, a: a, retention: ret.Milliseconds()}
}

// WindowedAggregate folds each key's records per window into an A.
func WindowedAggregate[K, V, A any](wg *WindowedGrouped[K, V], init func() A, agg func(K, V, A) A, opts ...Opt) *Table[Windowed[K], A] {
	switch w := wg.w.(type) {
	case SlidingWindows:
		return slidingAggregate(wg.g, w, init, agg, opts)
	case TimeWindows:
		return timeAggregate(wg.g, w, init, agg, opts)
	}
	wg.g.s.b.errorf("windows of type %T", wg.w)
	return &Table[Windowed[K], A]{b: wg.g.s.b, n: wg.g.s.n}
}

func timeAggregate[K, V, A any](g *Grouped[K, V], w TimeWindows, init func() A, agg func(K, V, A) A, opts []Opt) *Table[Windowed[K], A] {
	ws := setupWindowed[K, V, A](g, "KSTREAM-WINDOWED-AGGREGATE", opts, nil, w.retention())
	b, k, a, storeName := ws.b, ws.k, ws.a, ws.storeName
	wk := WindowedSerde(k, w.Size)
	n := b.add(kindProcessor, ws.name, ws.s.n)
	def := newStoreDef(storeName, wk, a)
	def.windowed = true
	b.addStore(def, n)
	size, grace := w.Size.Milliseconds(), w.Grace.Milliseconds()
	// A window [start, end) closes once stream time - grace reaches its
	// end (Kafka's KStreamWindowAggregate drops at end <= close time).
	n.windowFinal = func(end int64) int64 { return end + grace }
	n.inst = func(t *task) any {
		st := t.store(storeName)
		next := fanout[Windowed[K], Change[A]](t, n)
		purge := newPurger(st, ws.retention, windowStartOf)
		// minEnd is the earliest end of a window updated in the cache
		// since its last flush here (MaxInt64: none).
		minEnd := int64(math.MaxInt64)
		if t.app.cache != nil {
			// The cache forwards a window's latest value once per
			// flush, the store's (the last one forwarded) as the old,
			// and before stream time closes the window: a suppression
			// downstream must have a window's last value before it
			// emits it as final, and a closed window takes no update.
			st.cache = t.app.cache.named(func(key, nb []byte, ts time.Time, headers []kgo.RecordHeader) {
				start, _ := windowStartOf(key)
				rk, ch, ok := cachedChange(t, st, k, a, key[:len(key)-8], key, nb)
				if !ok {
					return
				}
				st.put(key, nb, ts)
				ws := time.UnixMilli(start)
				next(Record[Windowed[K], Change[A]]{Key: Windowed[K]{Key: rk, Window: Window{Start: ws, End: ws.Add(w.Size)}},
					Value: ch, Timestamp: ts, Headers: headers})
			})
			t.caches = append(t.caches, st.cache)
			nc := st.cache
			t.beforeAdvance = append(t.beforeAdvance, func(now int64) {
				if minEnd+grace <= now {
					minEnd = math.MaxInt64
					t.flushCache(nc)
				}
			})
		}
		return func(r Record[K, V]) {
			defer purge.maybe()
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
				if st.cache != nil {
					st.cache.put(key, nb, r.Timestamp, r.Headers)
					minEnd = min(minEnd, start+size)
					continue
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
