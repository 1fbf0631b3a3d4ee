package streams

import (
	"fmt"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Record is what flows between processors: a typed key and value with
// the timestamp (event time: the record's timestamp, as Kafka Streams'
// default extractor) and the headers of the input record it came from.
type Record[K, V any] struct {
	Key       K
	Value     V
	Timestamp time.Time
	Headers   []kgo.RecordHeader
}

// KeyValue is one output of FlatMap.
type KeyValue[K, V any] struct {
	Key   K
	Value V
}

// Stream is a KStream: an unbounded sequence of typed records. Methods
// keep the types; functions of the package change them (Map, MapValues,
// SelectKey, FlatMap), because Go methods have no type parameters.
type Stream[K, V any] struct {
	b   *Builder
	n   *node
	key Serde[K] // nil when unknown (after a type change)
	val Serde[V]
	// repartition is set once the key may have changed since the source:
	// a stateful operation must then shuffle the records through a
	// repartition topic so that equal keys meet in one task.
	repartition bool
}

// sourceFn is a source's processing function: it decodes a fetched
// record and pushes it down the graph.
type sourceFn func(*kgo.Record) error

// fanout returns the function that forwards records of n's output to
// each of its children, for task t.
func fanout[K, V any](t *task, n *node) func(Record[K, V]) {
	fs := make([]func(Record[K, V]), 0, len(n.children))
	for _, c := range n.children {
		fs = append(fs, t.instance(c).(func(Record[K, V])))
	}
	switch len(fs) {
	case 0:
		return func(Record[K, V]) {}
	case 1:
		return fs[0]
	}
	return func(r Record[K, V]) {
		for _, f := range fs {
			f(r)
		}
	}
}

// Source reads topics as a stream with the given serdes.
func Source[K, V any](b *Builder, topics []string, k Serde[K], v Serde[V], opts ...Opt) *Stream[K, V] {
	c := conf(opts)
	n := b.add(kindSource, b.name("KSTREAM-SOURCE", c.name))
	if len(topics) == 0 {
		b.errorf("source %s: no topic", n.name)
	}
	n.topics = topics
	return sourceStream(b, n, k, v)
}

// SourcePattern reads every topic whose whole name matches re, but for
// the application's internal topics and those starting with "__": the
// topics matching at Start, then those created later, found every
// Config.MetadataMaxAge (a deleted one is no longer read). A new topic's
// partition count must be the subtopology's if it keeps state
// (ErrCopartition stops the application otherwise).
func SourcePattern[K, V any](b *Builder, re *regexp.Regexp, k Serde[K], v Serde[V], opts ...Opt) *Stream[K, V] {
	c := conf(opts)
	n := b.add(kindSource, b.name("KSTREAM-SOURCE", c.name))
	n.pattern = re
	return sourceStream(b, n, k, v)
}

func sourceStream[K, V any](b *Builder, n *node, k Serde[K], v Serde[V]) *Stream[K, V] {
	if k == nil || v == nil {
		b.errorf("source %s: a source needs a key and a value serde", n.name)
	}
	n.inst = func(t *task) any {
		out := fanout[K, V](t, n)
		return sourceFn(func(r *kgo.Record) error {
			key, err := k.Deserialize(r.Topic, r.Key)
			if err != nil {
				return fmt.Errorf("key of %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			val, err := v.Deserialize(r.Topic, r.Value)
			if err != nil {
				return fmt.Errorf("value of %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			out(Record[K, V]{Key: key, Value: val, Timestamp: r.Timestamp, Headers: r.Headers})
			return nil
		})
	}
	return &Stream[K, V]{b: b, n: n, key: k, val: v}
}

// derive adds a processor child of s whose instance is mk.
func derive[K, V, K2, V2 any](s *Stream[K, V], kind string, c opConf, mk func(t *task, n *node) func(Record[K, V])) (*node, *Stream[K2, V2]) {
	n := s.b.add(kindProcessor, s.b.name(kind, c.name), s.n)
	n.inst = func(t *task) any { return mk(t, n) }
	return n, &Stream[K2, V2]{b: s.b, n: n}
}

// Map changes key and value; the key may have changed, so a later
// stateful operation repartitions.
func Map[K, V, K2, V2 any](s *Stream[K, V], f func(K, V) (K2, V2), opts ...Opt) *Stream[K2, V2] {
	c := conf(opts)
	_, out := derive[K, V, K2, V2](s, "KSTREAM-MAP", c, func(t *task, n *node) func(Record[K, V]) {
		next := fanout[K2, V2](t, n)
		return func(r Record[K, V]) {
			k, v := f(r.Key, r.Value)
			next(Record[K2, V2]{Key: k, Value: v, Timestamp: r.Timestamp, Headers: r.Headers})
		}
	})
	out.key, out.val = serdesOf[K2, V2](s.b, c, "map", nil, nil)
	out.repartition = true
	return out
}

// MapValues changes the value and keeps the key (and its partitioning).
func MapValues[K, V, V2 any](s *Stream[K, V], f func(V) V2, opts ...Opt) *Stream[K, V2] {
	c := conf(opts)
	_, out := derive[K, V, K, V2](s, "KSTREAM-MAPVALUES", c, func(t *task, n *node) func(Record[K, V]) {
		next := fanout[K, V2](t, n)
		return func(r Record[K, V]) {
			next(Record[K, V2]{Key: r.Key, Value: f(r.Value), Timestamp: r.Timestamp, Headers: r.Headers})
		}
	})
	out.key, out.val = serdesOf[K, V2](s.b, c, "mapValues", s.key, nil)
	out.repartition = s.repartition
	return out
}

// FlatMap turns each record into zero or more; the key may change.
func FlatMap[K, V, K2, V2 any](s *Stream[K, V], f func(K, V) []KeyValue[K2, V2], opts ...Opt) *Stream[K2, V2] {
	c := conf(opts)
	_, out := derive[K, V, K2, V2](s, "KSTREAM-FLATMAP", c, func(t *task, n *node) func(Record[K, V]) {
		next := fanout[K2, V2](t, n)
		return func(r Record[K, V]) {
			for _, kv := range f(r.Key, r.Value) {
				next(Record[K2, V2]{Key: kv.Key, Value: kv.Value, Timestamp: r.Timestamp, Headers: r.Headers})
			}
		}
	})
	out.key, out.val = serdesOf[K2, V2](s.b, c, "flatMap", nil, nil)
	out.repartition = true
	return out
}

// FlatMapValues turns each value into zero or more, keeping the key.
func FlatMapValues[K, V, V2 any](s *Stream[K, V], f func(V) []V2, opts ...Opt) *Stream[K, V2] {
	c := conf(opts)
	_, out := derive[K, V, K, V2](s, "KSTREAM-FLATMAPVALUES", c, func(t *task, n *node) func(Record[K, V]) {
		next := fanout[K, V2](t, n)
		return func(r Record[K, V]) {
			for _, v := range f(r.Value) {
				next(Record[K, V2]{Key: r.Key, Value: v, Timestamp: r.Timestamp, Headers: r.Headers})
			}
		}
	})
	out.key, out.val = serdesOf[K, V2](s.b, c, "flatMapValues", s.key, nil)
	out.repartition = s.repartition
	return out
}

// SelectKey sets a new key computed from the record; a later stateful
// operation repartitions.
func SelectKey[K, V, K2 any](s *Stream[K, V], f func(K, V) K2, opts ...Opt) *Stream[K2, V] {
	c := conf(opts)
	_, out := derive[K, V, K2, V](s, "KSTREAM-KEY-SELECT", c, func(t *task, n *node) func(Record[K, V]) {
		next := fanout[K2, V](t, n)
		return func(r Record[K, V]) {
			next(Record[K2, V]{Key: f(r.Key, r.Value), Value: r.Value, Timestamp: r.Timestamp, Headers: r.Headers})
		}
	})
	out.key, out.val = serdesOf[K2, V](s.b, c, "selectKey", nil, s.val)
	out.repartition = true
	return out
}

// same adds a processor that keeps the types.
func (s *Stream[K, V]) same(kind string, c opConf, mk func(next func(Record[K, V])) func(Record[K, V])) *Stream[K, V] {
	_, out := derive[K, V, K, V](s, kind, c, func(t *task, n *node) func(Record[K, V]) {
		return mk(fanout[K, V](t, n))
	})
	out.key, out.val = serdesOf[K, V](s.b, c, kind, s.key, s.val)
	out.repartition = s.repartition
	return out
}

// Filter keeps the records for which pred is true.
func (s *Stream[K, V]) Filter(pred func(K, V) bool, opts ...Opt) *Stream[K, V] {
	return s.same("KSTREAM-FILTER", conf(opts), func(next func(Record[K, V])) func(Record[K, V]) {
		return func(r Record[K, V]) {
			if pred(r.Key, r.Value) {
				next(r)
			}
		}
	})
}

// Peek calls f for each record and forwards it unchanged.
func (s *Stream[K, V]) Peek(f func(K, V), opts ...Opt) *Stream[K, V] {
	return s.same("KSTREAM-PEEK", conf(opts), func(next func(Record[K, V])) func(Record[K, V]) {
		return func(r Record[K, V]) {
			f(r.Key, r.Value)
			next(r)
		}
	})
}

// Branch splits s as Kafka's split(): a record goes to the stream of the
// first predicate it satisfies, and is dropped if it satisfies none.
func (s *Stream[K, V]) Branch(preds ...func(K, V) bool) []*Stream[K, V] {
	n := s.b.add(kindProcessor, s.b.name("KSTREAM-BRANCH", ""), s.n)
	outs := make([]*Stream[K, V], len(preds))
	for i := range preds {
		c := s.b.add(kindProcessor, s.b.name("KSTREAM-BRANCHCHILD", ""), n)
		c.inst = func(t *task) any { return fanout[K, V](t, c) }
		outs[i] = &Stream[K, V]{b: s.b, n: c, key: s.key, val: s.val, repartition: s.repartition}
	}
	n.inst = func(t *task) any {
		branches := make([]func(Record[K, V]), len(n.children))
		for i, c := range n.children {
			branches[i] = t.instance(c).(func(Record[K, V]))
		}
		return func(r Record[K, V]) {
			for i, p := range preds {
				if p(r.Key, r.Value) {
					branches[i](r)
					return
				}
			}
		}
	}
	return outs
}

// Merge returns one stream of the records of s and others.
func (s *Stream[K, V]) Merge(others ...*Stream[K, V]) *Stream[K, V] {
	parents := []*node{s.n}
	out := &Stream[K, V]{b: s.b, key: s.key, val: s.val, repartition: s.repartition}
	for _, o := range others {
		parents = append(parents, o.n)
		out.repartition = out.repartition || o.repartition
		if out.key == nil {
			out.key = o.key
		}
		if out.val == nil {
			out.val = o.val
		}
	}
	n := s.b.add(kindProcessor, s.b.name("KSTREAM-MERGE", ""), parents...)
	n.inst = func(t *task) any { return fanout[K, V](t, n) }
	out.n = n
	return out
}

// To writes the stream to topic with its serdes (or those of opts); the
// partition is chosen from the key as Kafka's default partitioner does
// (murmur2), so Java clients and this library agree.
func (s *Stream[K, V]) To(topic string, opts ...Opt) {
	c := conf(opts)
	k, v := serdesOf[K, V](s.b, c, "to", s.key, s.val)
	n := s.b.add(kindSink, s.b.name("KSTREAM-SINK", c.name), s.n)
	n.sinkTopic = topic
	if k == nil || v == nil {
		s.b.errorf("sink %s to %q: no key or value serde (give them with KeySerde/ValueSerde)", n.name, topic)
	}
	n.inst = func(t *task) any { return sinkFn(t, topic, -1, k, v) }
}

// sinkFn serializes records and sends them to topic (partition -1: by
// key).
func sinkFn[K, V any](t *task, topic string, partition int32, k Serde[K], v Serde[V]) func(Record[K, V]) {
	slab := &t.app.slab
	kap, vap := appenderOf(k), appenderOf(v)
	return func(r Record[K, V]) {
		kb, err := serializeTo(slab, kap, k, topic, r.Key)
		if err != nil {
			t.fail(fmt.Errorf("key to %s: %w", topic, err))
			return
		}
		vb, err := serializeTo(slab, vap, v, topic, r.Value)
		if err != nil {
			t.fail(fmt.Errorf("value to %s: %w", topic, err))
			return
		}
		kr := slab.record()
		kr.Topic, kr.Partition, kr.Key, kr.Value, kr.Timestamp, kr.Headers = topic, partition, kb, vb, r.Timestamp, r.Headers
		t.send(kr)
	}
}

// repartitioned returns s, or, when its key may have changed, s written
// to the internal topic "<app>-<name>-repartition" and read back: a new
// subtopology whose tasks see each key in one place.
func repartitioned[K, V any](s *Stream[K, V], name string, k Serde[K], v Serde[V]) *Stream[K, V] {
	if !s.repartition {
		return s
	}
	b := s.b
	suffix := name + "-repartition"
	if k == nil || v == nil {
		b.errorf("%s: the key may have changed (map, flatMap, selectKey) so the records are repartitioned through <app>-%s, which needs a key and a value serde (give them with KeySerde/ValueSerde)", name, suffix)
	}
	sink := b.add(kindSink, b.name("KSTREAM-SINK", ""), s.n)
	sink.sinkInternal = suffix
	sink.inst = func(t *task) any { return sinkFn(t, t.app.internalTopic(suffix), -1, k, v) }
	src := b.add(kindSource, b.name("KSTREAM-SOURCE", ""))
	src.internal = suffix
	return sourceStream(b, src, k, v)
}
