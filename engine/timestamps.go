package engine

import (
	"errors"
	"fmt"
	"strings"

	"ringlog/segment/batch"
)

// RecordError names one record of a refused batch: its index in the batch
// and why (Produce's record_errors, KIP-467).
type RecordError struct {
	BatchIndex int32
	Message    string
}

// RecordsError is an append refused for some of its records: Err is the
// sentinel that says why (ErrInvalidTimestamp), Records each record at
// fault, in batch order. errors.Is(err, Err) holds.
type RecordsError struct {
	Err     error
	Records []RecordError
}

func (e *RecordsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %d record(s)", e.Err, len(e.Records))
	for i, r := range e.Records {
		if i == 3 {
			b.WriteString(", ...")
			break
		}
		fmt.Fprintf(&b, "; record %d: %s", r.BatchIndex, r.Message)
	}
	return b.String()
}

func (e *RecordsError) Unwrap() error { return e.Err }

// AsRecordsError returns the RecordsError in err's chain, if any.
func AsRecordsError(err error) (*RecordsError, bool) {
	var re *RecordsError
	ok := errors.As(err, &re)
	return re, ok
}

// checkTimestamps applies the topic's timestamp rules to each record of a
// producer batch h (b holds it; ts bounds its record timestamps, from the
// walk of batch.ValidateProduced), the rules of Kafka's
// LogValidator.validateTimestamp:
//
//   - on a CreateTime topic, a record with a timestamp (not -1) must lie
//     within message.timestamp.before.max.ms before nowMs and
//     message.timestamp.after.max.ms after it; the differences are taken
//     in wrapping int64 arithmetic, as Java takes them, so that the
//     unbounded default (Long.MAX_VALUE) never refuses;
//   - otherwise a batch whose attributes claim LogAppendTime is refused:
//     that timestamp type is the broker's to set.
//
// A record of a LogAppendTime batch reads the batch's max timestamp as its
// own. Every offending record is named (INVALID_TIMESTAMP with
// record_errors), not only the first: the producer learns which records
// of the batch were at fault. The records are walked again (a compressed
// batch inflated again) only when ts does not show every record within
// both bounds, so that the common case costs no second walk: before, the
// second walk of every uncompressed batch was a third of validation's CPU.
func checkTimestamps(cfg *TopicConfig, h batch.Header, b []byte, ts batch.Timestamps, nowMs int64) error {
	createTime := !cfg.LogAppendTime
	bad := func(ts int64) bool {
		return createTime && ts != batch.NoTimestamp && (nowMs-ts > cfg.TimestampBeforeMaxMs || ts-nowMs > cfg.TimestampAfterMaxMs)
	}
	window := func() string {
		return fmt.Sprintf("The timestamp should be within [%d, %d]", nowMs-cfg.TimestampBeforeMaxMs, nowMs+cfg.TimestampAfterMaxMs)
	}
	var errs []RecordError
	if h.LogAppendTime() {
		// Every record's timestamp is the batch's max timestamp.
		ts := h.MaxTimestamp
		var msg string
		switch {
		case createTime && ts != batch.NoTimestamp:
			if !bad(ts) {
				return nil
			}
			msg = fmt.Sprintf("Timestamp %d of message with offset %%d is out of range. %s", ts, window())
		default:
			msg = "Invalid timestamp type of message with offset %d. Producer should not set timestamp type to LogAppendTime."
		}
		for i := range h.NumRecords {
			errs = append(errs, RecordError{BatchIndex: i, Message: fmt.Sprintf(msg, h.BaseOffset+int64(i))})
		}
		return &RecordsError{Err: ErrInvalidTimestamp, Records: errs}
	}
	if !createTime {
		return nil
	}
	if inWindow(ts.Min, nowMs, cfg) && inWindow(ts.Max, nowMs, cfg) {
		return nil
	}
	i := int32(0)
	err := batch.Records(h, b, maxDecompressed, func(r *batch.Record) error {
		// The walk checked that base + delta does not overflow.
		if ts := h.BaseTimestamp + r.TimestampDelta; bad(ts) {
			errs = append(errs, RecordError{BatchIndex: i, Message: fmt.Sprintf(
				"Timestamp %d of message with offset %d is out of range. %s", ts, h.BaseOffset+int64(r.OffsetDelta), window())})
		}
		i++
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTimestamp, err)
	}
	if len(errs) > 0 {
		return &RecordsError{Err: ErrInvalidTimestamp, Records: errs}
	}
	return nil
}

// inWindow reports whether ts lies within [nowMs - before, nowMs + after]
// with no arithmetic wrapping on the way. Then so does every timestamp
// between two such bounds, and none of them is refused. Java's wrapping
// subtraction can refuse a timestamp far from nowMs that a bound as large
// as Long.MAX_VALUE seems to allow (a record at Long.MIN_VALUE + 5 is
// "after" nowMs by that measure), so a bound that wraps proves nothing and
// sends the batch to the record walk, which applies Java's arithmetic to
// each record.
func inWindow(ts, nowMs int64, cfg *TopicConfig) bool {
	before, after := cfg.TimestampBeforeMaxMs, cfg.TimestampAfterMaxMs
	if before < 0 || after < 0 {
		return false
	}
	d := ts - nowMs
	if (ts >= 0) != (nowMs >= 0) && (d >= 0) != (ts >= 0) {
		return false // ts - nowMs overflowed
	}
	return d >= -before && d <= after
}
