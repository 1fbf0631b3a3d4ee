package batch

import (
	"fmt"
	"math"
)

// Mode selects the rules Validate applies. A batch's origin decides which
// rules hold: a producer must send a batch as Kafka's clients build it, while
// a batch read back from the log may have been reshaped by compaction.
type Mode int

const (
	// Strict is for a batch that a producer sent. It must hold at least
	// one record, lastOffsetDelta must be recordsCount-1, the codec must
	// be known, it must not be a control batch, and a producer ID must
	// come with a base sequence: the checks of Kafka's LogValidator for
	// client appends. An uncompressed batch also has its records walked
	// (see CheckRecords); a compressed one is left to CheckRecords, which
	// needs a decompression limit. Strict is the zero value, so that a
	// forgotten mode errs on the safe side.
	Strict Mode = iota

	// Stored is for a batch read back from our own log: during recovery
	// after a crash, and for batches a follower copies from its leader.
	// Compaction removes records but keeps lastOffsetDelta (so that the
	// offsets of later batches do not move) and may leave a batch with no
	// records at all, so recordsCount may be anything from 0 to
	// lastOffsetDelta+1. Control batches are normal here. The records are
	// not walked: recovery reads whole segments and the CRC already
	// vouches for bytes this broker validated when it wrote them.
	Stored
)

// String names the mode for error messages and logs.
func (m Mode) String() string {
	switch m {
	case Strict:
		return "strict"
	case Stored:
		return "stored"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Validate checks that b is exactly one well-formed batch under the rules of
// mode, CRC included, and returns its header. It never modifies b.
//
// The size checks come first, then the CRC, then the rules about content.
// The order matters to callers: when the CRC does not match, the other header
// fields are noise and the only true statement is ErrCRC; once it matches, an
// ErrCount or ErrRecord is a faithful report of what the producer wrote.
func Validate(b []byte, mode Mode) (Header, error) {
	return validate(b, mode, Checksum)
}

// ValidateSum is Validate for a batch whose Checksum is known (CopySum):
// sum is compared with the CRC the batch carries.
func ValidateSum(b []byte, mode Mode, sum uint32) (Header, error) {
	return validate(b, mode, func([]byte) uint32 { return sum })
}

func validate(b []byte, mode Mode, checksum func([]byte) uint32) (Header, error) {
	if mode != Strict && mode != Stored {
		return Header{}, fmt.Errorf("%w: %d", ErrMode, int(mode))
	}
	h, err := ParseHeader(b)
	if err != nil {
		return Header{}, err
	}
	if err := checkFrame(h, b, checksum); err != nil {
		return Header{}, err
	}
	if mode == Stored {
		if err := checkStored(h); err != nil {
			return Header{}, err
		}
		return h, nil
	}
	if err := checkStrict(h); err != nil {
		return Header{}, err
	}
	if h.Codec() == None {
		if _, err := walk(h, b[RecordsPos:], Strict, nil, nil); err != nil {
			return Header{}, err
		}
	}
	return h, nil
}

// ValidateProduced is Validate under Strict followed, for a compressed
// batch, by CheckRecords under Strict with limit: every check a broker makes
// of a producer's batch, each record walked exactly once, compressed or not.
// It also returns the bounds of the records' timestamps found on that walk,
// so that the broker's timestamp rules (message.timestamp.before.max.ms and
// after.max.ms) need no second walk when the bounds satisfy them.
func ValidateProduced(b []byte, limit int) (Header, Timestamps, error) {
	return validateProduced(b, limit, Checksum)
}

// ValidateProducedSum is ValidateProduced for a batch whose Checksum is
// known (CopySum): sum is compared with the CRC the batch carries.
func ValidateProducedSum(b []byte, limit int, sum uint32) (Header, Timestamps, error) {
	return validateProduced(b, limit, func([]byte) uint32 { return sum })
}

func validateProduced(b []byte, limit int, checksum func([]byte) uint32) (Header, Timestamps, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return Header{}, Timestamps{}, err
	}
	if err := checkFrame(h, b, checksum); err != nil {
		return Header{}, Timestamps{}, err
	}
	if err := checkStrict(h); err != nil {
		return Header{}, Timestamps{}, err
	}
	var ts Timestamps
	if h.Codec() == None {
		ts, err = walk(h, b[RecordsPos:], Strict, nil, nil)
	} else {
		ts, err = checkCompressed(h, b, Strict, limit)
	}
	if err != nil {
		return Header{}, Timestamps{}, err
	}
	return h, ts, nil
}

// checkFrame applies Validate's checks common to every mode, in its order:
// the size, then the CRC, then the codec.
func checkFrame(h Header, b []byte, checksum func([]byte) uint32) error {
	if size := h.Size(); len(b) < size {
		return fmt.Errorf("%w: batch of %d bytes, %d present", ErrShort, size, len(b))
	} else if len(b) > size {
		return fmt.Errorf("%w: %d bytes after a batch of %d", ErrLength, len(b)-size, size)
	}
	if crc := checksum(b); crc != h.CRC {
		return fmt.Errorf("%w: stored %#08x, computed %#08x", ErrCRC, h.CRC, crc)
	}
	if c := h.Codec(); !c.Valid() {
		return fmt.Errorf("%w: %d", ErrCodec, int(c))
	}
	return nil
}

// checkStrict applies the header rules for a batch from a producer; they are
// those of Kafka's LogValidator.validateBatch for client appends.
func checkStrict(h Header) error {
	if h.NumRecords < 1 {
		return fmt.Errorf("%w: recordsCount %d, a producer batch needs at least one record", ErrCount, h.NumRecords)
	}
	if h.LastOffsetDelta != h.NumRecords-1 {
		return fmt.Errorf("%w: lastOffsetDelta %d with recordsCount %d", ErrCount, h.LastOffsetDelta, h.NumRecords)
	}
	if h.Control() {
		return fmt.Errorf("%w: attributes %#04x", ErrControl, uint16(h.Attributes))
	}
	// An idempotent producer numbers its batches; a batch with a producer
	// ID but no sequence would defeat the duplicate check (KIP-98).
	if h.ProducerID >= 0 && h.BaseSequence < 0 {
		return fmt.Errorf("%w: producerId %d, baseSequence %d", ErrSequence, h.ProducerID, h.BaseSequence)
	}
	return nil
}

// checkStored applies the header rules for a batch read back from the log.
func checkStored(h Header) error {
	if h.NumRecords < 0 {
		return fmt.Errorf("%w: recordsCount %d", ErrCount, h.NumRecords)
	}
	// lastOffsetDelta >= 0 holds even for an emptied batch, because
	// compaction keeps the delta of the batch it emptied, and that batch
	// had a record. It is what guarantees that NextOffset moves forward, so
	// that a reader walking the log by NextOffset cannot loop.
	if h.LastOffsetDelta < 0 || h.LastOffsetDelta < h.NumRecords-1 {
		return fmt.Errorf("%w: lastOffsetDelta %d with recordsCount %d", ErrCount, h.LastOffsetDelta, h.NumRecords)
	}
	// Offsets in the log are assigned by the broker from 0 upwards, and
	// NextOffset must be representable.
	if h.BaseOffset < 0 || h.BaseOffset > math.MaxInt64-1-int64(h.LastOffsetDelta) {
		return fmt.Errorf("%w: baseOffset %d, lastOffsetDelta %d", ErrOffset, h.BaseOffset, h.LastOffsetDelta)
	}
	return nil
}
