package streams

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Foreign-key table-table joins (KIP-213): each row of the left table
// names a row of the right table by a key extracted from its value, and
// the two tables need not be co-partitioned. As in Kafka Streams, the
// left row subscribes to the right key through an internal topic
// partitioned like the right table, and the answers travel back through
// a second topic to the left row's own partition:
//
//	left task (table L)                      right task (table R)
//	  L update --subscribe(fk, pk, hash)-->    subscription store (fk|pk)
//	           <-response(pk, hash, R[fk])--   R[fk] at subscription time
//	           <-response(pk, hash, R[fk])--   R update: one per subscriber
//	  resolver: hash == hash(L[pk]) ? join : drop as stale
//	  result store (the join's table)
//
// The hash is the left value's at the time it subscribed: a response
// computed for an older value (the row changed, maybe to another foreign
// key, while the response travelled) no longer matches the row's current
// value and is dropped (TaskStats.Dropped), so a row that changed its
// foreign key twice never shows a result of its older key.
//
// Where the left task can decide alone, it does, with no round trip: a
// deleted left row, or one whose extractor gives no key, deletes the
// result (inner join) or joins with no right value (left join); a stale
// response for an older value is then dropped by its hash as above.
//
// Wire formats (subscription topic, subscription store, response topic):
//
//	subscription key   foreign key bytes (the right table's key serde)
//	subscription value version u8 (1) | instruction u8 | left partition u32 BE | value hash [16] | left key bytes
//	store key          len(fk) u32 BE | fk bytes | left key bytes (one fk's subscribers are a prefix scan)
//	store value        the subscription value
//	response key       left key bytes (the left table's key serde)
//	response value     version u8 (1) | has right value u8 (0 or 1) | value hash [16] | right value bytes
//
// The hash is the first 16 bytes of SHA-256 over the left value's
// serialized bytes (Kafka takes a 128-bit Murmur3: any hash whose
// collisions are accidents works; SHA-256 has hardware support on the
// machines we run on).

// fkInstruction tells the right side what a subscription record asks.
type fkInstruction byte

const (
	// fkUnsubscribe removes the left key from the foreign key's
	// subscribers (its foreign key changed, or the row was deleted).
	fkUnsubscribe fkInstruction = 1 + iota
	// fkSubscribe stores the subscription and answers with the right
	// value, or with none when the right table lacks the key.
	fkSubscribe
	// fkSubscribeIfFound stores it and answers only with a right value:
	// an inner join's new left row, which had no result to take back.
	fkSubscribeIfFound
)

const (
	fkWireVersion = 1
	fkHashLen     = 16
	fkSubHeader   = 2 + 4 + fkHashLen
	fkRespHeader  = 2 + fkHashLen
)

// fkSubscription is a subscription record's value.
type fkSubscription struct {
	instruction fkInstruction
	partition   int32 // the left row's task partition: where its responses go
	hash        [fkHashLen]byte
	pk          []byte // the left key, serialized
}

func (s fkSubscription) encode() []byte {
	b := make([]byte, 0, fkSubHeader+len(s.pk))
	b = append(b, fkWireVersion, byte(s.instruction))
	b = binary.BigEndian.AppendUint32(b, uint32(s.partition))
	b = append(b, s.hash[:]...)
	return append(b, s.pk...)
}

// decodeFKSubscription reads a subscription value; it copies the left key
// out of b.
func decodeFKSubscription(b []byte) (fkSubscription, error) {
	var s fkSubscription
	if len(b) < fkSubHeader {
		return s, fmt.Errorf("%w: foreign-key subscription of %d bytes, want at least %d", ErrSerde, len(b), fkSubHeader)
	}
	if b[0] != fkWireVersion {
		return s, fmt.Errorf("%w: foreign-key subscription version %d, want %d", ErrSerde, b[0], fkWireVersion)
	}
	s.instruction = fkInstruction(b[1])
	if s.instruction < fkUnsubscribe || s.instruction > fkSubscribeIfFound {
		return s, fmt.Errorf("%w: foreign-key subscription instruction %d", ErrSerde, b[1])
	}
	s.partition = int32(binary.BigEndian.Uint32(b[2:6]))
	if s.partition < 0 {
		return s, fmt.Errorf("%w: foreign-key subscription partition %d", ErrSerde, s.partition)
	}
	copy(s.hash[:], b[6:fkSubHeader])
	s.pk = append([]byte{}, b[fkSubHeader:]...)
	return s, nil
}

// fkResponse is a response record's value; partition is where it is
// sent (the record's, not written in the value).
type fkResponse struct {
	hash      [fkHashLen]byte
	hasRight  bool
	right     []byte // the right value, serialized
	partition int32
}

func (r fkResponse) encode() []byte {
	b := make([]byte, 0, fkRespHeader+len(r.right))
	has := byte(0)
	if r.hasRight {
		has = 1
	}
	b = append(b, fkWireVersion, has)
	b = append(b, r.hash[:]...)
	return append(b, r.right...)
}

func decodeFKResponse(b []byte) (fkResponse, error) {
	var r fkResponse
	if len(b) < fkRespHeader {
		return r, fmt.Errorf("%w: foreign-key response of %d bytes, want at least %d", ErrSerde, len(b), fkRespHeader)
	}
	if b[0] != fkWireVersion {
		return r, fmt.Errorf("%w: foreign-key response version %d, want %d", ErrSerde, b[0], fkWireVersion)
	}
	switch b[1] {
	case 0:
		if len(b) != fkRespHeader {
			return r, fmt.Errorf("%w: foreign-key response without a right value has %d bytes after its header", ErrSerde, len(b)-fkRespHeader)
		}
	case 1:
		r.hasRight = true
		r.right = append([]byte{}, b[fkRespHeader:]...)
	default:
		return r, fmt.Errorf("%w: foreign-key response flag %d", ErrSerde, b[1])
	}
	copy(r.hash[:], b[2:fkRespHeader])
	return r, nil
}

// fkStoreKey is the subscription store's key: the foreign key, length
// first, then the left key, so that a foreign key's subscribers are the
// keys under fkStorePrefix(fk).
func fkStoreKey(fk, pk []byte) []byte {
	return append(fkStorePrefix(fk), pk...)
}

func fkStorePrefix(fk []byte) []byte {
	b := make([]byte, 0, 4+len(fk))
	b = binary.BigEndian.AppendUint32(b, uint32(len(fk)))
	return append(b, fk...)
}

func fkHash(b []byte) [fkHashLen]byte {
	sum := sha256.Sum256(b)
	return [fkHashLen]byte(sum[:fkHashLen])
}

// fkRow is a result row on its way to the result store: the joined
// value, or ok false for a delete.
type fkRow[V any] struct {
	v  V
	ok bool
}

// JoinTablesByForeignKey is Kafka's KTable#join(other,
// foreignKeyExtractor, joiner) (KIP-213): a table with, for each row of
// l whose extractor gives a key fk that r holds, joiner(k, lv, r[fk]).
// The extractor returns false for a row without a foreign key, which has
// no result. l and r need not be co-partitioned: l's rows are routed to
// r's partitions through "<app>-<name>-subscription-registration-topic"
// (r's partition count; r's topic partitioned by its key as Kafka's
// default partitioner does) and the results back through
// "<app>-<name>-subscription-response-topic" (l's count). The result is
// materialized in a store named by opts (Named) or generated, with a
// changelog, so the result serde (ValueSerde) is required; the left
// table's value serde is needed too (its hash tells stale responses).
func JoinTablesByForeignKey[K, V, KO, VO, VR any](l *Table[K, V], r *Table[KO, VO], foreignKey func(V) (KO, bool), joiner func(k K, lv V, rv VO) VR, opts ...Opt) *Table[K, VR] {
	return fkJoin(l, r, foreignKey, false, func(k K, lv V, rv VO, _ bool) VR { return joiner(k, lv, rv) }, opts)
}

// LeftJoinTablesByForeignKey is Kafka's KTable#leftJoin(other,
// foreignKeyExtractor, joiner): a row for each row of l, joined with
// r[fk] or with (zero, false) when r lacks fk or the row has no foreign
// key.
func LeftJoinTablesByForeignKey[K, V, KO, VO, VR any](l *Table[K, V], r *Table[KO, VO], foreignKey func(V) (KO, bool), joiner func(k K, lv V, rv VO, hasRight bool) VR, opts ...Opt) *Table[K, VR] {
	return fkJoin(l, r, foreignKey, true, joiner, opts)
}

// fkNames are the names of a foreign-key join's processors, topics and
// stores: Kafka's generated ones, or derived from Named as Kafka's
// TableJoined.as does.
type fkNames struct {
	send, subSink, subSource, subStore, receive, foreign, respSink, respSource, resolver, result string
	subTopic, respTopic                                                                          string // internal topic suffixes
	resultStore                                                                                  string
}

func newFKNames(b *Builder, kind, user string) fkNames {
	var n fkNames
	if user != "" {
		for _, p := range []struct {
			dst    *string
			suffix string
		}{
			{&n.send, "-subscription-registration-processor"}, {&n.subSink, "-subscription-registration-sink"},
			{&n.subSource, "-subscription-registration-source"}, {&n.subStore, "-subscription-store"},
			{&n.receive, "-subscription-receive"}, {&n.foreign, "-foreign-join-subscription"},
			{&n.respSink, "-subscription-response-sink"}, {&n.respSource, "-subscription-response-source"},
			{&n.resolver, "-subscription-response-resolver"}, {&n.result, "-result"},
		} {
			*p.dst = b.name("", user+p.suffix)
		}
		n.subTopic = user + "-subscription-registration-topic"
		n.respTopic = user + "-subscription-response-topic"
		n.resultStore = b.name("", user)
		return n
	}
	n.send = b.name("KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION", "")
	n.subTopic = n.send + "-topic"
	n.subSink = b.name("KTABLE-SINK", "")
	n.subSource = b.name("KTABLE-SOURCE", "")
	n.subStore = b.name("KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE", "")
	n.receive = b.name("KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR", "")
	n.foreign = b.name("KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR", "")
	n.respTopic = b.name("KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE", "") + "-topic"
	n.respSink = b.name("KTABLE-SINK", "")
	n.respSource = b.name("KTABLE-SOURCE", "")
	n.resolver = b.name("KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR", "")
	n.result = b.name(kind, "")
	n.resultStore = b.name(kind+"-STATE-STORE", "")
	return n
}

func fkJoin[K, V, KO, VO, VR any](l *Table[K, V], r *Table[KO, VO], foreignKey func(V) (KO, bool), left bool, joiner func(K, V, VO, bool) VR, opts []Opt) *Table[K, VR] {
	b := l.b
	c := conf(opts)
	nm := newFKNames(b, "KTABLE-FK-JOIN-OUTPUT", c.name)
	if r.b != b {
		b.errorf("%s: the two tables come from different builders", nm.result)
	}
	outK, outV := serdesOf[K, VR](b, c, "foreign-key join", l.key, nil)
	if l.key == nil || l.val == nil {
		b.errorf("%s: the left table needs a key and a value serde (its keys travel through <app>-%s, its values are hashed)", nm.result, nm.subTopic)
	}
	if r.key == nil || r.val == nil {
		b.errorf("%s: the right table needs a key and a value serde (its keys and values travel through <app>-%s and <app>-%s)", nm.result, nm.subTopic, nm.respTopic)
	}
	if outK == nil || outV == nil {
		b.errorf("%s: the result store %q needs a key and a value serde (give the value serde with ValueSerde)", nm.result, nm.resultStore)
	}

	// Left subtopology: the left table's updates become subscriptions.
	send := b.add(kindProcessor, nm.send, l.n)
	subSink := b.add(kindSink, nm.subSink, send)
	subSink.sinkInternal = nm.subTopic
	// Right subtopology: subscriptions are stored and answered; updates
	// of the right table answer every subscriber of their key.
	subSource := b.add(kindSource, nm.subSource)
	subSource.internal, subSource.readerSized = nm.subTopic, true
	receive := b.add(kindProcessor, nm.receive, subSource)
	b.addStore(newStoreDef(nm.subStore, Bytes, Bytes), receive)
	// The right table's processor reads the subscription store: a stub
	// child of receive puts the two in one subtopology (lookupEdge's
	// way); it receives nothing.
	receiveStub := b.add(kindProcessor, b.name("KTABLE-FK-JOIN-STORE-EDGE", ""), receive)
	receiveStub.inst = func(*task) any { return func(Record[[]byte, fkResponse]) {} }
	foreign := b.add(kindProcessor, nm.foreign, r.n, receiveStub)
	respSink := b.add(kindSink, nm.respSink, receive, foreign)
	respSink.sinkInternal, respSink.sinkPartitioned = nm.respTopic, true
	// Left subtopology again: responses checked against the left row,
	// results into the store.
	respSource := b.add(kindSource, nm.respSource)
	respSource.internal, respSource.readerSized = nm.respTopic, true
	resolver := b.add(kindProcessor, nm.resolver, respSource, lookupEdge(l, "KTABLE-VALUEGETTER"))
	result := b.add(kindProcessor, nm.result, resolver, send)
	b.addStore(newStoreDef(nm.resultStore, outK, outV), result)

	getL, getR := tableGetter(l), tableGetter(r)
	// Kafka's pseudo-topics: the serdes see a topic name for the
	// foreign key and the hashed value, as Kafka's FK join passes them.
	fkTopic := func(t *task) string { return t.app.internalTopic(nm.subTopic) + "-fk" }
	hashTopic := func(t *task) string { return t.app.internalTopic(nm.subTopic) + "-vh" }
	hashOf := func(t *task, v V) ([fkHashLen]byte, error) {
		vb, err := l.val.Serialize(hashTopic(t), v)
		if err != nil {
			return [fkHashLen]byte{}, fmt.Errorf("%s: left value: %w", nm.send, err)
		}
		return fkHash(vb), nil
	}

	send.inst = func(t *task) any {
		toSub := t.instance(subSink).(func(Record[[]byte, fkSubscription]))
		toResult := t.instance(result).(func(Record[K, fkRow[VR]]))
		extract := func(v V) ([]byte, bool, error) {
			ko, ok := foreignKey(v)
			if !ok {
				return nil, false, nil
			}
			kb, err := r.key.Serialize(fkTopic(t), ko)
			if err != nil {
				return nil, false, fmt.Errorf("%s: foreign key: %w", nm.send, err)
			}
			return kb, true, nil
		}
		return func(rec Record[K, Change[V]]) {
			u := rec.Value
			var oldFK, newFK []byte
			var hasOldFK, hasNewFK bool
			var err error
			if u.HasOld {
				if oldFK, hasOldFK, err = extract(u.Old); err != nil {
					t.fail(err)
					return
				}
			}
			if u.HasNew {
				if newFK, hasNewFK, err = extract(u.New); err != nil {
					t.fail(err)
					return
				}
			}
			pk, err := l.key.Serialize(t.app.internalTopic(nm.subTopic)+"-pk", rec.Key)
			if err != nil {
				t.fail(fmt.Errorf("%s: left key: %w", nm.send, err))
				return
			}
			sub := fkSubscription{partition: t.id.partition, pk: pk}
			if hasOldFK && (!hasNewFK || !bytes.Equal(oldFK, newFK)) {
				// The old foreign key's subscription goes; what the
				// result becomes is the new one's answer (or decided
				// below).
				sub.instruction = fkUnsubscribe
				toSub(Record[[]byte, fkSubscription]{Key: oldFK, Value: sub, Timestamp: rec.Timestamp, Headers: rec.Headers})
			}
			if hasNewFK {
				if sub.hash, err = hashOf(t, u.New); err != nil {
					t.fail(err)
					return
				}
				sub.instruction = fkSubscribe
				if !left && !u.HasOld {
					sub.instruction = fkSubscribeIfFound
				}
				toSub(Record[[]byte, fkSubscription]{Key: newFK, Value: sub, Timestamp: rec.Timestamp, Headers: rec.Headers})
				return
			}
			// Deleted, or no foreign key: no right row can join.
			var row fkRow[VR]
			if u.HasNew && left {
				var zero VO
				row = fkRow[VR]{v: joiner(rec.Key, u.New, zero, false), ok: true}
			}
			toResult(Record[K, fkRow[VR]]{Key: rec.Key, Value: row, Timestamp: rec.Timestamp, Headers: rec.Headers})
		}
	}

	subSink.inst = func(t *task) any {
		topic := t.app.internalTopic(nm.subTopic)
		return func(rec Record[[]byte, fkSubscription]) {
			t.send(&kgo.Record{Topic: topic, Partition: -1, Key: rec.Key, Value: rec.Value.encode(), Timestamp: rec.Timestamp, Headers: rec.Headers})
		}
	}
	subSource.inst = func(t *task) any {
		next := t.instance(receive).(func(Record[[]byte, fkSubscription]))
		return sourceFn(func(kr *kgo.Record) error {
			s, err := decodeFKSubscription(kr.Value)
			if err != nil {
				return fmt.Errorf("value of %s/%d@%d: %w", kr.Topic, kr.Partition, kr.Offset, err)
			}
			next(Record[[]byte, fkSubscription]{Key: append([]byte{}, kr.Key...), Value: s, Timestamp: kr.Timestamp, Headers: kr.Headers})
			return nil
		})
	}

	receive.inst = func(t *task) any {
		st := t.store(nm.subStore)
		get := getR(t)
		toResp := t.instance(respSink).(func(Record[[]byte, fkResponse]))
		return func(rec Record[[]byte, fkSubscription]) {
			s := rec.Value
			sk := fkStoreKey(rec.Key, s.pk)
			if s.instruction == fkUnsubscribe {
				if _, found, err := st.get(sk); err != nil {
					t.fail(fmt.Errorf("%s: %w", nm.receive, err))
				} else if found {
					st.delete(sk, rec.Timestamp)
				}
				return
			}
			st.put(sk, s.encode(), rec.Timestamp)
			ko, err := r.key.Deserialize(fkTopic(t), rec.Key)
			if err != nil {
				t.fail(fmt.Errorf("%s: foreign key: %w", nm.receive, err))
				return
			}
			rv, found, err := get(ko)
			if err != nil {
				t.fail(fmt.Errorf("%s: %w", nm.receive, err))
				return
			}
			if !found && s.instruction == fkSubscribeIfFound {
				return
			}
			resp := fkResponse{hash: s.hash, partition: s.partition, hasRight: found}
			if found {
				if resp.right, err = r.val.Serialize(t.app.internalTopic(nm.respTopic), rv); err != nil {
					t.fail(fmt.Errorf("%s: right value: %w", nm.receive, err))
					return
				}
			}
			toResp(Record[[]byte, fkResponse]{Key: s.pk, Value: resp, Timestamp: rec.Timestamp, Headers: rec.Headers})
		}
	}

	foreign.inst = func(t *task) any {
		toResp := t.instance(respSink).(func(Record[[]byte, fkResponse]))
		return func(rec Record[KO, Change[VO]]) {
			fk, err := r.key.Serialize(fkTopic(t), rec.Key)
			if err != nil {
				t.fail(fmt.Errorf("%s: foreign key: %w", nm.foreign, err))
				return
			}
			var rb []byte
			if rec.Value.HasNew {
				if rb, err = r.val.Serialize(t.app.internalTopic(nm.respTopic), rec.Value.New); err != nil {
					t.fail(fmt.Errorf("%s: right value: %w", nm.foreign, err))
					return
				}
			}
			// Collect first: the sink does not write this store, but a
			// scan never runs under a processor that could.
			var subs []fkSubscription
			var derr error
			err = rangeStorePrefix(t.batch, nm.subStore, fkStorePrefix(fk), func(_, v []byte) bool {
				s, err := decodeFKSubscription(v)
				if err != nil {
					derr = fmt.Errorf("%s: stored subscription: %w", nm.foreign, err)
					return false
				}
				subs = append(subs, s)
				return true
			})
			if err = firstErr(derr, err); err != nil {
				t.fail(err)
				return
			}
			for _, s := range subs {
				toResp(Record[[]byte, fkResponse]{Key: s.pk, Value: fkResponse{hash: s.hash, partition: s.partition, hasRight: rec.Value.HasNew, right: rb},
					Timestamp: rec.Timestamp, Headers: rec.Headers})
			}
		}
	}

	respSink.inst = func(t *task) any {
		topic := t.app.internalTopic(nm.respTopic)
		return func(rec Record[[]byte, fkResponse]) {
			t.send(&kgo.Record{Topic: topic, Partition: rec.Value.partition, Key: rec.Key, Value: rec.Value.encode(), Timestamp: rec.Timestamp, Headers: rec.Headers})
		}
	}
	respSource.inst = func(t *task) any {
		next := t.instance(resolver).(func(Record[[]byte, fkResponse]))
		return sourceFn(func(kr *kgo.Record) error {
			resp, err := decodeFKResponse(kr.Value)
			if err != nil {
				return fmt.Errorf("value of %s/%d@%d: %w", kr.Topic, kr.Partition, kr.Offset, err)
			}
			resp.partition = kr.Partition
			next(Record[[]byte, fkResponse]{Key: kr.Key, Value: resp, Timestamp: kr.Timestamp, Headers: kr.Headers})
			return nil
		})
	}

	resolver.inst = func(t *task) any {
		get := getL(t)
		toResult := t.instance(result).(func(Record[K, fkRow[VR]]))
		topic := t.app.internalTopic(nm.respTopic)
		return func(rec Record[[]byte, fkResponse]) {
			key, err := l.key.Deserialize(topic, rec.Key)
			if err != nil {
				t.fail(fmt.Errorf("%s: left key: %w", nm.resolver, err))
				return
			}
			lv, found, err := get(key)
			if err != nil {
				t.fail(fmt.Errorf("%s: %w", nm.resolver, err))
				return
			}
			if !found {
				t.dropped.Add(1) // the row is gone: its delete decided the result
				return
			}
			h, err := hashOf(t, lv)
			if err != nil {
				t.fail(err)
				return
			}
			if h != rec.Value.hash {
				t.dropped.Add(1) // stale: computed for an older value of the row
				return
			}
			var row fkRow[VR]
			switch {
			case rec.Value.hasRight:
				rv, err := r.val.Deserialize(topic, rec.Value.right)
				if err != nil {
					t.fail(fmt.Errorf("%s: right value: %w", nm.resolver, err))
					return
				}
				row = fkRow[VR]{v: joiner(key, lv, rv, true), ok: true}
			case left:
				var zero VO
				row = fkRow[VR]{v: joiner(key, lv, zero, false), ok: true}
			}
			toResult(Record[K, fkRow[VR]]{Key: key, Value: row, Timestamp: rec.Timestamp, Headers: rec.Headers})
		}
	}

	result.inst = func(t *task) any {
		st := t.store(nm.resultStore)
		next := fanout[K, Change[VR]](t, result)
		return func(rec Record[K, fkRow[VR]]) {
			kb, err := outK.Serialize(st.changelog, rec.Key)
			if err != nil {
				t.fail(fmt.Errorf("%s: key: %w", nm.resultStore, err))
				return
			}
			ob, hasOld, err := st.get(kb)
			if err != nil {
				t.fail(fmt.Errorf("%s: get: %w", nm.resultStore, err))
				return
			}
			var ch Change[VR]
			if hasOld {
				if ch.Old, err = outV.Deserialize(st.changelog, ob); err != nil {
					t.fail(fmt.Errorf("%s: stored value: %w", nm.resultStore, err))
					return
				}
				ch.HasOld = true
			}
			if !rec.Value.ok {
				if !hasOld {
					return // no result to delete
				}
				st.delete(kb, rec.Timestamp)
			} else {
				nb, err := outV.Serialize(st.changelog, rec.Value.v)
				if err != nil {
					t.fail(fmt.Errorf("%s: value: %w", nm.resultStore, err))
					return
				}
				st.put(kb, nb, rec.Timestamp)
				ch.New, ch.HasNew = rec.Value.v, true
			}
			next(Record[K, Change[VR]]{Key: rec.Key, Value: ch, Timestamp: rec.Timestamp, Headers: rec.Headers})
		}
	}
	return &Table[K, VR]{b: b, n: result, key: outK, val: outV, store: nm.resultStore}
}
