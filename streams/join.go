package streams

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// JoinWindows are Kafka's JoinWindows: a record of the left stream at
// time t joins the right stream's records of the same key with
// timestamps in [t-Before, t+After] (a right record at t joins left ones
// in [t-After, t+Before]). Grace is how long after a window's end
// (stream time) records out of order are still joined; it also delays
// the unmatched results of left and outer joins, emitted only once the
// window has closed (Kafka 3.1+, KIP-633 and the spurious-result fix of
// KAFKA-10847). Before or After may be negative as long as Before+After
// is not.
type JoinWindows struct {
	Before, After time.Duration
	Grace         time.Duration
}

// JoinTimeDifference is Kafka's JoinWindows.ofTimeDifferenceAndGrace:
// Before = After = d.
func JoinTimeDifference(d, grace time.Duration) JoinWindows {
	return JoinWindows{Before: d, After: d, Grace: grace}
}

func (w JoinWindows) valid() bool {
	whole := func(d time.Duration) bool { return d%time.Millisecond == 0 }
	return w.Before+w.After >= 0 && w.Grace >= 0 && whole(w.Before) && whole(w.After) && whole(w.Grace)
}

// retentionMs is how long a side's window store keeps a record after
// stream time passed it: the windows' size plus grace, as Kafka sizes
// the join stores (KStreamImplJoin: size() + gracePeriodMs()).
func (w JoinWindows) retentionMs() int64 {
	return (w.Before + w.After + w.Grace).Milliseconds()
}

// Join is Kafka's KStream#join(KStream, joiner, JoinWindows): for each
// pair of records of l and r with equal keys whose timestamps are within
// w, joiner's result, timestamped with the later of the two. Both sides
// are buffered in window stores backed by changelogs
// ("<app>-<store>-changelog"), named from opts (Named: "<name>-this-join-store",
// "<name>-other-join-store") or generated. The two streams must be
// co-partitioned (Start checks); one whose key may have changed is
// repartitioned first. KeySerde and ValueSerde in opts are the result's.
func Join[K, V1, V2, VR any](l *Stream[K, V1], r *Stream[K, V2], w JoinWindows, joiner func(k K, lv V1, rv V2) VR, opts ...Opt) *Stream[K, VR] {
	return streamJoin(l, r, w, false, false, "KSTREAM-JOIN", func(k K, lv V1, _ bool, rv V2, _ bool) VR { return joiner(k, lv, rv) }, opts)
}

// LeftJoin is Kafka's KStream#leftJoin(KStream, ...): Join's results,
// plus joiner(k, lv, zero, false) for each left record that no right
// record joined, emitted once its window closed (stream time past its
// timestamp + After + Grace), timestamped with the left record's.
func LeftJoin[K, V1, V2, VR any](l *Stream[K, V1], r *Stream[K, V2], w JoinWindows, joiner func(k K, lv V1, rv V2, hasRight bool) VR, opts ...Opt) *Stream[K, VR] {
	return streamJoin(l, r, w, true, false, "KSTREAM-LEFTJOIN", func(k K, lv V1, _ bool, rv V2, hasR bool) VR { return joiner(k, lv, rv, hasR) }, opts)
}

// OuterJoin is Kafka's KStream#outerJoin(KStream, ...): LeftJoin's
// results, plus the right records that no left record joined, each
// emitted once its own window closed (stream time past its timestamp +
// Before + Grace).
func OuterJoin[K, V1, V2, VR any](l *Stream[K, V1], r *Stream[K, V2], w JoinWindows, joiner func(k K, lv V1, hasLeft bool, rv V2, hasRight bool) VR, opts ...Opt) *Stream[K, VR] {
	return streamJoin(l, r, w, true, true, "KSTREAM-OUTERJOIN", joiner, opts)
}

// joinNames returns the processor and store names of a join: Kafka's
// suffixes on a user's name, generated names otherwise.
func joinNames(b *Builder, kind, user string, suffixes ...string) []string {
	out := make([]string, len(suffixes))
	for i, s := range suffixes {
		if user != "" {
			out[i] = b.name("", user+s)
		} else {
			out[i] = b.name(kind+s, "")
		}
	}
	return out
}

// joinInputs checks that two inputs of a join come from one builder and
// repartitions those whose key may have changed, so that equal keys of
// both sides meet in one task.
func joinInputs[K, V1, V2 any](l *Stream[K, V1], r *Stream[K, V2], k Serde[K], name string) (*Stream[K, V1], *Stream[K, V2]) {
	b := l.b
	if r.b != b {
		b.errorf("%s: the two streams come from different builders", name)
		return l, r
	}
	if l.repartition && k != nil && l.val != nil {
		l = repartitioned(l, name+"-left", k, l.val)
	} else if l.repartition {
		b.errorf("%s: the left stream's key may have changed (map, flatMap, selectKey), so it is repartitioned through <app>-%s-left-repartition, which needs its key and value serdes", name, name)
	}
	if r.repartition && k != nil && r.val != nil {
		r = repartitioned(r, name+"-right", k, r.val)
	} else if r.repartition {
		b.errorf("%s: the right stream's key may have changed (map, flatMap, selectKey), so it is repartitioned through <app>-%s-right-repartition, which needs its key and value serdes", name, name)
	}
	return l, r
}

func streamJoin[K, V1, V2, VR any](l *Stream[K, V1], r *Stream[K, V2], w JoinWindows, leftOuter, rightOuter bool, kind string, joiner func(K, V1, bool, V2, bool) VR, opts []Opt) *Stream[K, VR] {
	b := l.b
	c := conf(opts)
	k := l.key
	if k == nil {
		k = r.key
	}
	outK, outV := serdesOf[K, VR](b, c, kind, k, nil)
	names := joinNames(b, kind, c.name, "-this-join", "-other-join", "-merge")
	thisName, otherName, mergeName := names[0], names[1], names[2]
	if !w.valid() {
		b.errorf("%s: join windows %+v: want Before+After >= 0, Grace >= 0, whole milliseconds", mergeName, w)
	}
	if k == nil || l.val == nil || r.val == nil {
		b.errorf("%s: the join's window stores need the key serde and both value serdes (give them with KeySerde/ValueSerde to the operations that made the streams)", mergeName)
	}
	l, r = joinInputs(l, r, k, mergeName)
	lv, rv := l.val, r.val

	thisStore, otherStore, outerStore := thisName+"-store", otherName+"-store", ""
	thisN := b.add(kindProcessor, thisName, l.n)
	otherN := b.add(kindProcessor, otherName, r.n)
	merge := b.add(kindProcessor, mergeName, thisN, otherN)
	b.addStore(newStoreDef(thisStore, k, lv), thisN)
	b.addStore(newStoreDef(otherStore, k, rv), otherN)
	if leftOuter {
		outerStore = mergeName + "-outer-shared-join-store"
		b.addStore(newStoreDef(outerStore, k, Bytes), merge)
	}
	copartition(b, mergeName, l.n, r.n)

	// One state per task, shared by the two sides: the stream time of
	// the join (Kafka's shared TimeTracker) and the stores.
	state := &node{name: mergeName + "-state"}
	state.inst = func(t *task) any {
		js := &joinState{w: w, this: joinSide{st: t.store(thisStore)}, other: joinSide{st: t.store(otherStore)}}
		if outerStore != "" {
			js.outer = t.store(outerStore)
		}
		return js
	}
	merge.inst = func(t *task) any { return fanout[K, VR](t, merge) }
	var zl V1
	var zr V2
	thisN.inst = func(t *task) any {
		js := t.instance(state).(*joinState)
		next := fanout[K, VR](t, thisN)
		emitHeld := heldEmitter(t, js, k, lv, rv, joiner, next)
		return func(rec Record[K, V1]) {
			ks, vs, ok := joinBytes(t, js, k, lv, rec.Key, rec.Value)
			if !ok {
				return
			}
			js.process(t, sideLeft, ks, vs, rec.Timestamp.UnixMilli(), leftOuter, emitHeld,
				func(ob []byte, ots int64) {
					o, err := rv.Deserialize(js.other.st.changelog, ob)
					if err != nil {
						t.fail(fmt.Errorf("%s: stored value: %w", otherStore, err))
						return
					}
					next(Record[K, VR]{Key: rec.Key, Value: joiner(rec.Key, rec.Value, true, o, true), Timestamp: time.UnixMilli(max(rec.Timestamp.UnixMilli(), ots)), Headers: rec.Headers})
				},
				func() {
					next(Record[K, VR]{Key: rec.Key, Value: joiner(rec.Key, rec.Value, true, zr, false), Timestamp: rec.Timestamp, Headers: rec.Headers})
				})
		}
	}
	otherN.inst = func(t *task) any {
		js := t.instance(state).(*joinState)
		next := fanout[K, VR](t, otherN)
		emitHeld := heldEmitter(t, js, k, lv, rv, joiner, next)
		return func(rec Record[K, V2]) {
			ks, vs, ok := joinBytes(t, js, k, rv, rec.Key, rec.Value)
			if !ok {
				return
			}
			js.process(t, sideRight, ks, vs, rec.Timestamp.UnixMilli(), rightOuter, emitHeld,
				func(ob []byte, ots int64) {
					o, err := lv.Deserialize(js.this.st.changelog, ob)
					if err != nil {
						t.fail(fmt.Errorf("%s: stored value: %w", thisStore, err))
						return
					}
					next(Record[K, VR]{Key: rec.Key, Value: joiner(rec.Key, o, true, rec.Value, true), Timestamp: time.UnixMilli(max(rec.Timestamp.UnixMilli(), ots)), Headers: rec.Headers})
				},
				func() {
					next(Record[K, VR]{Key: rec.Key, Value: joiner(rec.Key, zl, false, rec.Value, true), Timestamp: rec.Timestamp, Headers: rec.Headers})
				})
		}
	}
	return &Stream[K, VR]{b: b, n: merge, key: outK, val: outV}
}

// joinBytes serializes a record's key and value for the stores.
func joinBytes[K, V any](t *task, js *joinState, k Serde[K], v Serde[V], key K, val V) ([]byte, []byte, bool) {
	ks, err := k.Serialize(js.this.st.changelog, key)
	if err != nil {
		t.fail(fmt.Errorf("join key: %w", err))
		return nil, nil, false
	}
	vs, err := v.Serialize(js.this.st.changelog, val)
	if err != nil {
		t.fail(fmt.Errorf("join value: %w", err))
		return nil, nil, false
	}
	return ks, vs, true
}

// heldEmitter returns the function that forwards an unmatched record
// taken from the outer store once its window closed: joiner with the
// other side missing, timestamped with the held record's time.
func heldEmitter[K, V1, V2, VR any](t *task, js *joinState, k Serde[K], lv Serde[V1], rv Serde[V2], joiner func(K, V1, bool, V2, bool) VR, next func(Record[K, VR])) func(side byte, kb, vb []byte, ts int64) {
	if js.outer == nil {
		return nil
	}
	topic := js.outer.changelog
	return func(side byte, kb, vb []byte, ts int64) {
		key, err := k.Deserialize(topic, kb)
		if err != nil {
			t.fail(fmt.Errorf("%s: stored key: %w", js.outer.name, err))
			return
		}
		var out VR
		if side == sideLeft {
			v, err := lv.Deserialize(topic, vb)
			if err != nil {
				t.fail(fmt.Errorf("%s: stored value: %w", js.outer.name, err))
				return
			}
			var zr V2
			out = joiner(key, v, true, zr, false)
		} else {
			v, err := rv.Deserialize(topic, vb)
			if err != nil {
				t.fail(fmt.Errorf("%s: stored value: %w", js.outer.name, err))
				return
			}
			var zl V1
			out = joiner(key, zl, false, v, true)
		}
		next(Record[K, VR]{Key: key, Value: out, Timestamp: time.UnixMilli(ts)})
	}
}

const (
	sideLeft  byte = 0
	sideRight byte = 1
)

// joinState is one task's state of a stream-stream join, shared by its
// two sides, untyped (store bytes).
//
// A side's window store holds every record of the retention period:
//
//	key:   key bytes | timestamp u64 BE | seq u32 BE  -> value bytes
//
// Kafka's WindowKeySchema layout with duplicates retained (the sequence
// number tells records of one key and timestamp apart). The outer store
// of left and outer joins holds the records no other record has joined
// yet, in time order, until their window closes:
//
//	key:   timestamp u64 BE | side (0 left, 1 right) | key bytes | seq u32 BE  -> value bytes
//
// Kafka's TimestampedKeyAndJoinSide order.
type joinState struct {
	w           JoinWindows
	this, other joinSide
	outer       *taskStore

	// loaded is false until the state is read from the stores, and again
	// after the task dropped its pending writes (an aborted transaction):
	// the in-memory times may be ahead of the stores then.
	loaded   bool
	discards int
	// streamTime is the largest timestamp either side has seen (Kafka's
	// shared TimeTracker): it closes windows. -1 before any.
	streamTime int64
	// minHeld is the smallest timestamp in the outer store (MaxInt64:
	// empty): below it nothing can be due.
	minHeld int64
}

// joinSide is one side's window store.
type joinSide struct {
	st *taskStore
	// observed is the largest timestamp put into the store (Kafka's
	// observedStreamTime of a window store): records at or before
	// observed - retention are expired.
	observed  int64
	seq       uint32
	purgedTo  int64 // everything at or before it was deleted
	retention int64
}

func (js *joinState) load(t *task) {
	js.loaded, js.discards = true, t.discards
	js.streamTime = -1
	js.minHeld = math.MaxInt64
	ret := js.w.retentionMs()
	for _, s := range []*joinSide{&js.this, &js.other} {
		s.observed, s.retention, s.purgedTo = -1, ret, -1
		err := rangeStore(t.batch, s.st.name, func(k, _ []byte) bool {
			if len(k) >= 12 {
				s.observed = max(s.observed, int64(binary.BigEndian.Uint64(k[len(k)-12:])))
			}
			return true
		})
		if err != nil {
			t.fail(err)
		}
		js.streamTime = max(js.streamTime, s.observed)
	}
	if js.outer != nil {
		err := rangeStore(t.batch, js.outer.name, func(k, _ []byte) bool {
			if len(k) >= 8 {
				js.minHeld = int64(binary.BigEndian.Uint64(k))
			}
			return false
		})
		if err != nil {
			t.fail(err)
		}
	}
}

func (js *joinState) side(s byte) (this, other *joinSide) {
	if s == sideLeft {
		return &js.this, &js.other
	}
	return &js.other, &js.this
}

// process is KStreamKStreamJoin's processing of one record of side s:
// advance stream time; when the record is in order, emit the unmatched
// records whose windows closed; join the other side's records in the
// window (releasing them from the outer store); an unmatched record of
// an outer side is emitted at once if its window already closed, held
// otherwise; finally the record enters its own window store (Kafka's
// KStreamJoinWindow forwards before it puts).
func (js *joinState) process(t *task, s byte, kb, vb []byte, ts int64, outer bool, emitHeld func(byte, []byte, []byte, int64), onMatch func(ob []byte, ots int64), onUnmatched func()) {
	if !js.loaded || js.discards != t.discards {
		js.load(t)
	}
	js.streamTime = max(js.streamTime, ts)
	if js.outer != nil && ts == js.streamTime {
		js.emitClosed(t, emitHeld)
	}
	before, after := js.w.Before.Milliseconds(), js.w.After.Milliseconds()
	if s == sideRight {
		before, after = after, before
	}
	from, to := max(0, ts-before), max(0, ts+after)
	this, other := js.side(s)
	matches, err := other.fetch(t, kb, from, to)
	if err != nil {
		t.fail(err)
		return
	}
	for _, m := range matches {
		if js.outer != nil {
			js.release(t, 1-s, kb, m.ts)
		}
		onMatch(m.value, m.ts)
	}
	if len(matches) == 0 && outer {
		// Kafka's condition (KStreamKStreamJoin): a record whose window
		// ended before stream time cannot be joined by a later record of
		// the other side that is in order, so it is not held.
		if js.outer == nil || to < js.streamTime {
			onUnmatched()
		} else {
			js.hold(t, s, kb, vb, ts)
		}
	}
	this.put(t, kb, vb, ts)
}

type windowed struct {
	ts    int64
	value []byte
}

// fetch returns the records of key kb with timestamps in [from, to] that
// the store still retains, in time order.
func (s *joinSide) fetch(t *task, kb []byte, from, to int64) ([]windowed, error) {
	from = max(from, s.observed-s.retention+1)
	if to < from {
		return nil, nil
	}
	lo := dataKey(s.st.name, binary.BigEndian.AppendUint64(append([]byte(nil), kb...), uint64(from)))
	hi := dataKey(s.st.name, binary.BigEndian.AppendUint64(append([]byte(nil), kb...), uint64(to+1)))
	it, err := t.batch.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	want := len(dataKey(s.st.name, kb)) + 12
	var out []windowed
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		// A longer key that starts with kb's bytes sorts in the range
		// too (Kafka's WindowKeySchema filters the same way).
		if len(k) != want {
			continue
		}
		out = append(out, windowed{ts: int64(binary.BigEndian.Uint64(k[want-12:])), value: append([]byte(nil), it.Value()...)})
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return nil, err
	}
	return out, it.Close()
}

// put stores a record in the side's window store unless it is already
// expired (InMemoryWindowStore's rule: at or before observed stream time
// minus retention), and now and then deletes the expired records,
// logging their deletion so that the compacted changelog forgets them.
func (s *joinSide) put(t *task, kb, vb []byte, ts int64) {
	s.observed = max(s.observed, ts)
	if ts <= s.observed-s.retention {
		t.dropped.Add(1)
		return
	}
	key := binary.BigEndian.AppendUint64(append([]byte(nil), kb...), uint64(ts))
	n := len(key)
	for {
		key = binary.BigEndian.AppendUint32(key[:n], s.seq)
		s.seq++
		_, found, err := s.st.get(key)
		if err != nil {
			t.fail(err)
			return
		}
		if !found {
			break
		}
	}
	s.st.put(key, vb, time.UnixMilli(ts))
	// Kafka drops a segment at a time (segment interval: half the
	// retention, at least a minute); deleting on the same rhythm keeps
	// the cost of the scan per record small.
	expired := s.observed - s.retention
	if expired-s.purgedTo >= max(s.retention/2, 60_000) {
		s.purge(t, expired)
	}
}

func (s *joinSide) purge(t *task, upTo int64) {
	var dead [][]byte
	err := rangeStore(t.batch, s.st.name, func(k, _ []byte) bool {
		if len(k) >= 12 && int64(binary.BigEndian.Uint64(k[len(k)-12:])) <= upTo {
			dead = append(dead, append([]byte(nil), k...))
		}
		return true
	})
	if err != nil {
		t.fail(err)
		return
	}
	for _, k := range dead {
		s.st.delete(k, time.UnixMilli(upTo))
	}
	s.purgedTo = upTo
}

// hold puts an unmatched record in the outer store.
func (js *joinState) hold(t *task, s byte, kb, vb []byte, ts int64) {
	key := outerKey(ts, s, kb)
	n := len(key)
	for seq := uint32(0); ; seq++ {
		key = binary.BigEndian.AppendUint32(key[:n], seq)
		_, found, err := js.outer.get(key)
		if err != nil {
			t.fail(err)
			return
		}
		if !found {
			break
		}
	}
	js.outer.put(key, vb, time.UnixMilli(ts))
	js.minHeld = min(js.minHeld, ts)
}

func outerKey(ts int64, s byte, kb []byte) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 13+len(kb)), uint64(ts))
	return append(append(k, s), kb...)
}

// release deletes the held records of side s, key kb and time ts: a
// record of the other side joined them, so they are not unmatched.
func (js *joinState) release(t *task, s byte, kb []byte, ts int64) {
	p := outerKey(ts, s, kb)
	var dead [][]byte
	err := rangePrefix(t.batch, js.outer.name, p, func(k, _ []byte) bool {
		if len(k) == len(p)+4 {
			dead = append(dead, append([]byte(nil), k...))
		}
		return true
	})
	if err != nil {
		t.fail(err)
		return
	}
	for _, k := range dead {
		js.outer.delete(k, time.UnixMilli(ts))
	}
}

// emitClosed emits and deletes the held records whose window closed: a
// left record's when stream time passes its time + After + Grace, a
// right record's at its time + Before + Grace, in the store's order
// (time, side, key). Kafka throttles this scan to once a second of wall
// time; here it runs on every in-order record that could find one due,
// so results do not depend on the wall clock.
func (js *joinState) emitClosed(t *task, emit func(byte, []byte, []byte, int64)) {
	before, after, grace := js.w.Before.Milliseconds(), js.w.After.Milliseconds(), js.w.Grace.Milliseconds()
	if js.minHeld == math.MaxInt64 || js.minHeld+min(before, after)+grace >= js.streamTime {
		return
	}
	type held struct {
		key  []byte
		side byte
		kb   []byte
		vb   []byte
		ts   int64
	}
	var due []held
	minHeld := int64(math.MaxInt64)
	leftOpen, rightOpen := false, false
	err := rangeStore(t.batch, js.outer.name, func(k, v []byte) bool {
		if len(k) < 13 {
			return true
		}
		ts, s := int64(binary.BigEndian.Uint64(k)), k[8]
		lookback := after
		if s == sideRight {
			lookback = before
		}
		if ts+lookback+grace >= js.streamTime {
			minHeld = min(minHeld, ts)
			if s == sideLeft {
				leftOpen = true
			} else {
				rightOpen = true
			}
			return !(leftOpen && rightOpen)
		}
		due = append(due, held{key: append([]byte(nil), k...), side: s, kb: append([]byte(nil), k[9:len(k)-4]...), vb: append([]byte(nil), v...), ts: ts})
		return true
	})
	if err != nil {
		t.fail(err)
		return
	}
	js.minHeld = minHeld
	for _, h := range due {
		js.outer.delete(h.key, time.UnixMilli(h.ts))
		emit(h.side, h.kb, h.vb, h.ts)
	}
}

// rangePrefix calls fn for the keys of store that start with p.
func rangePrefix(r pebble.Reader, store string, p []byte, fn func(k, v []byte) bool) error {
	sp := storePrefix(prefixData, store)
	lo := append(append([]byte(nil), sp...), p...)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if !fn(it.Key()[len(sp):], it.Value()) {
			break
		}
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return err
	}
	return it.Close()
}
