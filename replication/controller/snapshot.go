package controller

import (
	"fmt"
	"maps"
	"slices"

	"ringlog/internal/acl"
)

// The snapshot of the state machine is the encoded Image:
//
//	+--------+---------+-------+------------------+-----------------+-----------------+-----------------+------------------+
//	| "RLMI" | version | index | next producer id | brokers (by id) | topics (by name)| SCRAM (by user) | ACLs (sorted)    | quotas (sorted)| broker configs  |
//	| 4 B    | u8 = 8  | u64   | i64              | count, broker.. | count, topic... | count, cred...  | count, binding...| count, quota...| count, config...|
//	+--------+---------+-------+------------------+-----------------+-----------------+-----------------+------------------+----------------+-----------------+
//	broker:    id i32 | addr str | rack str | epoch i64 | fenced u8 | listeners (count, name str, addr str...; v3)
//	topic:     name str | id [16]B | configs (count, key str, value str...)
//	           | partitions: count, partition...
//	partition: replicas (count, i32...) | isr (count, i32...) | leader i32
//	           | leader epoch i32 | partition epoch i32 | offline (count, i32...; v4)
//	           | recovering (count, log end...; v5) | adding, removing (count, i32... each; v7)
//	cred:      user str | mechanism u8 | 0 u8 | iterations i32 | salt | stored key | server key
//	binding:   as acls.go draws it (v6)
//	quota:     as quotas.go draws it (v6)
//	config:    a BROKER resource's dynamic configs, as brokerconfigs.go draws them (v8)
//
// Counts are uvarints, strings a uvarint length and the bytes. Everything is
// written in sorted order, so equal states encode to equal bytes. raft's
// FileSnapshotStore keeps a CRC-64 of the file and checks it on open.
//
// Version 1 had no next producer id (it reads as 0: no block was handed
// out before the command existed), version 2 no SCRAM credentials and no
// broker listeners (none existed), version 3 no offline replicas (none
// were reported), versions before 6 no ACLs and no client quotas (none
// could be set), versions before 7 no adding and removing replicas (no
// reassignment existed), versions before 8 no dynamic broker configs (none
// could be set); all are still read, never written. Replies of the
// forwarding RPC that carry a topic or a partition use the current
// version's encoding.

const snapshotMagic = "RLMI"
const snapshotVersion = 8

// snapshotHeaderBytes is the length of magic, version and index: what
// precedes the state itself.
const snapshotHeaderBytes = 13

func encodeImage(img *Image) []byte {
	e := &encoder{b: make([]byte, 0, 256)}
	e.b = append(e.b, snapshotMagic...)
	e.u8(snapshotVersion)
	e.u64(img.Index)
	e.i64(img.nextProducerID)
	ids := slices.Sorted(maps.Keys(img.brokers))
	e.uvarint(len(ids))
	for _, id := range ids {
		b := img.brokers[id]
		e.i32(b.ID)
		e.str(b.Addr)
		e.str(b.Rack)
		e.i64(b.Epoch)
		e.bool(b.Fenced)
		e.stringMap(b.Listeners)
	}
	names := img.TopicNames()
	e.uvarint(len(names))
	for _, name := range names {
		encodeTopic(e, img.topics[name])
	}
	encodeScramImage(e, img.scram)
	encodeBindings(e, img.ACLs().Bindings())
	encodeQuotaImage(e, img.quotas)
	encodeBrokerConfigs(e, img.brokerConfigs)
	return e.b
}

func encodeTopic(e *encoder, t *Topic) {
	e.str(t.Name)
	e.b = append(e.b, t.ID[:]...)
	e.stringMap(t.Configs)
	e.uvarint(len(t.Partitions))
	for _, p := range t.Partitions {
		encodePartition(e, p)
	}
}

func encodePartition(e *encoder, p Partition) {
	e.int32s(p.Replicas)
	e.int32s(p.ISR)
	e.i32(p.Leader)
	e.i32(p.LeaderEpoch)
	e.i32(p.PartitionEpoch)
	e.int32s(p.Offline)
	encodeLogEnds(e, p.Recovering)
	e.int32s(p.AddingReplicas)
	e.int32s(p.RemovingReplicas)
}

func encodeLogEnds(e *encoder, v []LogEnd) {
	e.uvarint(len(v))
	for _, l := range v {
		e.i32(l.Broker)
		e.i32(l.LastEpoch)
		e.i64(l.LEO)
	}
}

func decodeLogEnds(d *decoder) []LogEnd {
	n := d.count(16)
	if n == 0 {
		return nil
	}
	v := make([]LogEnd, n)
	for i := range v {
		v[i] = LogEnd{Broker: d.i32(), LastEpoch: d.i32(), LEO: d.i64()}
	}
	return v
}

// decodeTopic decodes a topic as snapshot version v encodes it.
func decodeTopic(d *decoder, v uint8) *Topic {
	t := &Topic{Name: d.str()}
	copy(t.ID[:], d.take(16))
	t.Configs = d.stringMap()
	if t.Configs == nil {
		t.Configs = map[string]string{}
	}
	if n := d.count(14); n > 0 {
		t.Partitions = make([]Partition, n)
		for i := range t.Partitions {
			t.Partitions[i] = decodePartition(d, v)
		}
	}
	return t
}

// decodePartition decodes a partition as snapshot version v encodes it.
func decodePartition(d *decoder, v uint8) Partition {
	p := Partition{Replicas: d.int32s(), ISR: d.int32s(), Leader: d.i32(), LeaderEpoch: d.i32(), PartitionEpoch: d.i32()}
	if v >= 4 {
		p.Offline = d.int32s()
	}
	if v >= 5 {
		p.Recovering = decodeLogEnds(d)
	}
	if v >= 7 {
		p.AddingReplicas, p.RemovingReplicas = d.int32s(), d.int32s()
	}
	return p
}

// decodeImage decodes a snapshot and checks the state's invariants: a
// snapshot is bytes from disk.
func decodeImage(b []byte) (*Image, error) {
	d := &decoder{b: b}
	if m := d.take(len(snapshotMagic)); d.err == nil && string(m) != snapshotMagic {
		d.fail("snapshot magic %q", m)
	}
	v := d.u8()
	if d.err == nil && (v < 1 || v > snapshotVersion) {
		d.fail("snapshot version %d", v)
	}
	img := emptyImage()
	img.Index = d.u64()
	if v >= 2 {
		img.nextProducerID = d.i64()
	}
	n := d.count(15)
	for range n {
		b := Broker{ID: d.i32(), Addr: d.str(), Rack: d.str(), Epoch: d.i64(), Fenced: d.bool()}
		if v >= 3 {
			b.Listeners = d.stringMap()
		}
		if d.err != nil {
			break
		}
		if _, dup := img.brokers[b.ID]; dup {
			d.fail("broker %d twice", b.ID)
		}
		img.brokers[b.ID] = b
	}
	n = d.count(18)
	for range n {
		t := decodeTopic(d, v)
		if d.err != nil {
			break
		}
		if _, dup := img.topics[t.Name]; dup {
			d.fail("topic %q twice", t.Name)
		}
		img.topics[t.Name] = t
		img.topicIDs[t.ID] = t.Name
	}
	if v >= 3 {
		if m := decodeScramImage(d); len(m) > 0 {
			img.scram = m
		}
	}
	if v >= 6 {
		if bs := decodeBindings(d); len(bs) > 0 {
			img.acls = acl.NewSet(bs)
		}
		img.quotas = decodeQuotaImage(d)
	}
	if v >= 8 {
		img.brokerConfigs = decodeBrokerConfigs(d)
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	if err := checkImage(img); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return img, nil
}

// checkImage asserts the invariants every applied state keeps. It runs on
// every restored snapshot and, in tests, after every applied command.
func checkImage(img *Image) error {
	if img.nextProducerID < 0 {
		return fmt.Errorf("next producer id %d", img.nextProducerID)
	}
	for id, b := range img.brokers {
		if b.ID != id || id < 0 {
			return fmt.Errorf("broker %d filed under %d", b.ID, id)
		}
	}
	if len(img.topicIDs) != len(img.topics) {
		return fmt.Errorf("%d topic ids for %d topics", len(img.topicIDs), len(img.topics))
	}
	for name, t := range img.topics {
		if t.Name != name || t.ID == (TopicID{}) || img.topicIDs[t.ID] != name {
			return fmt.Errorf("topic %q: bad name or id", name)
		}
		if err := validateTopicName(name); err != nil {
			return err
		}
		if len(t.Partitions) == 0 {
			return fmt.Errorf("topic %q has no partitions", name)
		}
		for i, p := range t.Partitions {
			if err := checkPartition(img, p); err != nil {
				return fmt.Errorf("partition %s-%d: %w", name, i, err)
			}
		}
	}
	if err := checkQuotas(img.quotas); err != nil {
		return err
	}
	if err := checkBrokerConfigs(img.brokerConfigs); err != nil {
		return err
	}
	bs := img.ACLs().Bindings()
	for i, b := range bs {
		if err := b.Validate(); err != nil {
			return fmt.Errorf("ACL %v: %w", b, err)
		}
		if i > 0 && compareBindings(bs[i-1], b) >= 0 {
			return fmt.Errorf("ACLs out of order or twice: %v, %v", bs[i-1], b)
		}
	}
	return nil
}

func checkPartition(img *Image, p Partition) error {
	if len(p.Replicas) == 0 || hasDuplicates(p.Replicas) || hasDuplicates(p.ISR) {
		return fmt.Errorf("replicas %v, ISR %v", p.Replicas, p.ISR)
	}
	if len(p.ISR) == 0 {
		return fmt.Errorf("empty ISR")
	}
	for _, r := range p.ISR {
		if !slices.Contains(p.Replicas, r) {
			return fmt.Errorf("ISR member %d is not a replica", r)
		}
	}
	for _, r := range p.Replicas {
		if _, ok := img.brokers[r]; !ok {
			return fmt.Errorf("replica %d is not a registered broker", r)
		}
	}
	if p.Leader != -1 {
		if !slices.Contains(p.ISR, p.Leader) {
			return fmt.Errorf("leader %d not in ISR %v", p.Leader, p.ISR)
		}
		if !img.live(p.Leader) {
			return fmt.Errorf("leader %d is fenced", p.Leader)
		}
	}
	// A fenced broker stays in the ISR only as its last member (KRaft keeps
	// it so that it can lead again when it returns).
	if len(p.ISR) > 1 {
		for _, r := range p.ISR {
			if !img.live(r) {
				return fmt.Errorf("fenced broker %d in ISR %v", r, p.ISR)
			}
		}
	}
	// Offline replicas are replicas, listed once in replica order, and
	// none leads.
	if hasDuplicates(p.Offline) {
		return fmt.Errorf("offline replicas %v", p.Offline)
	}
	for _, r := range p.Offline {
		if !slices.Contains(p.Replicas, r) {
			return fmt.Errorf("offline replica %d is not a replica", r)
		}
		if r == p.Leader {
			return fmt.Errorf("leader %d is offline", r)
		}
	}
	if len(p.Offline) > 1 && !slices.IsSortedFunc(p.Offline, func(a, b int32) int {
		return slices.Index(p.Replicas, a) - slices.Index(p.Replicas, b)
	}) {
		return fmt.Errorf("offline replicas %v not in replica order %v", p.Offline, p.Replicas)
	}
	// An ISR of more than one holds no offline replica (it left it as a
	// fenced broker does).
	if len(p.ISR) > 1 {
		for _, r := range p.ISR {
			if slices.Contains(p.Offline, r) {
				return fmt.Errorf("offline replica %d in ISR %v", r, p.ISR)
			}
		}
	}
	if err := checkReassignment(p); err != nil {
		return err
	}
	if p.LeaderEpoch < 0 || p.PartitionEpoch < 0 {
		return fmt.Errorf("negative epoch")
	}
	// Recovery log ends: one per replica, sorted by broker.
	for i, l := range p.Recovering {
		if !slices.Contains(p.Replicas, l.Broker) || l.LEO < 0 || l.LastEpoch < -1 {
			return fmt.Errorf("recovery log end %+v", l)
		}
		if i > 0 && p.Recovering[i-1].Broker >= l.Broker {
			return fmt.Errorf("recovery log ends %v not sorted by broker", p.Recovering)
		}
	}
	return nil
}

func hasDuplicates(v []int32) bool {
	for i := range v {
		if slices.Contains(v[i+1:], v[i]) {
			return true
		}
	}
	return false
}
