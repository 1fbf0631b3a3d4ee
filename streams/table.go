package streams

import (
	"bytes"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Change is an update of a table row, as Kafka's Change<V>: the value
// before (HasOld false for a new key) and after (HasNew false for a
// delete). Downstream table operations (joins, re-aggregation with a
// subtractor) need the old value; ToStream keeps only the new one.
type Change[V any] struct {
	Old, New       V
	HasOld, HasNew bool
}

// Table is a KTable: the latest value per key, held in a store local to
// each task and backed by a compacted changelog topic. Its node forwards
// every update as a Change.
type Table[K, V any] struct {
	b     *Builder
	n     *node
	key   Serde[K]
	val   Serde[V]
	store string
	// lookup reads a row of a table without a store (a join's result,
	// join.go); nil: read the store.
	lookup func(t *task) func(K) (V, bool, error)
}

// StoreName is the name to query the table's store by (App.Store).
func (t *Table[K, V]) StoreName() string { return t.store }

// ToStream returns the table's updates as a stream of new values;
// deletes are not forwarded (Changes has them).
func (t *Table[K, V]) ToStream(opts ...Opt) *Stream[K, V] {
	c := conf(opts)
	n := t.b.add(kindProcessor, t.b.name("KTABLE-TOSTREAM", c.name), t.n)
	n.inst = func(tk *task) any {
		next := fanout[K, V](tk, n)
		return func(r Record[K, Change[V]]) {
			if r.Value.HasNew {
				next(Record[K, V]{Key: r.Key, Value: r.Value.New, Timestamp: r.Timestamp, Headers: r.Headers})
			}
		}
	}
	return &Stream[K, V]{b: t.b, n: n, key: t.key, val: t.val}
}

// Changes returns the table's updates, deletes included.
func (t *Table[K, V]) Changes(opts ...Opt) *Stream[K, Change[V]] {
	c := conf(opts)
	n := t.b.add(kindProcessor, t.b.name("KTABLE-CHANGES", c.name), t.n)
	n.inst = func(tk *task) any { return fanout[K, Change[V]](tk, n) }
	return &Stream[K, Change[V]]{b: t.b, n: n, key: t.key}
}

// Grouped is a KGroupedStream: records grouped by key, ready for an
// aggregation.
type Grouped[K, V any] struct {
	s    *Stream[K, V]
	name string
	key  Serde[K]
	val  Serde[V]
}

// GroupByKey groups s by its key. If the key may have changed since the
// source (Map, FlatMap, SelectKey), the aggregation repartitions through
// "<app>-<name>-repartition", which needs serdes (opts or the stream's).
func GroupByKey[K, V any](s *Stream[K, V], opts ...Opt) *Grouped[K, V] {
	c := conf(opts)
	k, v := serdesOf[K, V](s.b, c, "groupByKey", s.key, s.val)
	if c.name != "" {
		s.b.name("", c.name) // reserve the name
	}
	return &Grouped[K, V]{s: s, name: c.name, key: k, val: v}
}

// GroupBy groups s by a new key computed by f (always a repartition).
func GroupBy[K, V, K2 any](s *Stream[K, V], f func(K, V) K2, opts ...Opt) *Grouped[K2, V] {
	c := conf(opts)
	sel := SelectKey(s, f)
	k, v := serdesOf[K2, V](s.b, c, "groupBy", nil, s.val)
	if c.name != "" {
		s.b.name("", c.name)
	}
	return &Grouped[K2, V]{s: sel, name: c.name, key: k, val: v}
}

// Aggregate folds each key's records into a value of type A, starting
// from init(), in a store named by opts (Named) or generated. The result
// serde (ValueSerde) is required: the store and its changelog hold A.
func Aggregate[K, V, A any](g *Grouped[K, V], init func() A, agg func(K, V, A) A, opts ...Opt) *Table[K, A] {
	return aggregate(g, "KSTREAM-AGGREGATE", init, agg, nil, opts)
}

// Count counts each key's records (an int64 per key).
func Count[K, V any](g *Grouped[K, V], opts ...Opt) *Table[K, int64] {
	return aggregate(g, "KSTREAM-COUNT", func() int64 { return 0 },
		func(_ K, _ V, n int64) int64 { return n + 1 }, Int64, opts)
}

// Reduce combines each key's values with f, the first value standing as
// it is.
func Reduce[K, V any](g *Grouped[K, V], f func(acc, v V) V, opts ...Opt) *Table[K, V] {
	// The first value of a key is stored as it is, as Kafka's reduce: a
	// flag rather than a zero value tells "no value yet".
	var zero V
	return aggregateWith(g, "KSTREAM-REDUCE", func() V { return zero },
		func(_ K, v V, old V, hasOld bool) V {
			if !hasOld {
				return v
			}
			return f(old, v)
		}, g.val, opts)
}

func aggregate[K, V, A any](g *Grouped[K, V], kind string, init func() A, agg func(K, V, A) A, def Serde[A], opts []Opt) *Table[K, A] {
	return aggregateWith(g, kind, init, func(k K, v V, old A, hasOld bool) A {
		if !hasOld {
			old = init()
		}
		return agg(k, v, old)
	}, def, opts)
}

func aggregateWith[K, V, A any](g *Grouped[K, V], kind string, _ func() A, agg func(K, V, A, bool) A, def Serde[A], opts []Opt) *Table[K, A] {
	b := g.s.b
	c := conf(opts)
	name := b.name(kind, c.name)
	storeName := name
	if c.name == "" {
		storeName = fmt.Sprintf("%s-STATE-STORE-%010d", kind, b.seq)
	}
	k, a := serdesOf[K, A](b, c, kind, g.key, def)
	repName := g.name
	if repName == "" {
		repName = storeName
	}
	s := g.s
	if s.repartition {
		if g.key == nil || g.val == nil {
			b.errorf("%s: the key may have changed (map, flatMap, selectKey) so the records are repartitioned through <app>-%s-repartition, which needs a key and a value serde (give them with KeySerde/ValueSerde to the grouping)", name, repName)
		} else {
			s = repartitioned(s, repName, g.key, g.val)
		}
	}
	if k == nil || a == nil {
		b.errorf("%s: store %q needs a key and a value serde (give them with KeySerde/ValueSerde)", name, storeName)
	}
	n := b.add(kindProcessor, name, s.n)
	b.addStore(newStoreDef(storeName, k, a), n)
	n.inst = func(t *task) any {
		st := t.store(storeName)
		next := fanout[K, Change[A]](t, n)
		if t.app.cache != nil {
			// The cache forwards a key's latest value once per flush,
			// the store's value (the last one forwarded) as the old.
			st.cache = t.app.cache.named(func(kb, nb []byte, ts time.Time, headers []kgo.RecordHeader) {
				key, ch, ok := cachedChange(t, st, k, a, kb, kb, nb)
				if !ok {
					return
				}
				st.put(kb, nb, ts)
				next(Record[K, Change[A]]{Key: key, Value: ch, Timestamp: ts, Headers: headers})
			})
			t.caches = append(t.caches, st.cache)
		}
		// The key's bytes are a lookup key, written into a buffer reused
		// from record to record when the serde can append (the cache and
		// pebble's batch copy what they keep); a store write without the
		// cache sends them to the changelog, which keeps them: a copy.
		kap := appenderOf(k)
		var scratch []byte
		return func(r Record[K, V]) {
			var kb []byte
			var err error
			if kap != nil {
				scratch, err = kap.appendSerialize(scratch[:0], st.changelog, r.Key)
				kb = scratch
			} else {
				kb, err = k.Serialize(st.changelog, r.Key)
			}
			if err != nil {
				t.fail(fmt.Errorf("%s: key: %w", storeName, err))
				return
			}
			var ob []byte
			var hasOld bool
			var e *cacheEntry
			if st.cache != nil {
				e = st.cache.entry(kb)
			}
			if e != nil {
				ob, hasOld = e.value, true
			} else if ob, hasOld, err = get(t.batch, storeName, kb); err != nil {
				t.fail(fmt.Errorf("%s: get: %w", storeName, err))
				return
			}
			var old A
			if hasOld {
				if old, err = a.Deserialize(st.changelog, ob); err != nil {
					t.fail(fmt.Errorf("%s: stored value: %w", storeName, err))
					return
				}
			}
			nv := agg(r.Key, r.Value, old, hasOld)
			nb, err := a.Serialize(st.changelog, nv)
			if err != nil {
				t.fail(fmt.Errorf("%s: value: %w", storeName, err))
				return
			}
			if st.cache != nil {
				st.cache.putEntry(e, kb, nb, r.Timestamp, r.Headers)
				return
			}
			if kap != nil {
				kb = bytes.Clone(kb)
			}
			st.put(kb, nb, r.Timestamp)
			next(Record[K, Change[A]]{Key: r.Key, Value: Change[A]{Old: old, New: nv, HasOld: hasOld, HasNew: true}, Timestamp: r.Timestamp, Headers: r.Headers})
		}
	}
	return &Table[K, A]{b: b, n: n, key: k, val: a, store: storeName}
}

// TableFrom reads a (compacted) topic as a table: the latest value per
// key, a record without a value deleting its key. The store is named by
// opts (Named) or generated, backed by its own changelog.
func TableFrom[K, V any](b *Builder, topic string, k Serde[K], v Serde[V], opts ...Opt) *Table[K, V] {
	c := conf(opts)
	src := b.add(kindSource, b.name("KTABLE-SOURCE", c.name))
	src.topics = []string{topic}
	if k == nil || v == nil {
		b.errorf("table %s: a table needs a key and a value serde", topic)
	}
	storeName := c.name
	if storeName == "" {
		storeName = fmt.Sprintf("%s-STATE-STORE-%010d", "KTABLE-SOURCE", b.seq)
	}
	b.addStore(newStoreDef(storeName, k, v), src)
	src.inst = func(t *task) any {
		st := t.store(storeName)
		next := fanout[K, Change[V]](t, src)
		if t.app.cache != nil {
			// The cache forwards a key's latest value (or its delete)
			// once per flush, the store's as the old; lookups (joins)
			// read through it. A key put and deleted between two
			// flushes forwards nothing, as Kafka's caching store.
			st.cache = t.app.cache.named(func(kb, nb []byte, ts time.Time, headers []kgo.RecordHeader) {
				key, ch, ok := cachedChange(t, st, k, v, kb, kb, nb)
				if !ok || !ch.HasNew && !ch.HasOld {
					return
				}
				if ch.HasNew {
					st.put(kb, nb, ts)
				} else {
					st.delete(kb, ts)
				}
				next(Record[K, Change[V]]{Key: key, Value: ch, Timestamp: ts, Headers: headers})
			})
			t.caches = append(t.caches, st.cache)
		}
		return sourceFn(func(r *kgo.Record) error {
			// Deserialized here with the cache too, so that a bad record
			// fails at its offset, not at a flush.
			key, err := k.Deserialize(r.Topic, r.Key)
			if err != nil {
				return fmt.Errorf("key of %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			var ch Change[V]
			if r.Value != nil {
				if ch.New, err = v.Deserialize(r.Topic, r.Value); err != nil {
					return fmt.Errorf("value of %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
				}
				ch.HasNew = true
			}
			if st.cache != nil {
				st.cache.put(r.Key, bytes.Clone(r.Value), r.Timestamp, r.Headers)
				return nil
			}
			ob, hasOld, err := st.get(r.Key)
			if err != nil {
				return err
			}
			if hasOld {
				if ch.Old, err = v.Deserialize(r.Topic, ob); err != nil {
					return fmt.Errorf("%s: stored value: %w", storeName, err)
				}
				ch.HasOld = true
			}
			if !ch.HasNew {
				if !hasOld {
					return nil // deleting what is not there changes nothing
				}
				st.delete(r.Key, r.Timestamp)
			} else {
				st.put(bytes.Clone(r.Key), bytes.Clone(r.Value), r.Timestamp)
			}
			next(Record[K, Change[V]]{Key: key, Value: ch, Timestamp: r.Timestamp, Headers: r.Headers})
			return nil
		})
	}
	return &Table[K, V]{b: b, n: src, key: k, val: v, store: storeName}
}

// globalDef is a global table: every partition of topic, on every
// instance, in the instance's global store; the topic is its changelog.
type globalDef struct {
	topic string
	store *storeDef
}

// GlobalTable is a GlobalKTable: a whole topic replicated into every
// instance, read by key (App.Store, and joins next).
type GlobalTable[K, V any] struct {
	store string
	key   Serde[K]
	val   Serde[V]
}

// StoreName is the name to query the global table's store by.
func (g *GlobalTable[K, V]) StoreName() string { return g.store }

// NewGlobalTable reads every partition of topic into a store held by
// each instance, bootstrapped to the topic's end before the
// application processes anything (Kafka's global stream thread).
func NewGlobalTable[K, V any](b *Builder, topic string, k Serde[K], v Serde[V], opts ...Opt) *GlobalTable[K, V] {
	c := conf(opts)
	name := c.name
	if name == "" {
		name = b.name("KTABLE-GLOBAL-STATE-STORE", "")
	} else {
		b.name("", name)
	}
	if k == nil || v == nil {
		b.errorf("global table %s: a table needs a key and a value serde", topic)
	}
	if _, dup := b.stores[name]; dup {
		b.errorf("store %q defined twice", name)
	}
	g := &globalDef{topic: topic}
	g.store = newStoreDef(name, k, v)
	g.store.global = g
	b.stores[name] = g.store
	b.globals = append(b.globals, g)
	return &GlobalTable[K, V]{store: name, key: k, val: v}
}
