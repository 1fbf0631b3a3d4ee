package streams

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Suppressed says what Suppress holds back: UntilWindowCloses (Kafka's
// Suppressed.untilWindowCloses(BufferConfig.unbounded())) or
// UntilTimeLimit (Kafka's Suppressed.untilTimeLimit, suppress_limit.go).
type Suppressed struct {
	untilWindowCloses bool
	untilTimeLimit    bool
	timeLimit         time.Duration // UntilTimeLimit
	buffer            BufferConfig  // UntilTimeLimit
}

// UntilWindowCloses emits only each window's final result: the last
// update of a window, once stream time has passed the time after which
// the window can no longer change (its end plus grace; for sessions
// plus the gap), and nothing for a window deleted (a session merged
// into another). The buffer is a store on disk, backed by a changelog,
// unbounded unless buf (at most one) bounds it, as Kafka's
// untilWindowCloses(StrictBufferConfig): its Full must be
// ShutDownWhenFull (a final result cannot be emitted early), and an
// update that takes the buffer past MaxRecords windows or MaxBytes bytes
// (its entries' keys and values) stops the application with
// ErrBufferFull.
func UntilWindowCloses(buf ...BufferConfig) Suppressed {
	s := Suppressed{untilWindowCloses: true}
	if len(buf) > 0 {
		s.buffer = buf[0]
	}
	if len(buf) > 1 {
		s.buffer.Full = -1 // a topology error at Build
	}
	return s
}

// Suppress holds back the updates of a windowed table as s says and
// forwards the rest, as Kafka's KTable.suppress (UntilTimeLimit: as
// SuppressTable). With UntilWindowCloses, the buffer is a store
// ("<name>-store", or generated) with a changelog, written in the same
// commit (the same transaction, exactly once) as the results emitted
// and the input offsets: after a crash the buffer comes back as it was
// at the last commit, so a window's final result is emitted once, and
// under exactly once a read_committed consumer sees it once.
//
// The buffer's key is the time at which a window becomes final (u64 big
// endian) followed by the windowed key's bytes, so that the windows due
// are the store's first keys; its value is the record timestamp (u64
// big endian) then the serialized new value. Stream time is the task's
// (the largest record timestamp it has seen).
func Suppress[K, A any](tbl *Table[Windowed[K], A], s Suppressed, opts ...Opt) *Table[Windowed[K], A] {
	if !s.untilWindowCloses {
		return suppressTimeLimit(tbl, s, opts)
	}
	b := tbl.b
	c := conf(opts)
	name := b.name("KTABLE-SUPPRESS", c.name)
	storeName := name + "-store"
	if c.name == "" {
		storeName = fmt.Sprintf("KTABLE-SUPPRESS-STATE-STORE-%010d", b.seq)
	}
	final := tbl.n.windowFinal
	if final == nil {
		b.errorf("%s: UntilWindowCloses needs the table of a windowed aggregation (WindowedCount, WindowedAggregate, SessionCount, ...)", name)
	}
	if s.buffer.Full != ShutDownWhenFull || s.buffer.MaxRecords < 0 || s.buffer.MaxBytes < 0 {
		b.errorf("%s: UntilWindowCloses(%+v): want one BufferConfig with bounds >= 0 (0: none) and Full ShutDownWhenFull (final results are never emitted early)", name, s.buffer)
	}
	bounded := s.buffer.MaxRecords > 0 || s.buffer.MaxBytes > 0
	maxRecords, maxBytes := s.buffer.MaxRecords, s.buffer.MaxBytes
	if maxRecords == 0 {
		maxRecords = math.MaxInt64
	}
	if maxBytes == 0 {
		maxBytes = math.MaxInt64
	}
	if tbl.key == nil || tbl.val == nil {
		b.errorf("%s: the buffer needs the table's key and value serdes", name)
	}
	n := b.add(kindProcessor, name, tbl.n)
	b.addStore(newStoreDef(storeName, Bytes, Bytes), n)
	wk, a := tbl.key, tbl.val
	n.inst = func(t *task) any {
		st := t.store(storeName)
		next := fanout[Windowed[K], Change[A]](t, n)
		// minDue is the earliest time a buffered window becomes final,
		// MaxInt64 when the buffer is empty, -1 until read from the
		// store (it may hold a restored buffer).
		// It is read again whenever the task's batch changed (a commit,
		// or an aborted transaction that brings evicted entries back).
		minDue := int64(-1)
		batch := t.batch
		// A bounded buffer counts its entries and their bytes, read from
		// the store at the first record and after every discard (a
		// restore, an aborted transaction).
		var count, bytes int64
		synced := -1
		sync := func() bool {
			if !bounded || synced == t.discards {
				return true
			}
			count, bytes = 0, 0
			if err := st.scan(nil, nil, func(k, v []byte) bool {
				count++
				bytes += int64(len(k) + len(v))
				return true
			}); err != nil {
				t.fail(fmt.Errorf("%s: read buffer: %w", storeName, err))
				return false
			}
			synced = t.discards
			return true
		}
		evict := func() {
			if t.batch != batch {
				minDue, batch = -1, t.batch
			}
			if minDue >= 0 && minDue > t.streamTime {
				return
			}
			minDue = math.MaxInt64
			// Collected first, forwarded after: processors downstream
			// may write to the batch the scan reads.
			var due [][2][]byte
			err := st.scan(nil, nil, func(k, v []byte) bool {
				if len(k) < 8 || len(v) < 8 {
					t.fail(fmt.Errorf("%s: buffered entry of %d+%d bytes", storeName, len(k), len(v)))
					return false
				}
				if at := int64(binary.BigEndian.Uint64(k)); at > t.streamTime {
					minDue = at
					return false
				}
				due = append(due, [2][]byte{append([]byte(nil), k...), append([]byte(nil), v...)})
				return true
			})
			if err != nil {
				t.fail(fmt.Errorf("%s: evict: %w", storeName, err))
				return
			}
			at := time.UnixMilli(t.streamTime)
			for _, kv := range due {
				k, v := kv[0], kv[1]
				w, err := wk.Deserialize(st.changelog, k[8:])
				if err != nil {
					t.fail(fmt.Errorf("%s: buffered key: %w", storeName, err))
					return
				}
				nv, err := a.Deserialize(st.changelog, v[8:])
				if err != nil {
					t.fail(fmt.Errorf("%s: buffered value: %w", storeName, err))
					return
				}
				st.delete(k, at)
				count, bytes = count-1, bytes-int64(len(k)+len(v))
				next(Record[Windowed[K], Change[A]]{Key: w, Value: Change[A]{New: nv, HasNew: true},
					Timestamp: time.UnixMilli(int64(binary.BigEndian.Uint64(v)))})
			}
		}
		return func(r Record[Windowed[K], Change[A]]) {
			if !sync() {
				return
			}
			kb, err := wk.Serialize(st.changelog, r.Key)
			if err != nil {
				t.fail(fmt.Errorf("%s: key: %w", storeName, err))
				return
			}
			at := final(r.Key.Window.End.UnixMilli())
			key := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(kb)), uint64(at))
			key = append(key, kb...)
			if !r.Value.HasNew {
				// A deleted window (a session merged into another) has no
				// final result: drop what was buffered for it.
				if ov, ok, err := st.get(key); err != nil {
					t.fail(err)
					return
				} else if ok {
					st.delete(key, r.Timestamp)
					count, bytes = count-1, bytes-int64(len(key)+len(ov))
				}
			} else {
				vb, err := a.Serialize(st.changelog, r.Value.New)
				if err != nil {
					t.fail(fmt.Errorf("%s: value: %w", storeName, err))
					return
				}
				if bounded {
					if ov, ok, err := st.get(key); err != nil {
						t.fail(err)
						return
					} else if ok {
						count, bytes = count-1, bytes-int64(len(key)+len(ov))
					}
					count, bytes = count+1, bytes+int64(len(key)+8+len(vb))
				}
				st.put(key, append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(vb)), uint64(r.Timestamp.UnixMilli())), vb...), r.Timestamp)
				if minDue >= 0 && t.batch == batch {
					minDue = min(minDue, at)
				}
			}
			evict()
			if bounded && (count > maxRecords || bytes > maxBytes) && t.err == nil {
				t.fail(fmt.Errorf("%w: %s holds %d of %d windows and %d of %d bytes", ErrBufferFull, name,
					count, s.buffer.MaxRecords, bytes, s.buffer.MaxBytes))
			}
		}
	}
	return &Table[Windowed[K], A]{b: b, n: n, key: wk, val: a}
}
