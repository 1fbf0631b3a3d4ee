package group

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/segment/batch"
)

// The records of __consumer_offsets, in Kafka's formats (see doc.go), so
// that the topic can be read by Kafka's own tools and a data directory
// holds what an operator expects. Keys and values start with an int16
// version; the key's version says what the record is.
const (
	// offsetCommitKeyVersion: versions 0 and 1 are the same format; Kafka
	// writes 1.
	offsetCommitKeyVersion = 1
	// groupMetadataKeyVersion: 2 marks a group metadata record.
	groupMetadataKeyVersion = 2
	// offsetCommitValueVersion 3 carries the leader epoch (KIP-320); 1
	// carries an explicit expire timestamp (OffsetCommit v2-v4 with a
	// retention time), as Kafka writes it then.
	offsetCommitValueVersion       = 3
	offsetCommitValueVersionExpiry = 1
	// groupMetadataValueVersion 3 carries static members' instance ids
	// (KIP-345) and the state timestamp (KIP-211).
	groupMetadataValueVersion = 3
)

// record is one record to write: a nil value is a tombstone.
type record struct {
	key, value []byte
}

// committed is a committed offset as the coordinator keeps it.
type committed struct {
	offset      int64
	leaderEpoch int32 // -1: none
	metadata    string
	commitMs    int64
	// expireMs is the explicit expiry of OffsetCommit v2-v4 with a
	// retention time, -1 otherwise (then offsets.retention.minutes
	// applies, KIP-211).
	expireMs int64
	// seq is the place of the offset's record in its partition's log
	// order: the replay's count of the records it applied, then the
	// coordinator's count of its writes completed since (which complete
	// in log order). A transaction's offsets, when it commits, replace
	// only offsets written before them (Kafka compares the records' log
	// offsets, olderThan): an OffsetCommit written after a TxnOffsetCommit
	// wins over it whatever the order of the marker.
	seq uint64
}

// newerThan reports whether c was written after old (see seq).
func (c committed) newerThan(old committed) bool { return c.seq > old.seq }

func offsetKey(groupID string, tp engine.TP) []byte {
	k := kmsg.OffsetCommitKey{Version: offsetCommitKeyVersion, Group: groupID, Topic: tp.Topic, Partition: tp.Partition}
	return k.AppendTo(nil)
}

func offsetValue(c committed) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetCommitValueVersion
	if c.expireMs >= 0 {
		v.Version = offsetCommitValueVersionExpiry
		v.ExpireTimestamp = c.expireMs
	}
	v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = c.offset, c.leaderEpoch, c.metadata, c.commitMs
	return v.AppendTo(nil)
}

func groupKey(groupID string) []byte {
	k := kmsg.GroupMetadataKey{Version: groupMetadataKeyVersion, Group: groupID}
	return k.AppendTo(nil)
}

// groupValue encodes g's state with the given assignments (by member id;
// a member missing from it has an empty assignment).
func groupValue(g *group, assignment map[string][]byte) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupMetadataValueVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	v.Protocol = g.protocol
	if g.leader != "" {
		leader := g.leader
		v.Leader = &leader
	}
	v.CurrentStateTimestamp = g.stateMs
	for _, m := range g.members {
		mv := kmsg.NewGroupMetadataValueMember()
		mv.MemberID, mv.InstanceID, mv.ClientID, mv.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		mv.RebalanceTimeoutMillis = int32(m.rebalanceTimeout / time.Millisecond)
		mv.SessionTimeoutMillis = int32(m.sessionTimeout / time.Millisecond)
		if g.protocol != nil {
			mv.Subscription = m.metadataFor(*g.protocol)
		}
		mv.Assignment = assignment[m.id]
		if mv.Assignment == nil {
			mv.Assignment = []byte{}
		}
		if mv.Subscription == nil {
			mv.Subscription = []byte{}
		}
		v.Members = append(v.Members, mv)
	}
	return v.AppendTo(nil)
}

// batchTarget is the size at which records are split into several
// batches: every batch must stay below the topic's max.message.bytes
// (1 MiB by default), and expiry or a group deletion may write thousands
// of tombstones at once.
const batchTarget = 256 << 10

// buildBatches encodes records into uncompressed RecordBatch v2 batches
// with no producer id, as the coordinator writes them, concatenated (one
// append carries them all). A batch is cut when it passes batchTarget, so
// one record larger than that makes a batch of its own, which the log
// refuses if it exceeds max.message.bytes.
func buildBatches(recs []record, now time.Time) ([]byte, error) {
	ms := now.UnixMilli()
	var out []byte
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) && (n == 0 || size < batchTarget) {
			size += len(recs[n].key) + len(recs[n].value) + 32
			n++
		}
		rs := make([]batch.Record, n)
		for i := range rs {
			rs[i] = batch.Record{OffsetDelta: int32(i), Key: recs[i].key, Value: recs[i].value}
		}
		h := batch.Header{
			PartitionLeaderEpoch: -1,
			LastOffsetDelta:      int32(n - 1),
			BaseTimestamp:        ms,
			MaxTimestamp:         ms,
			ProducerID:           -1,
			ProducerEpoch:        -1,
			BaseSequence:         -1,
		}
		var err error
		if out, err = batch.Build(out, h, batch.None, rs); err != nil {
			return nil, err
		}
		recs = recs[n:]
	}
	return out, nil
}

// errRecord marks a record of __consumer_offsets that cannot be decoded.
var errRecord = errors.New("group: undecodable __consumer_offsets record")

// maxInflate bounds what replaying one compressed batch may decompress.
const maxInflate = 64 << 20

// replayBatch applies the records of one stored batch to st. Control
// batches (transaction markers) carry no group state. A record that does
// not decode is reported and skipped: one bad record (a client produced
// to the topic, say) must not make every group of the partition
// unavailable.
func replayBatch(b []byte, st *loadState) error {
	h, err := batch.Validate(b, batch.Stored)
	if err != nil {
		return fmt.Errorf("%w: %w", errRecord, err)
	}
	if h.Control() {
		// A transaction marker settles its producer's offset commits
		// (TxnOffsetCommit) found before it; other control batches carry
		// nothing for groups.
		if h.ProducerID >= 0 {
			if m, err := batch.ParseMarker(h, b); err == nil {
				st.endTxn(h.ProducerID, m.Commit)
			}
		}
		return nil
	}
	st.txnPID = -1
	if h.Transactional() && h.ProducerID >= 0 {
		st.txnPID = h.ProducerID
	}
	return batch.Records(h, b, maxInflate, func(r *batch.Record) error {
		if err := st.apply(r.Key, r.Value); err != nil {
			st.bad++
			st.lastErr = err
		}
		return nil
	})
}

// loadState is what replaying a partition of __consumer_offsets builds:
// the last value of every key, as compaction would leave it.
type loadState struct {
	offsets map[string]map[engine.TP]committed
	// pendingTxn are the transactional offset commits whose marker the
	// replay has not met yet, by producer id, then group; txnPID is the
	// producer of the transactional batch being replayed (-1: none).
	pendingTxn map[int64]map[string]map[engine.TP]committed
	txnPID     int64
	groups     map[string]*kmsg.GroupMetadataValue
	consumers  map[string]*consumerLoad // KIP-848 groups (records848.go)
	bad        int
	lastErr    error
	// seq counts the offset records applied (committed.seq).
	seq uint64
}

func newLoadState() *loadState {
	return &loadState{offsets: map[string]map[engine.TP]committed{}, groups: map[string]*kmsg.GroupMetadataValue{},
		pendingTxn: map[int64]map[string]map[engine.TP]committed{}, txnPID: -1,
		consumers: map[string]*consumerLoad{}}
}

// apply records one key and value (nil: a tombstone).
func (st *loadState) apply(key, value []byte) error {
	if len(key) < 2 {
		return fmt.Errorf("%w: key of %d bytes", errRecord, len(key))
	}
	switch version := int16(key[0])<<8 | int16(key[1]); version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("%w: offset commit key: %w", errRecord, err)
		}
		tp := engine.TP{Topic: k.Topic, Partition: k.Partition}
		if value == nil {
			if m := st.offsets[k.Group]; m != nil {
				delete(m, tp)
				if len(m) == 0 {
					delete(st.offsets, k.Group)
				}
			}
			return nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(value); err != nil {
			return fmt.Errorf("%w: offset commit value: %w", errRecord, err)
		}
		st.seq++
		c := committed{offset: v.Offset, leaderEpoch: -1, metadata: v.Metadata, commitMs: v.CommitTimestamp, expireMs: -1, seq: st.seq}
		if v.Version >= 3 {
			c.leaderEpoch = v.LeaderEpoch
		}
		if v.Version == 1 {
			c.expireMs = v.ExpireTimestamp
		}
		offsets := st.offsets
		if st.txnPID >= 0 {
			// Written by TxnOffsetCommit: visible once its COMMIT marker
			// comes, dropped by an ABORT.
			if offsets = st.pendingTxn[st.txnPID]; offsets == nil {
				offsets = map[string]map[engine.TP]committed{}
				st.pendingTxn[st.txnPID] = offsets
			}
		}
		m := offsets[k.Group]
		if m == nil {
			m = map[engine.TP]committed{}
			offsets[k.Group] = m
		}
		m[tp] = c
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("%w: group metadata key: %w", errRecord, err)
		}
		if value == nil {
			delete(st.groups, k.Group)
			return nil
		}
		// The group is a classic group from here on, whatever it was.
		delete(st.consumers, k.Group)
		v := new(kmsg.GroupMetadataValue)
		if err := v.ReadFrom(value); err != nil {
			return fmt.Errorf("%w: group metadata value: %w", errRecord, err)
		}
		// The decoded bytes alias the log's read buffer, which is reused.
		for i := range v.Members {
			v.Members[i].Subscription = bytes.Clone(v.Members[i].Subscription)
			v.Members[i].Assignment = bytes.Clone(v.Members[i].Assignment)
		}
		st.groups[k.Group] = v
	case consumerGroupMetadataKey, consumerPartitionMetadata, consumerMemberMetadataKey,
		consumerTargetMetadataKey, consumerTargetMemberKey, consumerCurrentAssignmentKy:
		return st.applyConsumer(key, value)
	default:
		// Later types are share and streams groups' records, and Kafka's
		// ConsumerGroupRegularExpression (16), which ringlog recomputes.
	}
	return nil
}

// endTxn applies a marker of producer pid met by the replay: a COMMIT
// makes its pending offsets committed, an ABORT drops them.
func (st *loadState) endTxn(pid int64, commit bool) {
	pending := st.pendingTxn[pid]
	delete(st.pendingTxn, pid)
	if !commit {
		return
	}
	for g, offs := range pending {
		m := st.offsets[g]
		if m == nil {
			m = map[engine.TP]committed{}
			st.offsets[g] = m
		}
		for tp, c := range offs {
			if old, ok := m[tp]; !ok || c.newerThan(old) {
				m[tp] = c
			}
		}
	}
}
