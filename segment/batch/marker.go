package batch

import (
	"errors"
	"fmt"
)

// Transaction markers (KIP-98). A transaction ends on each of its
// partitions with a control batch that the broker writes for the
// transaction coordinator: attributes transactional|control, the
// producer's id and epoch, base sequence -1, and exactly one record whose
// key and value are, as Kafka's ControlRecordType and EndTransactionMarker
// write them:
//
//	key    version int16 (0) | type int16 (0 ABORT, 1 COMMIT)
//	value  version int16 (0) | coordinator epoch int32
//
// Readers accept a higher version and read the fields they know, as
// Kafka's do (a later version may only add fields at the end).

// ControlType is the type of a control record (the key's second field).
type ControlType int16

// The control record types of data partitions. Kafka's KRaft metadata log
// has others (leader change, snapshot header and footer); they never appear
// in a partition a producer writes to.
const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

// Versions written for marker keys and values.
const (
	controlKeyVersion  = 0
	markerValueVersion = 0
	controlKeySize     = 4
	markerValueSize    = 6
)

// ErrMarker means that a control batch does not hold a well-formed
// transaction marker: not exactly one record, a key or value too short or
// with a negative version, or a control type other than ABORT and COMMIT.
var ErrMarker = errors.New("batch: malformed transaction marker")

// Marker is what an end-of-transaction control record says.
type Marker struct {
	// Commit is true for a COMMIT marker, false for an ABORT.
	Commit bool
	// CoordinatorEpoch is the epoch of the transaction coordinator that
	// wrote the marker; a partition refuses markers of an older one.
	CoordinatorEpoch int32
}

// MarkerBatch appends to dst the control batch ending producerID's
// transaction, as Kafka's MemoryRecords.withEndTransactionMarker builds
// it: one record at offset delta 0, timestamp now (ms), base sequence -1,
// uncompressed. The base offset and partition leader epoch are left 0 for
// the log to assign.
func MarkerBatch(dst []byte, producerID int64, producerEpoch int16, m Marker, now int64) []byte {
	typ := ControlAbort
	if m.Commit {
		typ = ControlCommit
	}
	var key [controlKeySize]byte
	be.PutUint16(key[0:], controlKeyVersion)
	be.PutUint16(key[2:], uint16(typ))
	var value [markerValueSize]byte
	be.PutUint16(value[0:], markerValueVersion)
	be.PutUint32(value[2:], uint32(m.CoordinatorEpoch))
	h := Header{
		Attributes:    AttrTransactional | AttrControl,
		BaseTimestamp: now,
		MaxTimestamp:  now,
		ProducerID:    producerID,
		ProducerEpoch: producerEpoch,
		BaseSequence:  -1,
	}
	out, err := Build(dst, h, None, []Record{{Key: key[:], Value: value[:]}})
	if err != nil {
		// A record of ten bytes always fits a batch: Build fails only on
		// sizes and codecs, and both are fixed here.
		panic(fmt.Sprintf("batch: marker batch: %v", err))
	}
	return out
}

// ParseControlKey returns the type of a control record from its key. The
// key's version is only required to be non-negative.
func ParseControlKey(key []byte) (ControlType, error) {
	if len(key) < controlKeySize {
		return 0, fmt.Errorf("%w: control key of %d bytes", ErrMarker, len(key))
	}
	if v := int16(be.Uint16(key)); v < 0 {
		return 0, fmt.Errorf("%w: control key version %d", ErrMarker, v)
	}
	return ControlType(be.Uint16(key[2:])), nil
}

// ParseMarkerRecord decodes an end-of-transaction control record.
func ParseMarkerRecord(key, value []byte) (Marker, error) {
	typ, err := ParseControlKey(key)
	if err != nil {
		return Marker{}, err
	}
	if typ != ControlAbort && typ != ControlCommit {
		return Marker{}, fmt.Errorf("%w: control type %d", ErrMarker, typ)
	}
	if len(value) < markerValueSize {
		return Marker{}, fmt.Errorf("%w: marker value of %d bytes", ErrMarker, len(value))
	}
	if v := int16(be.Uint16(value)); v < 0 {
		return Marker{}, fmt.Errorf("%w: marker value version %d", ErrMarker, v)
	}
	return Marker{Commit: typ == ControlCommit, CoordinatorEpoch: int32(be.Uint32(value[2:]))}, nil
}

// markerLimit bounds what ParseMarker may decompress: a marker's one record
// is a few dozen bytes, and Kafka never compresses control batches.
const markerLimit = 1 << 12

// ParseMarker decodes the transaction marker of the control batch that
// starts b (h is its header, from Validate or ParseHeader; b may run past
// the batch). It fails with ErrMarker for a batch that is not a control
// batch or does not hold exactly one marker record, and with the errors of
// Records for malformed records.
func ParseMarker(h Header, b []byte) (Marker, error) {
	if !h.Control() {
		return Marker{}, fmt.Errorf("%w: attributes %#04x, not a control batch", ErrMarker, uint16(h.Attributes))
	}
	if h.NumRecords != 1 {
		return Marker{}, fmt.Errorf("%w: %d records", ErrMarker, h.NumRecords)
	}
	var m Marker
	var merr error
	err := Records(h, b, markerLimit, func(r *Record) error {
		m, merr = ParseMarkerRecord(r.Key, r.Value)
		return merr
	})
	if err != nil {
		return Marker{}, err
	}
	return m, nil
}
