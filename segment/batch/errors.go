package batch

import "errors"

// The sentinel errors of the package. Every error returned by a function of
// this package wraps exactly one of them (with %w), so that callers can tell
// them apart with errors.Is and map them to Kafka error codes.
//
// The split follows Kafka's own exceptions. A batch whose bytes do not hold
// together (ErrShort, ErrLength, ErrMagic, ErrCRC) is what Kafka calls a
// CorruptRecordException: the produce response carries CORRUPT_MESSAGE, and
// during recovery the log is cut at that batch. A batch whose bytes are intact
// (the CRC matches) but whose content breaks a rule (ErrCount, ErrOffset,
// ErrCodec, ErrRecord, ErrTimestamp, ErrControl, ErrSequence) is an
// InvalidRecordException: the producer wrote it that way, the answer is
// INVALID_RECORD, and retrying cannot help.
var (
	// ErrShort means that fewer bytes are present than the format or the
	// batch's own length field needs. At the end of a log file this is the
	// signature of a torn write; elsewhere it is corruption.
	ErrShort = errors.New("batch: short buffer")

	// ErrLength means that the batchLength field is outside what a batch can
	// be, or that the buffer holds bytes after the batch it declares.
	ErrLength = errors.New("batch: bad batch length")

	// ErrMagic means that the magic byte is not 2. Message sets of magic 0
	// and 1 (Kafka before 0.11) are not supported.
	ErrMagic = errors.New("batch: unsupported magic")

	// ErrCRC means that the CRC-32C stored in the header does not match the
	// bytes it covers.
	ErrCRC = errors.New("batch: CRC mismatch")

	// ErrCount means that recordsCount and lastOffsetDelta disagree, or that
	// one of them is out of range.
	ErrCount = errors.New("batch: inconsistent record count")

	// ErrOffset means that the offsets of a stored batch are out of range:
	// a negative baseOffset, or a last offset that overflows int64.
	ErrOffset = errors.New("batch: offset out of range")

	// ErrCodec means that the compression bits of the attributes name no
	// known codec (5, 6 or 7).
	ErrCodec = errors.New("batch: unknown compression codec")

	// ErrDecompress means that the records section of a compressed batch is
	// not a valid stream of its codec.
	ErrDecompress = errors.New("batch: malformed compressed records")

	// ErrTooLarge means that decompressing would produce more bytes than the
	// caller allowed, or that a batch to encode would not fit the format.
	ErrTooLarge = errors.New("batch: too large")

	// ErrRecord means that the records section is malformed: a bad varint, a
	// length running past its record, a record count that differs from the
	// header's, offset deltas out of order, or bytes after the last record.
	ErrRecord = errors.New("batch: malformed record")

	// ErrTimestamp means that a record's timestamp (baseTimestamp plus its
	// delta) does not fit in an int64.
	ErrTimestamp = errors.New("batch: timestamp out of range")

	// ErrControl means that a producer sent a control batch. Only the broker
	// writes control batches (transaction markers), as in Kafka.
	ErrControl = errors.New("batch: control batch from a producer")

	// ErrSequence means that a producer batch carries a producer ID but no
	// base sequence, which Kafka rejects in the same way.
	ErrSequence = errors.New("batch: producer ID without a base sequence")

	// ErrMode means that a caller passed a Mode value that does not exist.
	ErrMode = errors.New("batch: unknown validation mode")
)
