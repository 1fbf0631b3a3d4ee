package segment

import "errors"

// Sentinel errors. A torn tail (an append cut short by a crash) is
// repaired silently on open; corruption (an invalid batch with valid data
// after it) is ErrCorrupt and stops the log from opening, because cutting
// there would silently drop acknowledged records.
var (
	ErrConfig       = errors.New("segment: invalid config")
	ErrCorrupt      = errors.New("segment: corrupt log")
	ErrOutOfRange   = errors.New("segment: offset out of range")
	ErrBatchTooBig  = errors.New("segment: batch larger than max.message.bytes")
	ErrInvalidBatch = errors.New("segment: invalid batch")
	ErrOffsetOrder  = errors.New("segment: batch offsets not after the log end offset")
	ErrPending      = errors.New("segment: an append is already in flight")
	ErrFailed       = errors.New("segment: log failed and must be reopened")
	ErrClosed       = errors.New("segment: log closed")
	ErrEmpty        = errors.New("segment: no batches to append")
)
