package batch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Positions of the header fields, in bytes from the start of the batch. The
// names follow Kafka's DefaultRecordBatch (BASE_OFFSET_OFFSET and so on); the
// Pos suffix avoids confusing a byte position with a Kafka offset.
const (
	BaseOffsetPos           = 0
	LengthPos               = 8
	PartitionLeaderEpochPos = 12
	MagicPos                = 16
	CRCPos                  = 17
	AttributesPos           = 21
	LastOffsetDeltaPos      = 23
	BaseTimestampPos        = 27
	MaxTimestampPos         = 35
	ProducerIDPos           = 43
	ProducerEpochPos        = 51
	BaseSequencePos         = 53
	NumRecordsPos           = 57
	RecordsPos              = 61
)

const (
	// LengthPrefix is the size of the two fields that precede the part of
	// the batch counted by batchLength: baseOffset and batchLength itself.
	// Kafka calls it LOG_OVERHEAD.
	LengthPrefix = 12

	// HeaderSize is the size of the fixed header; the records start here.
	HeaderSize = 61

	// MagicV2 is the only magic this package reads or writes.
	MagicV2 int8 = 2

	// LengthMin is the smallest valid batchLength: a header with no records.
	LengthMin = HeaderSize - LengthPrefix

	// SizeMax bounds the whole batch (LengthPrefix + batchLength). Kafka's
	// hard limit is 2 GiB, because segment file positions are int32; a real
	// limit (message.max.bytes, the frame size) is far lower and is the
	// caller's to apply. 1 GiB keeps a garbage length field found during
	// recovery from sending a reader gigabytes ahead, and keeps every size
	// and position arithmetic of the log far from int32 overflow.
	SizeMax = 1 << 30

	// LengthMax is the largest batchLength that ParseHeader accepts.
	LengthMax = SizeMax - LengthPrefix
)

// Bits of the attributes field.
const (
	// AttrCodecMask selects the compression codec (bits 0 to 2).
	AttrCodecMask = 0x07
	// AttrLogAppendTime is the timestamp type: set, the broker's append
	// time; clear, the producer's create time.
	AttrLogAppendTime = 0x08
	// AttrTransactional marks a batch written inside a transaction (KIP-98).
	AttrTransactional = 0x10
	// AttrControl marks a control batch: its one record is a transaction
	// marker, not user data (KIP-98).
	AttrControl = 0x20
	// AttrDeleteHorizon means baseTimestamp holds the delete horizon set by
	// log compaction for tombstones and markers (KIP-534).
	AttrDeleteHorizon = 0x40
)

// castagnoli is the CRC-32C table. hash/crc32 recognises this polynomial and
// uses the SSE4.2 or ARMv8 CRC instructions when the CPU has them, which is
// what makes CRC checking cheap enough to do on every produce and recovery.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// be is the byte order of every fixed-width field in the format.
var be = binary.BigEndian

// Header is the fixed 61-byte header of a RecordBatch, field by field as on
// the wire. Length is batchLength, the number of bytes after that field.
type Header struct {
	BaseOffset           int64
	Length               int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Size is the size of the whole batch in bytes, header included.
func (h Header) Size() int { return LengthPrefix + int(h.Length) }

// LastOffset is the offset of the last record the batch covers. After
// compaction the record with this offset may be gone; the batch keeps
// covering it so that the next batch's offsets stay where they were.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset that follows the batch: the log end offset after
// appending it.
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Codec is the compression codec of the records section.
func (h Header) Codec() Codec { return Codec(h.Attributes & AttrCodecMask) }

// LogAppendTime reports whether the timestamps are the broker's append time
// (timestampType 1) rather than the producer's create time.
func (h Header) LogAppendTime() bool { return h.Attributes&AttrLogAppendTime != 0 }

// Transactional reports whether the batch was written inside a transaction.
func (h Header) Transactional() bool { return h.Attributes&AttrTransactional != 0 }

// Control reports whether the batch holds a control record (a commit or
// abort marker) rather than user records.
func (h Header) Control() bool { return h.Attributes&AttrControl != 0 }

// HasDeleteHorizon reports whether baseTimestamp is the delete horizon that
// compaction set (KIP-534) rather than the first record's timestamp.
func (h Header) HasDeleteHorizon() bool { return h.Attributes&AttrDeleteHorizon != 0 }

// ParseHeader decodes the header at the start of b. It checks only what the
// header alone can tell: the magic and that batchLength is within
// [LengthMin, LengthMax]. It does not look at the CRC or at the records, and
// b may be shorter or longer than the batch it starts, so that a reader can
// walk the batches of a file by their headers alone (the fetch path does
// this to find a byte range) and learn how many bytes to read next.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, a header needs %d", ErrShort, len(b), HeaderSize)
	}
	// The magic is checked first: message sets of magic 0 and 1 have a
	// different layout, and their length would be judged by the wrong rule.
	if m := int8(b[MagicPos]); m != MagicV2 {
		return Header{}, fmt.Errorf("%w: magic %d", ErrMagic, m)
	}
	h := Header{
		BaseOffset:           int64(be.Uint64(b[BaseOffsetPos:])),
		Length:               int32(be.Uint32(b[LengthPos:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[PartitionLeaderEpochPos:])),
		Magic:                MagicV2,
		CRC:                  be.Uint32(b[CRCPos:]),
		Attributes:           int16(be.Uint16(b[AttributesPos:])),
		LastOffsetDelta:      int32(be.Uint32(b[LastOffsetDeltaPos:])),
		BaseTimestamp:        int64(be.Uint64(b[BaseTimestampPos:])),
		MaxTimestamp:         int64(be.Uint64(b[MaxTimestampPos:])),
		ProducerID:           int64(be.Uint64(b[ProducerIDPos:])),
		ProducerEpoch:        int16(be.Uint16(b[ProducerEpochPos:])),
		BaseSequence:         int32(be.Uint32(b[BaseSequencePos:])),
		NumRecords:           int32(be.Uint32(b[NumRecordsPos:])),
	}
	if h.Length < LengthMin || h.Length > LengthMax {
		return Header{}, fmt.Errorf("%w: batchLength %d outside [%d, %d]", ErrLength, h.Length, LengthMin, LengthMax)
	}
	return h, nil
}

// AppendHeader appends the 61 header bytes of h to dst, every field verbatim:
// Length and CRC are written as they are in h, not computed. Encode is the
// function that computes them.
func AppendHeader(dst []byte, h Header) []byte {
	dst = be.AppendUint64(dst, uint64(h.BaseOffset))
	dst = be.AppendUint32(dst, uint32(h.Length))
	dst = be.AppendUint32(dst, uint32(h.PartitionLeaderEpoch))
	dst = append(dst, byte(h.Magic))
	dst = be.AppendUint32(dst, h.CRC)
	dst = be.AppendUint16(dst, uint16(h.Attributes))
	dst = be.AppendUint32(dst, uint32(h.LastOffsetDelta))
	dst = be.AppendUint64(dst, uint64(h.BaseTimestamp))
	dst = be.AppendUint64(dst, uint64(h.MaxTimestamp))
	dst = be.AppendUint64(dst, uint64(h.ProducerID))
	dst = be.AppendUint16(dst, uint16(h.ProducerEpoch))
	dst = be.AppendUint32(dst, uint32(h.BaseSequence))
	dst = be.AppendUint32(dst, uint32(h.NumRecords))
	return dst
}

// Checksum computes the CRC-32C of a whole batch as Kafka does: over the
// bytes from the attributes to the end of b. The caller passes exactly one
// batch; a b shorter than the header has no CRC range and yields 0.
func Checksum(b []byte) uint32 {
	if len(b) < AttributesPos {
		return 0
	}
	return crc32.Checksum(b[AttributesPos:], castagnoli)
}

// copySumChunk is how much CopySum copies before it sums: a chunk the
// first level cache holds, so that the sum reads what the copy just read.
const copySumChunk = 32 << 10

// CopySum copies src into dst (as copy does) and returns the Checksum of
// what it copied, summed a chunk at a time over the source just after the
// chunk's copy read it. src, read once, may be far from the processor's
// caches (a produce request read from the socket megabytes earlier):
// copied and then summed whole, a large batch would be read from memory
// twice. dst is written around the caches where the processor allows it
// (streamCopy): CopySum is for a destination that is written out (a
// direct write's staging buffer), not read again soon; checks of the
// copied bytes read src, which the copy left in the caches.
func CopySum(dst, src []byte) (int, uint32) {
	n := min(len(dst), len(src))
	var sum uint32
	for at := 0; at < n; at += copySumChunk {
		end := min(at+copySumChunk, n)
		streamCopy(dst[at:end], src[at:end])
		if end > AttributesPos {
			sum = crc32.Update(sum, castagnoli, src[max(at, AttributesPos):end])
		}
	}
	return n, sum
}
