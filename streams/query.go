package streams

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// StoreView reads one store of this instance by key (interactive
// queries, read locally): the value of the last commit, never a write
// that a crash could still take back.
type StoreView struct {
	a    *App
	name string
	def  *storeDef
}

// Store returns the view of the store called name (a Table's or a
// GlobalTable's StoreName).
func (a *App) Store(name string) *StoreView {
	return &StoreView{a: a, name: name, def: a.topo.stores[name]}
}

// Get returns the value of key. key must be of the store's key type and
// the value is of its value type (Query gives typed access). A key whose
// task runs on another instance is ErrKeyNotLocal.
func (s *StoreView) Get(key any) (any, bool, error) {
	if s.def == nil {
		return nil, false, fmt.Errorf("%w: %q", ErrUnknownStore, s.name)
	}
	raw, err := s.def.serKey(s.topic(), key)
	if err != nil {
		return nil, false, err
	}
	vb, found, err := s.GetBytes(raw)
	if err != nil || !found {
		return nil, found, err
	}
	v, err := s.def.deValue(s.topic(), vb)
	return v, err == nil, err
}

func (s *StoreView) topic() string {
	if s.def.global != nil {
		return s.def.global.topic
	}
	return s.a.changelogTopic(s.name)
}

// GetBytes returns the stored bytes of a serialized key.
func (s *StoreView) GetBytes(key []byte) ([]byte, bool, error) {
	if s.def == nil {
		return nil, false, fmt.Errorf("%w: %q", ErrUnknownStore, s.name)
	}
	a := s.a
	if s.def.global != nil {
		if a.global == nil {
			return nil, false, ErrNotRunning
		}
		return get(a.global.db.db, s.name, key)
	}
	sub := s.def.node.sub
	a.tasksMu.RLock()
	n := a.taskCount[sub]
	a.tasksMu.RUnlock()
	if n == 0 {
		return nil, false, ErrNotRunning
	}
	// The partition a key's changelog record goes to is the task's: the
	// key's partition as the default partitioner computes it (the input
	// was partitioned that way, by a Kafka producer or a repartition).
	pk := key
	if s.def.windowed && len(pk) >= 8 {
		pk = pk[:len(pk)-8]
	}
	if s.def.session && len(pk) >= 16 {
		pk = pk[:len(pk)-16]
	}
	p := int32(kgo.StickyKeyPartitioner(nil).ForTopic(s.topic()).Partition(&kgo.Record{Key: pk}, int(n)))
	a.tasksMu.RLock()
	defer a.tasksMu.RUnlock()
	t, ok := a.tasks[taskID{sub, p}]
	if !ok || t.db == nil {
		return nil, false, fmt.Errorf("%w: store %s, task %d_%d", ErrKeyNotLocal, s.name, sub, p)
	}
	if t.restoring.Load() {
		// Part of the changelog is in: a read would answer an old value.
		return nil, false, fmt.Errorf("%w: store %s, task %d_%d", ErrStoreRestoring, s.name, sub, p)
	}
	return get(t.db.db, s.name, key)
}

// Query returns a typed view of a store: Get(key) is its value. The
// types must be the store's (ErrStoreMismatch otherwise).
func Query[K, V any](a *App, store string) (*TypedView[K, V], error) {
	def := a.topo.stores[store]
	if def == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownStore, store)
	}
	k, ok1 := def.keySerde.(Serde[K])
	v, ok2 := def.valSerde.(Serde[V])
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%w: store %q holds %T -> %T", ErrStoreMismatch, store, def.keySerde, def.valSerde)
	}
	return &TypedView[K, V]{view: a.Store(store), k: k, v: v}, nil
}

// TypedView is a store read with its serdes.
type TypedView[K, V any] struct {
	view *StoreView
	k    Serde[K]
	v    Serde[V]
}

// Get returns key's value, whether it exists, or ErrKeyNotLocal.
func (q *TypedView[K, V]) Get(key K) (V, bool, error) {
	var zero V
	kb, err := q.k.Serialize(q.view.topic(), key)
	if err != nil {
		return zero, false, err
	}
	vb, ok, err := q.view.GetBytes(kb)
	if err != nil || !ok {
		return zero, ok, err
	}
	v, err := q.v.Deserialize(q.view.topic(), vb)
	return v, err == nil, err
}
