package streams

import (
	"fmt"
)

// tableGetter returns, for task t, the function that reads tbl's current
// value of a key (Kafka's KTableValueGetter): its store, or for a table
// that is not materialized (a join's result) the computation over the
// stores it is made of.
func tableGetter[K, V any](tbl *Table[K, V]) func(t *task) func(K) (V, bool, error) {
	if tbl.lookup != nil {
		return tbl.lookup
	}
	return func(t *task) func(K) (V, bool, error) {
		st := t.store(tbl.store)
		return func(key K) (V, bool, error) {
			var zero V
			kb, err := tbl.key.Serialize(st.changelog, key)
			if err != nil {
				return zero, false, fmt.Errorf("%s: key: %w", tbl.store, err)
			}
			vb, ok, err := st.get(kb)
			if err != nil || !ok {
				return zero, false, err
			}
			v, err := tbl.val.Deserialize(st.changelog, vb)
			if err != nil {
				return zero, false, fmt.Errorf("%s: stored value: %w", tbl.store, err)
			}
			return v, true, nil
		}
	}
}

// lookupEdge makes tbl's node a parent of n without sending n its
// updates: a stub child of the table, which ignores what it receives,
// links the two in one subtopology (so that tbl's store is in n's
// tasks), as Kafka connects a processor to the stores it reads.
func lookupEdge[K, V any](tbl *Table[K, V], kind string) *node {
	stub := tbl.b.add(kindProcessor, tbl.b.name(kind, ""), tbl.n)
	stub.inst = func(*task) any { return func(Record[K, Change[V]]) {} }
	return stub
}

// JoinWithTable is Kafka's KStream#join(KTable, joiner): each record of
// s is joined with tbl's current value of its key, and dropped when tbl
// has none. Updates of tbl emit nothing; they are what later records of
// s see. s and tbl must be co-partitioned (Start checks); a stream
// whose key may have changed is repartitioned first.
func JoinWithTable[K, V, VT, VR any](s *Stream[K, V], tbl *Table[K, VT], joiner func(k K, v V, tv VT) VR, opts ...Opt) *Stream[K, VR] {
	return streamTableJoin(s, tbl, false, "KSTREAM-JOIN", func(k K, v V, tv VT, _ bool) VR { return joiner(k, v, tv) }, opts)
}

// LeftJoinWithTable is Kafka's KStream#leftJoin(KTable, joiner): as
// JoinWithTable, but a record whose key tbl lacks is joined with
// (zero, false).
func LeftJoinWithTable[K, V, VT, VR any](s *Stream[K, V], tbl *Table[K, VT], joiner func(k K, v V, tv VT, found bool) VR, opts ...Opt) *Stream[K, VR] {
	return streamTableJoin(s, tbl, true, "KSTREAM-LEFTJOIN", joiner, opts)
}

func streamTableJoin[K, V, VT, VR any](s *Stream[K, V], tbl *Table[K, VT], left bool, kind string, joiner func(K, V, VT, bool) VR, opts []Opt) *Stream[K, VR] {
	b := s.b
	c := conf(opts)
	name := b.name(kind, c.name)
	if tbl.b != b {
		b.errorf("%s: the stream and the table come from different builders", name)
	}
	k := s.key
	if k == nil {
		k = tbl.key
	}
	outK, outV := serdesOf[K, VR](b, c, kind, k, nil)
	if s.repartition {
		if k == nil || s.val == nil {
			b.errorf("%s: the stream's key may have changed (map, flatMap, selectKey), so it is repartitioned through <app>-%s-repartition, which needs its key and value serdes", name, name)
		} else {
			s = repartitioned(s, name, k, s.val)
		}
	}
	stub := lookupEdge(tbl, "KTABLE-VALUEGETTER")
	n := b.add(kindProcessor, name, s.n, stub)
	copartition(b, name, s.n, tbl.n)
	getter := tableGetter(tbl)
	n.inst = func(t *task) any {
		get := getter(t)
		next := fanout[K, VR](t, n)
		return func(r Record[K, V]) {
			tv, found, err := get(r.Key)
			if err != nil {
				t.fail(fmt.Errorf("%s: %w", name, err))
				return
			}
			if !found && !left {
				return
			}
			next(Record[K, VR]{Key: r.Key, Value: joiner(r.Key, r.Value, tv, found), Timestamp: r.Timestamp, Headers: r.Headers})
		}
	}
	return &Stream[K, VR]{b: b, n: n, key: outK, val: outV}
}

// JoinWithGlobalTable is Kafka's KStream#join(GlobalKTable, keySelector,
// joiner): each record of s looks up g by the key keyOf computes, in the
// instance's copy of the whole topic; records without a match are
// dropped. No co-partitioning is needed.
func JoinWithGlobalTable[K, V, KG, VG, VR any](s *Stream[K, V], g *GlobalTable[KG, VG], keyOf func(K, V) KG, joiner func(k K, v V, gv VG) VR, opts ...Opt) *Stream[K, VR] {
	return globalJoin(s, g, keyOf, false, "KSTREAM-JOIN", func(k K, v V, gv VG, _ bool) VR { return joiner(k, v, gv) }, opts)
}

// LeftJoinWithGlobalTable is Kafka's KStream#leftJoin(GlobalKTable, ...):
// records without a match are joined with (zero, false).
func LeftJoinWithGlobalTable[K, V, KG, VG, VR any](s *Stream[K, V], g *GlobalTable[KG, VG], keyOf func(K, V) KG, joiner func(k K, v V, gv VG, found bool) VR, opts ...Opt) *Stream[K, VR] {
	return globalJoin(s, g, keyOf, true, "KSTREAM-LEFTJOIN", joiner, opts)
}

func globalJoin[K, V, KG, VG, VR any](s *Stream[K, V], g *GlobalTable[KG, VG], keyOf func(K, V) KG, left bool, kind string, joiner func(K, V, VG, bool) VR, opts []Opt) *Stream[K, VR] {
	c := conf(opts)
	n, out := derive[K, V, K, VR](s, kind, c, nil)
	out.key, out.val = serdesOf[K, VR](s.b, c, kind, s.key, nil)
	out.repartition = s.repartition
	n.inst = func(t *task) any {
		next := fanout[K, VR](t, n)
		topic := ""
		for _, gd := range t.app.topo.globals {
			if gd.store.name == g.store {
				topic = gd.topic
			}
		}
		return func(r Record[K, V]) {
			var gv VG
			gk := keyOf(r.Key, r.Value)
			kb, err := g.key.Serialize(topic, gk)
			if err != nil {
				t.fail(fmt.Errorf("%s: global key: %w", n.name, err))
				return
			}
			vb, found, err := get(t.app.global.db.db, g.store, kb)
			if err != nil {
				t.fail(fmt.Errorf("%s: %w", n.name, err))
				return
			}
			if found {
				if gv, err = g.val.Deserialize(topic, vb); err != nil {
					t.fail(fmt.Errorf("%s: global value: %w", n.name, err))
					return
				}
			}
			if !found && !left {
				return
			}
			next(Record[K, VR]{Key: r.Key, Value: joiner(r.Key, r.Value, gv, found), Timestamp: r.Timestamp, Headers: r.Headers})
		}
	}
	return out
}

// JoinTables is Kafka's KTable#join(KTable, joiner): a table holding
// joiner(k, lv, rv) for each key both tables hold. An update of either
// side is joined with the other's current value and forwarded as a
// Change whose old value is the join of the side's old value (so a
// downstream aggregation can subtract it). The result is not
// materialized: reading it (another join downstream) reads both stores.
func JoinTables[K, V1, V2, VR any](l *Table[K, V1], r *Table[K, V2], joiner func(k K, lv V1, rv V2) VR, opts ...Opt) *Table[K, VR] {
	return tableJoin(l, r, false, false, "KTABLE-JOIN", func(k K, lv V1, _ bool, rv V2, _ bool) VR { return joiner(k, lv, rv) }, opts)
}

// LeftJoinTables is Kafka's KTable#leftJoin(KTable, joiner): a row for
// each key of l, joined with r's value or (zero, false).
func LeftJoinTables[K, V1, V2, VR any](l *Table[K, V1], r *Table[K, V2], joiner func(k K, lv V1, rv V2, hasRight bool) VR, opts ...Opt) *Table[K, VR] {
	return tableJoin(l, r, true, false, "KTABLE-LEFTJOIN", func(k K, lv V1, _ bool, rv V2, hasR bool) VR { return joiner(k, lv, rv, hasR) }, opts)
}

// OuterJoinTables is Kafka's KTable#outerJoin(KTable, joiner): a row for
// each key of either table.
func OuterJoinTables[K, V1, V2, VR any](l *Table[K, V1], r *Table[K, V2], joiner func(k K, lv V1, hasLeft bool, rv V2, hasRight bool) VR, opts ...Opt) *Table[K, VR] {
	return tableJoin(l, r, true, true, "KTABLE-OUTERJOIN", joiner, opts)
}

// tableJoin builds the two processors of a table-table join, each
// joining its side's updates with the other side's value getter, as
// KTableKTableInnerJoin, -LeftJoin, -RightJoin and -OuterJoin do: a row
// exists when the left value does (left joins), either does (outer), or
// both do (inner); an update whose old and new rows both do not exist
// forwards nothing.
func tableJoin[K, V1, V2, VR any](l *Table[K, V1], r *Table[K, V2], leftOuter, rightOuter bool, kind string, joiner func(K, V1, bool, V2, bool) VR, opts []Opt) *Table[K, VR] {
	b := l.b
	c := conf(opts)
	names := joinNames(b, kind, c.name, "-this-join", "-other-join", "-merge")
	if r.b != b {
		b.errorf("%s: the two tables come from different builders", names[2])
	}
	outK, outV := serdesOf[K, VR](b, c, kind, l.key, nil)
	// exists says whether the joined row exists for the two sides'
	// presence.
	exists := func(hasL, hasR bool) bool {
		switch {
		case rightOuter:
			return hasL || hasR
		case leftOuter:
			return hasL
		}
		return hasL && hasR
	}
	getL, getR := tableGetter(l), tableGetter(r)
	thisN := b.add(kindProcessor, names[0], l.n, lookupEdge(r, "KTABLE-VALUEGETTER"))
	otherN := b.add(kindProcessor, names[1], r.n, lookupEdge(l, "KTABLE-VALUEGETTER"))
	merge := b.add(kindProcessor, names[2], thisN, otherN)
	copartition(b, names[2], l.n, r.n)
	merge.inst = func(t *task) any { return fanout[K, Change[VR]](t, merge) }
	// change computes the forwarded Change of an update of one side:
	// the rows before and after, the other side's value unchanged.
	change := func(key K, lOld, lNew V1, hasLOld, hasLNew bool, rOld, rNew V2, hasROld, hasRNew bool) (Change[VR], bool) {
		var ch Change[VR]
		if exists(hasLNew, hasRNew) {
			ch.New, ch.HasNew = joiner(key, lNew, hasLNew, rNew, hasRNew), true
		}
		if exists(hasLOld, hasROld) {
			ch.Old, ch.HasOld = joiner(key, lOld, hasLOld, rOld, hasROld), true
		}
		return ch, ch.HasNew || ch.HasOld
	}
	thisN.inst = func(t *task) any {
		get := getR(t)
		next := fanout[K, Change[VR]](t, thisN)
		return func(rec Record[K, Change[V1]]) {
			rv, hasR, err := get(rec.Key)
			if err != nil {
				t.fail(fmt.Errorf("%s: %w", names[0], err))
				return
			}
			u := rec.Value
			if ch, ok := change(rec.Key, u.Old, u.New, u.HasOld, u.HasNew, rv, rv, hasR, hasR); ok {
				next(Record[K, Change[VR]]{Key: rec.Key, Value: ch, Timestamp: rec.Timestamp, Headers: rec.Headers})
			}
		}
	}
	otherN.inst = func(t *task) any {
		get := getL(t)
		next := fanout[K, Change[VR]](t, otherN)
		return func(rec Record[K, Change[V2]]) {
			lv, hasL, err := get(rec.Key)
			if err != nil {
				t.fail(fmt.Errorf("%s: %w", names[1], err))
				return
			}
			u := rec.Value
			if ch, ok := change(rec.Key, lv, lv, hasL, hasL, u.Old, u.New, u.HasOld, u.HasNew); ok {
				next(Record[K, Change[VR]]{Key: rec.Key, Value: ch, Timestamp: rec.Timestamp, Headers: rec.Headers})
			}
		}
	}
	out := &Table[K, VR]{b: b, n: merge, key: outK, val: outV}
	out.lookup = func(t *task) func(K) (VR, bool, error) {
		gl, gr := getL(t), getR(t)
		return func(key K) (VR, bool, error) {
			var zero VR
			lv, hasL, err := gl(key)
			if err != nil {
				return zero, false, err
			}
			rv, hasR, err := gr(key)
			if err != nil {
				return zero, false, err
			}
			if !exists(hasL, hasR) {
				return zero, false, nil
			}
			return joiner(key, lv, hasL, rv, hasR), true, nil
		}
	}
	return out
}
