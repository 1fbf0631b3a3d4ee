package streams

import (
	"container/list"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultCacheMaxBytes is Kafka Streams' default record cache size
// (statestore.cache.max.bytes, formerly cache.max.bytes.buffering):
// 10 MiB per application instance.
const DefaultCacheMaxBytes = 10 << 20

// cacheEntryOverhead is what an entry costs beside its key and value
// bytes (the entry, its map slot and list element), counted against the
// bound as Kafka's LRUCacheEntry counts its record context.
const cacheEntryOverhead = 96

// recordCache is Kafka Streams' record cache (KIP-63; its ThreadCache):
// one per instance, as the instance has one processing goroutine,
// shared by the caching stores of all its tasks (count, reduce,
// aggregate). An update of such a store stays in the cache, merged with
// the key's earlier updates; the store write, the changelog record and
// the record forwarded downstream happen once per key when the cache is
// flushed (each commit, before the producer flush or the transaction's
// end) or when the key is evicted, least recently used first, to keep
// the cache under max bytes. Only the processing goroutine touches it.
type recordCache struct {
	max      int64
	size     int64
	lru      list.List // of *cacheEntry, front: least recently used
	flushing bool      // evictions wait: a flush forwards into other caches
}

// namedCache is the part of the cache of one store of one task
// (Kafka's NamedCache).
type namedCache struct {
	c       *recordCache
	entries map[string]*cacheEntry
	dirty   list.List // of *cacheEntry, in the order keys were first updated since their last flush
	// flush writes one key's latest value to the store and its changelog
	// and forwards it downstream.
	flush func(key, value []byte, ts time.Time, headers []kgo.RecordHeader)
}

type cacheEntry struct {
	nc      *namedCache
	key     string
	value   []byte
	ts      time.Time
	headers []kgo.RecordHeader
	dirty   bool
	elem    *list.Element // in recordCache.lru
	dirtyAt *list.Element // in namedCache.dirty while dirty
}

func (e *cacheEntry) bytes() int64 { return int64(len(e.key)+len(e.value)) + cacheEntryOverhead }

func (c *recordCache) named(flush func([]byte, []byte, time.Time, []kgo.RecordHeader)) *namedCache {
	return &namedCache{c: c, entries: map[string]*cacheEntry{}, flush: flush}
}

// get returns the key's cached value (nil, false: not cached).
func (nc *namedCache) get(key []byte) ([]byte, bool) {
	e, ok := nc.entries[string(key)]
	if !ok {
		return nil, false
	}
	nc.c.lru.MoveToBack(e.elem)
	return e.value, true
}

// entry returns the key's entry, nil if it is not cached, for a read
// followed by putEntry: one map lookup and one move in the LRU per
// update instead of two each (get, then put).
func (nc *namedCache) entry(key []byte) *cacheEntry { return nc.entries[string(key)] }

// put holds the key's new value until the next flush or its eviction.
func (nc *namedCache) put(key, value []byte, ts time.Time, headers []kgo.RecordHeader) {
	nc.putEntry(nc.entries[string(key)], key, value, ts, headers)
}

// putEntry is put with the key's entry, as entry returned it with
// nothing done to the cache since (nil: the key is not cached). The key
// is copied; the value is kept.
func (nc *namedCache) putEntry(e *cacheEntry, key, value []byte, ts time.Time, headers []kgo.RecordHeader) {
	c := nc.c
	if e != nil {
		c.size += int64(len(value) - len(e.value))
		c.lru.MoveToBack(e.elem)
	} else {
		e = &cacheEntry{nc: nc, key: string(key)}
		e.elem = c.lru.PushBack(e)
		nc.entries[e.key] = e
		c.size += int64(len(key)+len(value)) + cacheEntryOverhead
	}
	e.value, e.ts, e.headers = value, ts, headers
	if !e.dirty {
		e.dirty = true
		e.dirtyAt = nc.dirty.PushBack(e)
	}
	c.evict()
}

// evict flushes and drops least recently used entries while the cache
// is over its bound (the entry just written may go too, as in Kafka: a
// cache smaller than one entry forwards every update).
func (c *recordCache) evict() {
	if c.flushing {
		return
	}
	c.flushing = true
	for c.size > c.max && c.lru.Len() > 0 {
		e := c.lru.Front().Value.(*cacheEntry)
		dirty := e.dirty
		c.remove(e)
		if dirty {
			e.nc.flush([]byte(e.key), e.value, e.ts, e.headers)
		}
	}
	c.flushing = false
}

func (c *recordCache) remove(e *cacheEntry) {
	c.lru.Remove(e.elem)
	delete(e.nc.entries, e.key)
	c.size -= e.bytes()
	if e.dirty {
		e.dirty = false
		e.nc.dirty.Remove(e.dirtyAt)
		e.dirtyAt = nil
	}
}

// flushDirty writes and forwards every dirty key of the store, in the
// order they were first updated; it reports whether there were any.
func (nc *namedCache) flushDirty() bool {
	if nc.dirty.Len() == 0 {
		return false
	}
	for el := nc.dirty.Front(); el != nil; el = nc.dirty.Front() {
		e := nc.dirty.Remove(el).(*cacheEntry)
		e.dirty, e.dirtyAt = false, nil
		nc.flush([]byte(e.key), e.value, e.ts, e.headers)
	}
	return true
}

// drop forgets the store's entries, dirty ones included (an aborted
// transaction, partitions lost, a task closed).
func (nc *namedCache) drop() {
	for _, e := range nc.entries {
		nc.c.remove(e)
	}
}

// flushCaches writes and forwards what the task's caches hold: a flush
// may update a caching store downstream in the same task, so it runs
// until none is dirty. Evictions wait for the next update.
func (t *task) flushCaches() {
	if len(t.caches) == 0 {
		return
	}
	c := t.app.cache
	c.flushing = true
	for more := true; more; {
		more = false
		for _, nc := range t.caches {
			if nc.flushDirty() {
				more = true
			}
		}
	}
	c.flushing = false
}

// cachedChange is what a caching store's flush forwards for one key: the
// key (deserialized from kb), and the change from the store's value (the
// last one forwarded) to nb (nil: a delete). storeKey is the key in the
// store (kb and a window start, for a windowed one). ok is false when a
// serde or the store failed: the task has failed.
func cachedChange[K, V any](t *task, st *taskStore, k Serde[K], v Serde[V], kb, storeKey, nb []byte) (key K, ch Change[V], ok bool) {
	var err error
	if key, err = k.Deserialize(st.changelog, kb); err != nil {
		t.fail(fmt.Errorf("%s: cached key: %w", st.name, err))
		return key, ch, false
	}
	if nb != nil {
		if ch.New, err = v.Deserialize(st.changelog, nb); err != nil {
			t.fail(fmt.Errorf("%s: cached value: %w", st.name, err))
			return key, ch, false
		}
		ch.HasNew = true
	}
	ob, hasOld, err := get(t.batch, st.name, storeKey)
	if err != nil {
		t.fail(fmt.Errorf("%s: get: %w", st.name, err))
		return key, ch, false
	}
	if hasOld {
		if ch.Old, err = v.Deserialize(st.changelog, ob); err != nil {
			t.fail(fmt.Errorf("%s: stored value: %w", st.name, err))
			return key, ch, false
		}
		ch.HasOld = true
	}
	return key, ch, true
}
