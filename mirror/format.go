package mirror

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// MirrorMaker 2's record formats, so that Kafka's tooling (MirrorClient,
// RemoteClusterUtils, MirrorCheckpointTask) reads what ringlog writes.
// OffsetSync and Heartbeat use Kafka's protocol types (STRING is an int16
// length and the bytes; integers are big-endian):
//
//	OffsetSync key    | topic STRING | partition INT32 |
//	OffsetSync value  | upstreamOffset INT64 | offset (downstream) INT64 |
//	Heartbeat key     | sourceClusterAlias STRING | targetClusterAlias STRING |
//	Heartbeat value   | version INT16 (0) | timestamp INT64 (ms) |
//
// The mirror's source offsets are Kafka Connect's offset records, as the
// MirrorSourceConnector's are in mm2-offsets.<source>.internal (Connect's
// JsonConverter without schemas):
//
//	key    ["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t"}]
//	value  {"offset":41}     the last source offset mirrored; resume at 42

// ErrFormat is returned for a record that is not in MM2's format.
var ErrFormat = errors.New("mirror: malformed record")

// connectorName is the connector MM2 keys its source offsets by.
const connectorName = "MirrorSourceConnector"

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// OffsetSync says that the record at Upstream in the source partition was
// written at Downstream in the remote partition.
type OffsetSync struct {
	Topic      string // the source topic
	Partition  int32
	Upstream   int64
	Downstream int64
}

func (s OffsetSync) Key() []byte {
	b := appendString(make([]byte, 0, 2+len(s.Topic)+4), s.Topic)
	return binary.BigEndian.AppendUint32(b, uint32(s.Partition))
}

func (s OffsetSync) Value() []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(s.Upstream))
	return binary.BigEndian.AppendUint64(b, uint64(s.Downstream))
}

// reader is a sticky-error reader over bytes from outside.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || n < 0 || n > len(r.b) {
		r.bad = true
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) int16() int16 {
	if b := r.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *reader) int32() int32 {
	if b := r.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) int64() int64 {
	if b := r.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// string reads a non-null STRING (a negative length is null, which MM2's
// schemas do not allow): the length is checked against the bytes left.
func (r *reader) string() string {
	n := r.int16()
	if n < 0 {
		r.bad = true
		return ""
	}
	return string(r.take(int(n)))
}

func (r *reader) done() error {
	if r.bad {
		return ErrFormat
	}
	return nil
}

// DecodeOffsetSync reads an OffsetSync record's key and value. Kafka's
// Schema.read ignores bytes after the fields, and so does this.
func DecodeOffsetSync(key, value []byte) (OffsetSync, error) {
	k, v := reader{b: key}, reader{b: value}
	s := OffsetSync{Topic: k.string(), Partition: k.int32(), Upstream: v.int64(), Downstream: v.int64()}
	if err := k.done(); err != nil {
		return OffsetSync{}, fmt.Errorf("offset sync key: %w", err)
	}
	if err := v.done(); err != nil {
		return OffsetSync{}, fmt.Errorf("offset sync value: %w", err)
	}
	return s, nil
}

// Heartbeat is MM2's heartbeat: emitted into the target's heartbeats
// topic and mirrored onward, it traces the path records take.
type Heartbeat struct {
	SourceAlias, TargetAlias string
	TimestampMs              int64
}

func (h Heartbeat) Key() []byte {
	b := appendString(nil, h.SourceAlias)
	return appendString(b, h.TargetAlias)
}

func (h Heartbeat) Value() []byte {
	b := binary.BigEndian.AppendUint16(make([]byte, 0, 10), 0)
	return binary.BigEndian.AppendUint64(b, uint64(h.TimestampMs))
}

// DecodeHeartbeat reads a heartbeat record of version 0.
func DecodeHeartbeat(key, value []byte) (Heartbeat, error) {
	k, v := reader{b: key}, reader{b: value}
	h := Heartbeat{SourceAlias: k.string(), TargetAlias: k.string()}
	if version := v.int16(); version != 0 && !v.bad {
		return Heartbeat{}, fmt.Errorf("heartbeat value version %d: %w", version, ErrFormat)
	}
	h.TimestampMs = v.int64()
	if err := k.done(); err != nil {
		return Heartbeat{}, fmt.Errorf("heartbeat key: %w", err)
	}
	if err := v.done(); err != nil {
		return Heartbeat{}, fmt.Errorf("heartbeat value: %w", err)
	}
	return h, nil
}

// sourcePartition is MirrorUtils.wrapPartition's map.
type sourcePartition struct {
	Cluster   string `json:"cluster"`
	Partition int32  `json:"partition"`
	Topic     string `json:"topic"`
}

// OffsetKey is the Connect offset record's key for a source partition.
func OffsetKey(sourceAlias, topic string, partition int32) []byte {
	b, _ := json.Marshal([]any{connectorName, sourcePartition{sourceAlias, partition, topic}})
	return b
}

// OffsetValue is the Connect offset record's value: the last source
// offset mirrored.
func OffsetValue(offset int64) []byte {
	b, _ := json.Marshal(map[string]int64{"offset": offset})
	return b
}

// maxOffsetRecord bounds what DecodeOffset parses: a Connect offset
// record of MM2 is a few dozen bytes plus a topic name (at most 249).
const maxOffsetRecord = 4 << 10

// DecodeOffset reads a Connect offset record written by MM2 or by ringlog.
// ok is false for another connector's record (which shares the topic in
// Connect) and for a tombstone (a nil value: the offset was reset).
func DecodeOffset(key, value []byte) (sp sourcePartition, offset int64, ok bool, err error) {
	if len(key) > maxOffsetRecord || len(value) > maxOffsetRecord {
		return sp, 0, false, fmt.Errorf("offset record of %d+%d bytes: %w", len(key), len(value), ErrFormat)
	}
	var k []json.RawMessage
	if err := json.Unmarshal(key, &k); err != nil || len(k) != 2 {
		return sp, 0, false, fmt.Errorf("offset key %q: %w", key, ErrFormat)
	}
	var name string
	if err := json.Unmarshal(k[0], &name); err != nil {
		return sp, 0, false, fmt.Errorf("offset key %q: %w", key, ErrFormat)
	}
	if name != connectorName {
		return sp, 0, false, nil
	}
	if err := json.Unmarshal(k[1], &sp); err != nil || sp.Topic == "" || sp.Partition < 0 {
		return sp, 0, false, fmt.Errorf("offset key %q: %w", key, ErrFormat)
	}
	if value == nil {
		return sp, 0, false, nil
	}
	var v struct {
		Offset *float64 `json:"offset"`
	}
	if err := json.Unmarshal(value, &v); err != nil || v.Offset == nil || *v.Offset < -1 || *v.Offset > math.MaxInt64/2 || *v.Offset != math.Trunc(*v.Offset) {
		return sp, 0, false, fmt.Errorf("offset value %q: %w", value, ErrFormat)
	}
	return sp, int64(*v.Offset), true, nil
}
