package streams

import (
	"fmt"
	"time"
)

// The Processor API (Kafka's Processor<KIn, VIn, KOut, VOut>, KIP-478):
// a user processor, one instance per task, that sees each record,
// forwards any records it likes, keeps state in key-value stores of its
// own and schedules punctuations (punctuate.go).

// Processor is a user processor. Init is called once per task, after the
// task's stores are restored and before its first record; Process for
// each record; Close when the task closes (revoked, lost, the
// application closed). All three run on the processing goroutine, as do
// the punctuators Init schedules: a processor needs no locking.
type Processor[K, V, K2, V2 any] interface {
	Init(ctx *ProcessorContext[K2, V2]) error
	Process(r Record[K, V])
	Close()
}

// ProcessorContext is a processor's view of its task: where its outputs
// go, its stores, its stream time and its punctuations.
type ProcessorContext[K, V any] struct {
	t      *task
	node   *node
	next   func(Record[K, V])
	stores map[string]*storeDef
	now    time.Time // timestamp of the record or punctuation being handled: its store writes' changelog timestamp
}

// Forward sends r to the processor's children, with r.Timestamp as its
// timestamp (a punctuator forwards with the time it was given, or any
// other).
func (c *ProcessorContext[K, V]) Forward(r Record[K, V]) { c.next(r) }

// TaskID is the task's id, "<subtopology>_<partition>".
func (c *ProcessorContext[K, V]) TaskID() string { return c.t.id.String() }

// StreamTime is the task's stream time: the largest record timestamp it
// has processed (the Unix epoch before any).
func (c *ProcessorContext[K, V]) StreamTime() time.Time { return time.UnixMilli(c.t.streamTime) }

// Schedule calls fn every interval of stream time or of wall-clock time
// (punctuate.go for when exactly); cancel stops it. Call it from Init
// or from the processor's own calls (Process, a punctuator).
func (c *ProcessorContext[K, V]) Schedule(interval time.Duration, typ PunctuationType, fn func(ts time.Time)) (cancel func()) {
	return c.t.schedule(interval, typ, func(ts time.Time) {
		prev := c.now
		c.now = ts
		fn(ts)
		c.now = prev
	})
}

// KeyValueStore is a processor's typed view of one of its stores: a
// store of the task's pebble database backed by the changelog topic
// "<app>-<name>-changelog", as the DSL's stores, restored when the task
// starts; its writes are committed with the records processed (at least
// once: flushed before the input offsets commit; exactly once: in the
// same transaction).
type KeyValueStore[K, V any] struct {
	name string
	st   *taskStore
	k    Serde[K]
	v    Serde[V]
	now  func() time.Time
}

// AddKeyValueStore declares a key-value store for processors (Process
// with Stores) to use; a store declared and given to no processor, or
// given to a processor without being declared, is a topology error.
func AddKeyValueStore[K, V any](b *Builder, name string, k Serde[K], v Serde[V]) {
	if name == "" {
		b.errorf("a processor store needs a name")
		return
	}
	if k == nil || v == nil {
		b.errorf("processor store %q needs a key and a value serde", name)
	}
	if _, dup := b.procStores[name]; dup {
		b.errorf("processor store %q defined twice", name)
		return
	}
	b.procStores[name] = newStoreDef(name, k, v)
}

// Stores connects the named stores (AddKeyValueStore) to a Process
// operator.
func Stores(names ...string) Opt {
	return func(c *opConf) { c.stores = append(c.stores, names...) }
}

// connectProcStores resolves the store names of Process nodes (Build):
// an unknown name, a store connected to two processors, or one connected
// to none is an error.
func (b *Builder) connectProcStores() []error {
	var errs []error
	used := map[string]bool{}
	for _, n := range b.nodes {
		for _, name := range n.storeNames {
			def, ok := b.procStores[name]
			if !ok {
				errs = append(errs, fmt.Errorf("%w: processor %s: unknown store %q (declare it with AddKeyValueStore)", ErrTopology, n.name, name))
				continue
			}
			if used[name] {
				errs = append(errs, fmt.Errorf("%w: processor store %q connected to more than one processor", ErrTopology, name))
				continue
			}
			used[name] = true
			if def.node == nil {
				b.addStore(def, n)
			}
		}
	}
	for name := range b.procStores {
		if !used[name] {
			errs = append(errs, fmt.Errorf("%w: processor store %q is connected to no processor (Process with Stores)", ErrTopology, name))
		}
	}
	return errs
}

// GetKeyValueStore returns the store name of the processor whose context
// is ctx, typed: ErrUnknownStore if the processor was not given it
// (Stores), ErrStoreMismatch if its serdes are not of K and V.
func GetKeyValueStore[K, V, K2, V2 any](ctx *ProcessorContext[K2, V2], name string) (*KeyValueStore[K, V], error) {
	def, ok := ctx.stores[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a store of processor %s", ErrUnknownStore, name, ctx.node.name)
	}
	k, okK := def.keySerde.(Serde[K])
	v, okV := def.valSerde.(Serde[V])
	if !okK || !okV {
		return nil, fmt.Errorf("%w: store %q holds %T/%T, not %T/%T", ErrStoreMismatch, name, def.keySerde, def.valSerde, *new(K), *new(V))
	}
	return &KeyValueStore[K, V]{name: name, st: ctx.t.store(name), k: k, v: v, now: func() time.Time { return ctx.now }}, nil
}

// Get returns key's value, ok false if it has none.
func (s *KeyValueStore[K, V]) Get(key K) (v V, ok bool, err error) {
	kb, err := s.k.Serialize(s.st.changelog, key)
	if err != nil {
		return v, false, fmt.Errorf("streams: store %s: key: %w", s.name, err)
	}
	b, ok, err := s.st.get(kb)
	if err != nil || !ok {
		return v, false, err
	}
	if v, err = s.v.Deserialize(s.st.changelog, b); err != nil {
		return v, false, fmt.Errorf("streams: store %s: value: %w", s.name, err)
	}
	return v, true, nil
}

// Put sets key's value (and logs it to the changelog, with the timestamp
// of the record or punctuation being handled).
func (s *KeyValueStore[K, V]) Put(key K, val V) error {
	kb, err := s.k.Serialize(s.st.changelog, key)
	if err != nil {
		return fmt.Errorf("streams: store %s: key: %w", s.name, err)
	}
	vb, err := s.v.Serialize(s.st.changelog, val)
	if err != nil {
		return fmt.Errorf("streams: store %s: value: %w", s.name, err)
	}
	s.st.put(kb, vb, s.now())
	return s.st.t.err
}

// Delete removes key (a tombstone in the changelog).
func (s *KeyValueStore[K, V]) Delete(key K) error {
	kb, err := s.k.Serialize(s.st.changelog, key)
	if err != nil {
		return fmt.Errorf("streams: store %s: key: %w", s.name, err)
	}
	s.st.delete(kb, s.now())
	return s.st.t.err
}

// Range calls fn for each key and value of the store, in the order of
// the keys' serialized bytes, until fn returns false.
func (s *KeyValueStore[K, V]) Range(fn func(K, V) bool) error {
	var derr error
	err := rangeStore(s.st.t.batch, s.name, func(kb, vb []byte) bool {
		k, err := s.k.Deserialize(s.st.changelog, kb)
		if err != nil {
			derr = fmt.Errorf("streams: store %s: key: %w", s.name, err)
			return false
		}
		v, err := s.v.Deserialize(s.st.changelog, vb)
		if err != nil {
			derr = fmt.Errorf("streams: store %s: value: %w", s.name, err)
			return false
		}
		return fn(k, v)
	})
	if derr != nil {
		return derr
	}
	return err
}

// Process runs a processor made by supplier, one per task, on each
// record of s; its outputs (Forward) are the returned stream. The key may
// change, so a later stateful operation repartitions; the input is not
// repartitioned for the processor's own stores (as Kafka's process()):
// give it a stream partitioned by the key it stores by. Serdes of the
// output: KeySerde and ValueSerde.
func Process[K, V, K2, V2 any](s *Stream[K, V], supplier func() Processor[K, V, K2, V2], opts ...Opt) *Stream[K2, V2] {
	c := conf(opts)
	n, out := derive[K, V, K2, V2](s, "KSTREAM-PROCESSOR", c, func(t *task, n *node) func(Record[K, V]) {
		p := supplier()
		ctx := &ProcessorContext[K2, V2]{t: t, node: n, next: fanout[K2, V2](t, n), stores: map[string]*storeDef{}}
		for _, def := range n.stores {
			ctx.stores[def.name] = def
		}
		t.procs = append(t.procs, &taskProc{
			init:  func() error { return p.Init(ctx) },
			close: p.Close,
		})
		return func(r Record[K, V]) {
			ctx.now = r.Timestamp
			p.Process(r)
		}
	})
	if supplier == nil {
		s.b.errorf("processor %s: nil supplier", n.name)
	}
	n.storeNames = c.stores
	out.key, out.val = serdesOf[K2, V2](s.b, c, "process", nil, nil)
	out.repartition = true
	return out
}

// taskProc is a processor instance of a task, for Init and Close.
type taskProc struct {
	init   func() error
	close  func()
	inited bool
}

// initProcessors calls the processors' Init, once the task's stores are
// restored.
func (t *task) initProcessors() error {
	for _, p := range t.procs {
		if p.inited {
			continue
		}
		p.inited = true
		if err := p.init(); err != nil {
			return fmt.Errorf("streams: task %s: processor init: %w", t.id, err)
		}
	}
	return t.err
}

func (t *task) closeProcessors() {
	for _, p := range t.procs {
		if p.inited {
			p.inited = false
			p.close()
		}
	}
	t.puncts = nil
}
