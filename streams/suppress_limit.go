package streams

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// BufferConfig bounds a suppression buffer, as Kafka's BufferConfig:
// MaxRecords keys and MaxBytes bytes (0: no bound, Kafka's
// Long.MAX_VALUE), and what to do when an update takes the buffer past
// a bound (Full). The zero BufferConfig is Kafka's
// BufferConfig.unbounded().
//
// A buffered key's size is its buffer entry's: the serialized key and
// value and 17 bytes (the buffer time, the record timestamp, a flag
// byte), plus 4 and the old value's bytes when the update has one.
// Kafka counts its in-memory entry (the record context included), so the
// same MaxBytes holds a few more entries here.
type BufferConfig struct {
	MaxRecords int64
	MaxBytes   int64
	Full       BufferFull
}

// BufferFull is what a suppression does when its buffer is over a
// bound.
type BufferFull int

const (
	// ShutDownWhenFull stops the application with ErrBufferFull, as
	// Kafka's shutDownWhenFull (a StreamsException): suppression never
	// emits before its time. Kafka's default for unbounded().
	ShutDownWhenFull BufferFull = iota
	// EmitEarlyWhenFull emits the oldest buffered keys (by buffer time)
	// until the buffer is within its bounds again, as Kafka's
	// emitEarlyWhenFull (the default of its maxRecords(n) and
	// maxBytes(n)).
	EmitEarlyWhenFull
)

// ErrBufferFull: a suppression buffer with ShutDownWhenFull went past
// its bounds; the application stops with it (App.Wait).
var ErrBufferFull = errors.New("streams: suppression buffer full")

// UntilTimeLimit holds each key's updates back until d of stream time
// has passed since the first update buffered for it, then emits the
// latest, as Kafka's Suppressed.untilTimeLimit: a key updated again while
// buffered keeps its place (Kafka's non-resetting buffer) and only its
// last update is emitted, with that update's old value and timestamp.
// Deletes are buffered and emitted like updates. buf bounds the buffer.
func UntilTimeLimit(d time.Duration, buf BufferConfig) Suppressed {
	return Suppressed{untilTimeLimit: true, timeLimit: d, buffer: buf}
}

// SuppressTable holds back the updates of any table as s says
// (UntilTimeLimit; UntilWindowCloses needs a windowed table: Suppress),
// as Kafka's KTable.suppress. The buffer is a store ("<name>-store", or
// generated) with a changelog, written in the commit that emits, as
// UntilWindowCloses' is: its key is the buffer time (the timestamp of the
// key's first buffered update, u64 big endian) then the key's bytes, so
// the keys due are the store's first; its value the latest update's
// timestamp (u64 big endian), a flag byte (1: a new value, 2: an old
// value), the old value's length (u32 big endian) and bytes when there is
// one, then the new value's bytes. Keys leave it, oldest buffer time
// first, when stream time (the task's) passes their buffer time plus the
// limit, and (EmitEarlyWhenFull) while the buffer is over its bounds.
func SuppressTable[K, V any](tbl *Table[K, V], s Suppressed, opts ...Opt) *Table[K, V] {
	if s.untilWindowCloses {
		tbl.b.errorf("SuppressTable: UntilWindowCloses needs a windowed table: Suppress")
	}
	return suppressTimeLimit(tbl, s, opts)
}

// limitEntry is what a time-limited suppression keeps in memory of a
// buffered key: its buffer time and its entry's size.
type limitEntry struct {
	at   int64
	size int64
}

func suppressTimeLimit[K, V any](tbl *Table[K, V], s Suppressed, opts []Opt) *Table[K, V] {
	b := tbl.b
	c := conf(opts)
	name := b.name("KTABLE-SUPPRESS", c.name)
	storeName := name + "-store"
	if c.name == "" {
		storeName = fmt.Sprintf("KTABLE-SUPPRESS-STATE-STORE-%010d", b.seq)
	}
	if !s.untilTimeLimit {
		b.errorf("%s: Suppressed: use UntilWindowCloses or UntilTimeLimit", name)
	}
	if s.timeLimit < 0 || s.timeLimit%time.Millisecond != 0 || s.buffer.MaxRecords < 0 || s.buffer.MaxBytes < 0 ||
		(s.buffer.Full != ShutDownWhenFull && s.buffer.Full != EmitEarlyWhenFull) {
		b.errorf("%s: UntilTimeLimit(%v, %+v): want a limit of whole milliseconds >= 0, bounds >= 0 (0: none), Full ShutDownWhenFull or EmitEarlyWhenFull", name, s.timeLimit, s.buffer)
	}
	if tbl.key == nil || tbl.val == nil {
		b.errorf("%s: the buffer needs the table's key and value serdes", name)
	}
	n := b.add(kindProcessor, name, tbl.n)
	b.addStore(newStoreDef(storeName, Bytes, Bytes), n)
	ks, vs := tbl.key, tbl.val
	limit := s.timeLimit.Milliseconds()
	maxRecords, maxBytes := s.buffer.MaxRecords, s.buffer.MaxBytes
	if maxRecords == 0 {
		maxRecords = math.MaxInt64
	}
	if maxBytes == 0 {
		maxBytes = math.MaxInt64
	}
	n.inst = func(t *task) any {
		st := t.store(storeName)
		next := fanout[K, Change[V]](t, n)
		// What the store holds, in memory: each buffered key's buffer
		// time and size, their count and total, the smallest time. Read
		// from the store at the first record and after every discard
		// (an aborted transaction brings evicted entries back, a restore
		// fills the store).
		var (
			index  map[string]limitEntry
			bytes  int64
			minAt  int64
			synced = -1 // t.discards when index was read
		)
		sync := func() bool {
			if synced == t.discards {
				return true
			}
			index, bytes, minAt = map[string]limitEntry{}, 0, math.MaxInt64
			err := st.scan(nil, nil, func(k, v []byte) bool {
				if len(k) < 8 {
					t.fail(fmt.Errorf("%s: buffered key of %d bytes", storeName, len(k)))
					return false
				}
				e := limitEntry{at: int64(binary.BigEndian.Uint64(k)), size: int64(len(k) + len(v))}
				index[string(k[8:])] = e
				bytes += e.size
				minAt = min(minAt, e.at)
				return true
			})
			if err != nil {
				t.fail(fmt.Errorf("%s: read buffer: %w", storeName, err))
			}
			synced = t.discards
			return err == nil && t.err == nil
		}
		over := func() bool { return int64(len(index)) > maxRecords || bytes > maxBytes }
		emit := func(k, v []byte) bool {
			key, err := ks.Deserialize(st.changelog, k[8:])
			if err != nil {
				t.fail(fmt.Errorf("%s: buffered key: %w", storeName, err))
				return false
			}
			if len(v) < 9 {
				t.fail(fmt.Errorf("%s: buffered value of %d bytes", storeName, len(v)))
				return false
			}
			ts, flags, rest := int64(binary.BigEndian.Uint64(v)), v[8], v[9:]
			var ch Change[V]
			if flags&2 != 0 {
				if len(rest) < 4 || uint64(len(rest)-4) < uint64(binary.BigEndian.Uint32(rest)) {
					t.fail(fmt.Errorf("%s: buffered value: old value past its end", storeName))
					return false
				}
				ol := binary.BigEndian.Uint32(rest)
				if ch.Old, err = vs.Deserialize(st.changelog, rest[4:4+ol]); err != nil {
					t.fail(fmt.Errorf("%s: buffered old value: %w", storeName, err))
					return false
				}
				ch.HasOld, rest = true, rest[4+ol:]
			}
			if flags&1 != 0 {
				if ch.New, err = vs.Deserialize(st.changelog, rest); err != nil {
					t.fail(fmt.Errorf("%s: buffered value: %w", storeName, err))
					return false
				}
				ch.HasNew = true
			}
			st.delete(k, time.UnixMilli(t.streamTime))
			e := index[string(k[8:])]
			delete(index, string(k[8:]))
			bytes -= e.size
			next(Record[K, Change[V]]{Key: key, Value: ch, Timestamp: time.UnixMilli(ts)})
			return t.err == nil
		}
		// evict emits the keys due (buffer time <= stream time - limit),
		// then, over a bound, the oldest until within (EmitEarlyWhenFull)
		// or fails (ShutDownWhenFull), as Kafka's enforceConstraints.
		evict := func() {
			expiry := t.streamTime - limit
			for minAt <= expiry || (over() && s.buffer.Full == EmitEarlyWhenFull) {
				// Collected first, emitted after: processors downstream
				// may write to the batch the scan reads.
				var due [][2][]byte
				dueBytes, dueN := int64(0), int64(0)
				minAt = math.MaxInt64
				err := st.scan(nil, nil, func(k, v []byte) bool {
					at := int64(binary.BigEndian.Uint64(k))
					overNow := (int64(len(index))-dueN > maxRecords || bytes-dueBytes > maxBytes) && s.buffer.Full == EmitEarlyWhenFull
					if at > expiry && !overNow {
						minAt = at
						return false
					}
					due = append(due, [2][]byte{append([]byte(nil), k...), append([]byte(nil), v...)})
					dueBytes += int64(len(k) + len(v))
					dueN++
					return len(due) < 1024
				})
				if err != nil {
					t.fail(fmt.Errorf("%s: evict: %w", storeName, err))
					return
				}
				if len(due) == 0 {
					break
				}
				for _, kv := range due {
					if !emit(kv[0], kv[1]) {
						return
					}
				}
				if len(due) < 1024 {
					break
				}
				minAt = -math.MaxInt64 // scan again: more may be due
			}
			if over() {
				t.fail(fmt.Errorf("%w: %s holds %d of %d records and %d of %d bytes", ErrBufferFull, name,
					len(index), s.buffer.MaxRecords, bytes, s.buffer.MaxBytes))
			}
		}
		return func(r Record[K, Change[V]]) {
			if !sync() {
				return
			}
			kb, err := ks.Serialize(st.changelog, r.Key)
			if err != nil {
				t.fail(fmt.Errorf("%s: key: %w", storeName, err))
				return
			}
			val := binary.BigEndian.AppendUint64(make([]byte, 0, 64), uint64(r.Timestamp.UnixMilli()))
			var flags byte
			var ob, nb []byte
			if r.Value.HasOld {
				if ob, err = vs.Serialize(st.changelog, r.Value.Old); err != nil {
					t.fail(fmt.Errorf("%s: old value: %w", storeName, err))
					return
				}
				flags |= 2
			}
			if r.Value.HasNew {
				if nb, err = vs.Serialize(st.changelog, r.Value.New); err != nil {
					t.fail(fmt.Errorf("%s: value: %w", storeName, err))
					return
				}
				flags |= 1
			}
			val = append(val, flags)
			if flags&2 != 0 {
				val = binary.BigEndian.AppendUint32(val, uint32(len(ob)))
				val = append(val, ob...)
			}
			val = append(val, nb...)
			// A key already buffered keeps its buffer time (Kafka's
			// non-resetting semantics); a new one is buffered at its
			// record's timestamp.
			e, ok := index[string(kb)]
			if !ok {
				e.at = r.Timestamp.UnixMilli()
			}
			key := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(kb)), uint64(e.at))
			key = append(key, kb...)
			st.put(key, val, r.Timestamp)
			bytes += int64(len(key)+len(val)) - e.size
			e.size = int64(len(key) + len(val))
			index[string(kb)] = e
			minAt = min(minAt, e.at)
			evict()
		}
	}
	return &Table[K, V]{b: b, n: n, key: ks, val: vs}
}
