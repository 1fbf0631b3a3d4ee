package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// The records of KIP-848 consumer groups in __consumer_offsets, in the
// formats of Kafka 4.0 (group-coordinator/src/main/resources/common/message
// /ConsumerGroup*.json). kmsg v1.15.1 has no schema for any of them, so
// they are encoded here, field for field as Kafka 4.0 defines them:
//
//	key type 3  ConsumerGroupMetadata            key: group
//	            value v0: epoch int32
//	key type 4  ConsumerGroupPartitionMetadata   key: group
//	            value v0: [topic id uuid, topic name, partitions int32,
//	                       [partition int32, [rack]]]
//	key type 5  ConsumerGroupMemberMetadata      key: group, member id
//	            value v0: instance id?, rack id?, client id, client host,
//	                      [subscribed topic name], subscribed regex?,
//	                      rebalance timeout ms int32, server assignor?
//	                      (tag 0: ClassicMemberMetadata, never written)
//	key type 6  ConsumerGroupTargetAssignmentMetadata  key: group
//	            value v0: assignment epoch int32
//	key type 7  ConsumerGroupTargetAssignmentMember    key: group, member id
//	            value v0: [topic id uuid, [partition int32]]
//	key type 8  ConsumerGroupCurrentMemberAssignment   key: group, member id
//	            value v0: member epoch int32, previous member epoch int32,
//	                      state int8, [topic id, [partition]] assigned,
//	                      [topic id, [partition]] pending revocation
//
// Keys are not flexible: int16 type, then int16-length strings. Values are
// flexible (KIP-482) from version 0: int16 version, compact strings and
// arrays (unsigned varint length + 1, 0 for null), and a tagged-field
// section after every struct. "?" marks a nullable string.
//
// Kafka 4.0 also writes ConsumerGroupRegularExpression records (type 16)
// with the topics a regex resolved to; ringlog resolves regexes again from
// the engine's topics when a partition loads, so it writes none and skips
// them on replay, as it skips every type it does not keep.
const (
	consumerGroupMetadataKey    = 3
	consumerPartitionMetadata   = 4
	consumerMemberMetadataKey   = 5
	consumerTargetMetadataKey   = 6
	consumerTargetMemberKey     = 7
	consumerCurrentAssignmentKy = 8
)

// errRecord848 wraps every decoding failure of a KIP-848 record.
var errRecord848 = errors.New("group: undecodable consumer group record")

// wbuf appends the primitives of Kafka's flexible encoding.
type wbuf []byte

func (w *wbuf) i8(v int8)   { *w = append(*w, byte(v)) }
func (w *wbuf) i16(v int16) { *w = binary.BigEndian.AppendUint16(*w, uint16(v)) }
func (w *wbuf) i32(v int32) { *w = binary.BigEndian.AppendUint32(*w, uint32(v)) }
func (w *wbuf) uvarint(v uint64) {
	*w = binary.AppendUvarint(*w, v)
}
func (w *wbuf) uuid(id [16]byte) { *w = append(*w, id[:]...) }

// str is a non-flexible (int16 length) string, for keys.
func (w *wbuf) str(s string) {
	w.i16(int16(len(s)))
	*w = append(*w, s...)
}

// cstr is a compact string; cnstr a compact nullable one.
func (w *wbuf) cstr(s string) {
	w.uvarint(uint64(len(s)) + 1)
	*w = append(*w, s...)
}

func (w *wbuf) cnstr(s *string) {
	if s == nil {
		w.uvarint(0)
		return
	}
	w.cstr(*s)
}

// tags writes an empty tagged-field section.
func (w *wbuf) tags() { w.uvarint(0) }

func (w *wbuf) topicPartitions(a assignment) {
	ids := a.topicIDs()
	w.uvarint(uint64(len(ids)) + 1)
	for _, id := range ids {
		w.uuid(id)
		ps := a[id]
		w.uvarint(uint64(len(ps)) + 1)
		for _, p := range ps {
			w.i32(p)
		}
		w.tags()
	}
}

// rbuf reads what wbuf writes. Like kbin it has a sticky error: after the
// first short or bad read every read returns a zero value, and the caller
// checks err once at the end. Array counts are bounded by the bytes left
// (each element takes at least one byte), so no count read from the log
// makes it allocate more than the record justifies.
type rbuf struct {
	b   []byte
	err error
}

func (r *rbuf) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errRecord848, what)
	}
	r.b = nil
}

func (r *rbuf) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.fail("short record")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *rbuf) i8() int8 {
	b := r.take(1)
	if b == nil {
		return 0
	}
	return int8(b[0])
}

func (r *rbuf) i16() int16 {
	b := r.take(2)
	if b == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(b))
}

func (r *rbuf) i32() int32 {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

func (r *rbuf) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *rbuf) uuid() (id [16]byte) {
	copy(id[:], r.take(16))
	return id
}

func (r *rbuf) str() string {
	n := r.i16()
	if n < 0 {
		r.fail("null key string")
		return ""
	}
	return string(r.take(int(n)))
}

// clen reads a compact length: -1 for null.
func (r *rbuf) clen() int {
	v := r.uvarint()
	if v > uint64(len(r.b))+1 || v > math.MaxInt32 {
		r.fail("length beyond the record")
		return 0
	}
	return int(v) - 1
}

func (r *rbuf) cstr() string {
	n := r.clen()
	if n < 0 {
		r.fail("null string")
		return ""
	}
	return string(r.take(n))
}

func (r *rbuf) cnstr() *string {
	n := r.clen()
	if n < 0 || r.err != nil {
		return nil
	}
	s := string(r.take(n))
	return &s
}

// carray reads a compact array count; null reads as empty.
func (r *rbuf) carray() int {
	return max(r.clen(), 0)
}

// skipTags skips a tagged-field section: fields of later versions (such as
// the ClassicMemberMetadata of a member that used the classic protocol, or
// the tags Kafka 4.1 adds) are not kept.
func (r *rbuf) skipTags() {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("tag count beyond the record")
		return
	}
	for range n {
		r.uvarint() // the tag
		size := r.uvarint()
		if size > uint64(len(r.b)) {
			r.fail("tagged field beyond the record")
			return
		}
		r.take(int(size))
	}
}

func (r *rbuf) topicPartitions() assignment {
	a := assignment{}
	for range r.carray() {
		id := r.uuid()
		n := r.carray()
		ps := make([]int32, 0, n)
		for range n {
			ps = append(ps, r.i32())
		}
		r.skipTags()
		if r.err == nil && len(ps) > 0 {
			slices.Sort(ps)
			a[id] = slices.Compact(append(a[id], ps...))
		}
	}
	return a
}

// Keys.

func consumerKey(typ int16, groupID string) []byte {
	w := wbuf{}
	w.i16(typ)
	w.str(groupID)
	return w
}

func consumerMemberKey(typ int16, groupID, memberID string) []byte {
	w := wbuf(consumerKey(typ, groupID))
	w.str(memberID)
	return w
}

// consumerRecordKey is a decoded KIP-848 key.
type consumerRecordKey struct {
	typ      int16
	group    string
	memberID string // types 5, 7, 8
}

func readConsumerKey(key []byte) (consumerRecordKey, error) {
	r := rbuf{b: key}
	k := consumerRecordKey{typ: r.i16()}
	k.group = r.str()
	switch k.typ {
	case consumerMemberMetadataKey, consumerTargetMemberKey, consumerCurrentAssignmentKy:
		k.memberID = r.str()
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes in key")
	}
	return k, r.err
}

// Values. Each starts with its version, 0.

func int32Value(v int32) []byte {
	w := wbuf{}
	w.i16(0)
	w.i32(v)
	w.tags()
	return w
}

func readInt32Value(b []byte) (int32, error) {
	r := rbuf{b: b}
	if r.i16() != 0 && r.err == nil {
		r.fail("unknown value version")
	}
	v := r.i32()
	r.skipTags()
	return v, r.err
}

// topicMeta is one subscribed topic as ConsumerGroupPartitionMetadata
// records it: a topic deleted and created again has another id, and a
// topic grown has more partitions, and either changes the group's
// subscription metadata (KIP-848, "Group Epoch - Trigger a rebalance").
type topicMeta struct {
	id         [16]byte
	partitions int32
}

func partitionMetadataValue(meta map[string]topicMeta) []byte {
	w := wbuf{}
	w.i16(0)
	names := make([]string, 0, len(meta))
	for n := range meta {
		names = append(names, n)
	}
	slices.Sort(names)
	w.uvarint(uint64(len(names)) + 1)
	for _, n := range names {
		m := meta[n]
		w.uuid(m.id)
		w.cstr(n)
		w.i32(m.partitions)
		// Kafka 4.0 stores an empty list when no partition has rack
		// information, which is always the case on a single broker with
		// no broker.rack.
		w.uvarint(1)
		w.tags()
	}
	w.tags()
	return w
}

func readPartitionMetadataValue(b []byte) (map[string]topicMeta, error) {
	r := rbuf{b: b}
	if r.i16() != 0 && r.err == nil {
		r.fail("unknown value version")
	}
	meta := map[string]topicMeta{}
	for range r.carray() {
		id := r.uuid()
		name := r.cstr()
		n := r.i32()
		for range r.carray() {
			r.i32()
			for range r.carray() {
				r.cstr()
			}
			r.skipTags()
		}
		r.skipTags()
		if r.err == nil {
			meta[name] = topicMeta{id: id, partitions: n}
		}
	}
	r.skipTags()
	return meta, r.err
}

// memberMetadata is a member's ConsumerGroupMemberMetadata value.
type memberMetadata struct {
	instanceID, rackID   *string
	clientID, clientHost string
	topics               []string // sorted
	regex                *string
	rebalanceTimeoutMs   int32
	assignor             *string
}

func memberMetadataValue(m *memberMetadata) []byte {
	w := wbuf{}
	w.i16(0)
	w.cnstr(m.instanceID)
	w.cnstr(m.rackID)
	w.cstr(m.clientID)
	w.cstr(m.clientHost)
	w.uvarint(uint64(len(m.topics)) + 1)
	for _, t := range m.topics {
		w.cstr(t)
	}
	w.cnstr(m.regex)
	w.i32(m.rebalanceTimeoutMs)
	w.cnstr(m.assignor)
	w.tags()
	return w
}

func readMemberMetadataValue(b []byte) (*memberMetadata, error) {
	r := rbuf{b: b}
	if r.i16() != 0 && r.err == nil {
		r.fail("unknown value version")
	}
	m := &memberMetadata{}
	m.instanceID = r.cnstr()
	m.rackID = r.cnstr()
	m.clientID = r.cstr()
	m.clientHost = r.cstr()
	n := r.carray()
	m.topics = make([]string, 0, min(n, 1024))
	for range n {
		m.topics = append(m.topics, r.cstr())
	}
	slices.Sort(m.topics)
	m.topics = slices.Compact(m.topics)
	m.regex = r.cnstr()
	m.rebalanceTimeoutMs = r.i32()
	m.assignor = r.cnstr()
	r.skipTags()
	return m, r.err
}

func targetMemberValue(a assignment) []byte {
	w := wbuf{}
	w.i16(0)
	w.topicPartitions(a)
	w.tags()
	return w
}

func readTargetMemberValue(b []byte) (assignment, error) {
	r := rbuf{b: b}
	if r.i16() != 0 && r.err == nil {
		r.fail("unknown value version")
	}
	a := r.topicPartitions()
	r.skipTags()
	return a, r.err
}

// currentAssignment is a member's ConsumerGroupCurrentMemberAssignment
// value: where its reconciliation stands.
type currentAssignment struct {
	epoch, prevEpoch int32
	state            memberState
	assigned         assignment
	revoking         assignment // PartitionsPendingRevocation

	// since is the member epoch at which each partition of assigned and
	// revoking was assigned to the member (KIP-1251's assignment epochs),
	// by which an OffsetCommit at an older member epoch is judged. It is
	// kept in memory only: a partition without one (after a load) counts
	// as assigned at the member's current epoch, which refuses a lagging
	// commit rather than take one Kafka might refuse.
	since map[tpKey]int32
}

// assignedSince is the member epoch at which the member got partition p
// of topic id, and whether it holds it (assigned or pending revocation).
func (c *currentAssignment) assignedSince(id [16]byte, p int32) (int32, bool) {
	if !c.assigned.has(id, p) && !c.revoking.has(id, p) {
		return 0, false
	}
	if e, ok := c.since[tpKey{id, p}]; ok {
		return e, true
	}
	return c.epoch, true
}

func currentAssignmentValue(c *currentAssignment) []byte {
	w := wbuf{}
	w.i16(0)
	w.i32(c.epoch)
	w.i32(c.prevEpoch)
	w.i8(int8(c.state))
	w.topicPartitions(c.assigned)
	w.topicPartitions(c.revoking)
	w.tags()
	return w
}

func readCurrentAssignmentValue(b []byte) (*currentAssignment, error) {
	r := rbuf{b: b}
	if r.i16() != 0 && r.err == nil {
		r.fail("unknown value version")
	}
	c := &currentAssignment{}
	c.epoch = r.i32()
	c.prevEpoch = r.i32()
	c.state = memberState(r.i8())
	c.assigned = r.topicPartitions()
	c.revoking = r.topicPartitions()
	r.skipTags()
	return c, r.err
}

// consumerLoad is what replay found of a consumer group: the last value
// of each of its keys.
type consumerLoad struct {
	epoch, assignmentEpoch int32
	subMeta                map[string]topicMeta
	members                map[string]*memberMetadata
	targets                map[string]assignment
	current                map[string]*currentAssignment
}

// applyConsumer replays one KIP-848 record (nil value: a tombstone).
func (st *loadState) applyConsumer(key, value []byte) error {
	k, err := readConsumerKey(key)
	if err != nil {
		return err
	}
	cl := st.consumers[k.group]
	if value == nil {
		if cl == nil {
			return nil
		}
		switch k.typ {
		case consumerGroupMetadataKey:
			// Written last when a group is deleted.
			delete(st.consumers, k.group)
		case consumerPartitionMetadata:
			cl.subMeta = nil
		case consumerMemberMetadataKey:
			delete(cl.members, k.memberID)
		case consumerTargetMetadataKey:
			cl.assignmentEpoch = 0
		case consumerTargetMemberKey:
			delete(cl.targets, k.memberID)
		case consumerCurrentAssignmentKy:
			delete(cl.current, k.memberID)
		}
		return nil
	}
	if cl == nil {
		cl = &consumerLoad{members: map[string]*memberMetadata{}, targets: map[string]assignment{}, current: map[string]*currentAssignment{}}
		st.consumers[k.group] = cl
	}
	// The group is a consumer group from here on, whatever it was.
	delete(st.groups, k.group)
	switch k.typ {
	case consumerGroupMetadataKey:
		cl.epoch, err = readInt32Value(value)
	case consumerPartitionMetadata:
		cl.subMeta, err = readPartitionMetadataValue(value)
	case consumerMemberMetadataKey:
		var m *memberMetadata
		if m, err = readMemberMetadataValue(value); err == nil {
			cl.members[k.memberID] = m
		}
	case consumerTargetMetadataKey:
		cl.assignmentEpoch, err = readInt32Value(value)
	case consumerTargetMemberKey:
		var a assignment
		if a, err = readTargetMemberValue(value); err == nil {
			cl.targets[k.memberID] = a
		}
	case consumerCurrentAssignmentKy:
		var c *currentAssignment
		if c, err = readCurrentAssignmentValue(value); err == nil {
			cl.current[k.memberID] = c
		}
	}
	return err
}
