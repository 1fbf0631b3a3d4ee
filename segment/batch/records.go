package batch

import (
	"fmt"
	"math"
)

// NoTimestamp is Kafka's "no timestamp" value (RecordBatch.NO_TIMESTAMP),
// which MaxRecordTimestamp returns for a batch without records.
const NoTimestamp int64 = -1

// The smallest encodings. A record body is at least attributes,
// timestampDelta, offsetDelta, keyLength, valueLength and headersCount of
// one byte each; a record adds its one-byte length; a header is at least a
// key length and a value length. They turn counts read off the wire into
// bounds that the bytes must meet before anything is decoded.
const (
	recordBodyMin  = 6
	recordSizeMin  = 1 + recordBodyMin
	headerEntryMin = 2
)

// RecordHeader is one header of a record. Key is never nil (Kafka rejects
// a null header key); Value is nil when null.
type RecordHeader struct {
	Key   []byte
	Value []byte
}

// Record is one record of a batch. Key and Value are nil when null and
// otherwise alias the bytes they were decoded from. The Length field of the
// wire format is not kept: it is derived from the rest when encoding.
type Record struct {
	Attributes     int8
	TimestampDelta int64
	OffsetDelta    int32
	Key            []byte
	Value          []byte
	Headers        []RecordHeader
}

// Records calls fn for each record of the batch that starts b, decompressing
// the records section first if the batch is compressed, producing at most
// limit bytes (ErrTooLarge beyond). h is the batch's header, normally from
// Validate; b may run past the batch (a file region, say) and is read only up
// to h.Size().
//
// The *Record passed to fn, and its Headers slice, are reused for the next
// record: fn must copy what it keeps. Key and Value alias b, or the
// decompressed buffer, which nothing else references and which stays valid.
// An error from fn stops the walk and is returned as it is.
//
// The records are checked as they are decoded: structure, lengths, that
// offset deltas increase and stay within lastOffsetDelta, and that exactly
// recordsCount records fill the section. A failure is ErrRecord (or
// ErrTimestamp, for a record timestamp that overflows int64), and the
// records passed to fn before it were well formed.
func Records(h Header, b []byte, limit int, fn func(*Record) error) error {
	data, err := recordsSection(h, b, limit)
	if err != nil {
		return err
	}
	var r Record
	_, err = walk(h, data, Stored, &r, fn)
	return err
}

// Timestamps bounds a batch's record timestamps, as its walk finds them:
// every record's timestamp lies in [Min, Max]. For a CreateTime batch Min is
// the smallest baseTimestamp plus timestampDelta and Max the largest, but
// never below NoTimestamp (Max is what Kafka computes as the batch's
// maxTimestamp, starting from NO_TIMESTAMP); for a LogAppendTime batch both
// are the batch's maxTimestamp (every record reads it as its own); for a
// batch without records both are NoTimestamp.
type Timestamps struct {
	Min, Max int64
}

// CheckRecords walks the records of the batch that starts b, as Records does,
// and applies the record rules of mode: under Strict, each offsetDelta must
// equal its record's index, as a producer assigns them; under Stored, offset
// deltas need only increase, since compaction leaves gaps. It returns the
// largest record timestamp, as MaxRecordTimestamp does.
//
// Validate calls this for uncompressed batches under Strict. A broker calls
// it for compressed producer batches as well (Kafka's LogValidator
// decompresses them to check every record), with limit set to what it is
// willing to inflate.
func CheckRecords(h Header, b []byte, mode Mode, limit int) (int64, error) {
	if mode != Strict && mode != Stored {
		return 0, fmt.Errorf("%w: %d", ErrMode, int(mode))
	}
	if h.Codec() == None {
		data, err := recordsSection(h, b, limit)
		if err != nil {
			return 0, err
		}
		ts, err := walk(h, data, mode, nil, nil)
		return ts.Max, err
	}
	ts, err := checkCompressed(h, b, mode, limit)
	return ts.Max, err
}

// checkCompressed walks the records of the compressed batch that starts b.
// The decompressed records are only walked, never kept: they are inflated
// into a pooled buffer.
func checkCompressed(h Header, b []byte, mode Mode, limit int) (Timestamps, error) {
	bp := getScratch()
	data, err := recordsSectionTo(h, b, *bp, limit)
	if err != nil {
		putScratch(bp, nil)
		return Timestamps{}, err
	}
	ts, err := walk(h, data, mode, nil, nil)
	putScratch(bp, data)
	return ts, err
}

// MaxRecordTimestamp returns the largest timestamp among the records of the
// batch that starts b, decompressing with at most limit bytes if needed, and
// checks the records' structure on the way. For a CreateTime batch that is
// baseTimestamp plus the largest timestampDelta: what Kafka's broker writes
// into maxTimestamp (with SetMaxTimestamp) instead of trusting the
// producer's value. For a LogAppendTime batch every record's timestamp is the
// batch's maxTimestamp, which is returned as it is. A batch without records
// yields NoTimestamp.
func MaxRecordTimestamp(h Header, b []byte, limit int) (int64, error) {
	return CheckRecords(h, b, Stored, limit)
}

// recordsSection returns the records section of the batch h that starts b,
// decompressed if the batch is compressed.
func recordsSection(h Header, b []byte, limit int) ([]byte, error) {
	return recordsSectionTo(h, b, nil, limit)
}

// recordsSectionTo is recordsSection decompressing into dst's memory when
// it is large enough.
func recordsSectionTo(h Header, b, dst []byte, limit int) ([]byte, error) {
	if h.Length < LengthMin || h.Length > LengthMax {
		return nil, fmt.Errorf("%w: batchLength %d outside [%d, %d]", ErrLength, h.Length, LengthMin, LengthMax)
	}
	size := h.Size()
	if len(b) < size {
		return nil, fmt.Errorf("%w: batch of %d bytes, %d present", ErrShort, size, len(b))
	}
	data := b[RecordsPos:size:size]
	c := h.Codec()
	switch {
	case c == None:
		return data, nil
	case !c.Valid():
		return nil, fmt.Errorf("%w: %d", ErrCodec, int(c))
	case len(data) == 0 && h.NumRecords == 0:
		// Compaction writes an emptied batch as a bare header. Kafka
		// writes it uncompressed, but nothing is lost by accepting an
		// empty section under any codec when no record is declared.
		return data, nil
	}
	out, err := decompressTo(c, dst, data, limit)
	if err != nil {
		return nil, fmt.Errorf("records of batch at offset %d: %w", h.BaseOffset, err)
	}
	return out, nil
}

// walk decodes the uncompressed records section data of the batch h, checks
// it under mode, and returns the range of its record timestamps. With fn nil it
// only checks, and does not touch r; with fn set it fills r, headers
// included, and calls fn for each record.
//
// walk needs no allocation of its own: every length is checked against the
// bytes left before it is used, the declared count is checked against what
// the bytes can hold before the first record is read, and the only slice
// that grows is r.Headers, one header per two bytes of input at most.
func walk(h Header, data []byte, mode Mode, r *Record, fn func(*Record) error) (Timestamps, error) {
	if h.NumRecords < 0 {
		return Timestamps{}, fmt.Errorf("%w: recordsCount %d", ErrCount, h.NumRecords)
	}
	count := int(h.NumRecords)
	if count > len(data)/recordSizeMin {
		return Timestamps{}, fmt.Errorf("%w: %d records declared in %d bytes", ErrRecord, count, len(data))
	}
	createTime := !h.LogAppendTime()
	minTimestamp, maxTimestamp := int64(math.MaxInt64), NoTimestamp
	if count == 0 {
		minTimestamp = NoTimestamp
	} else if !createTime {
		minTimestamp, maxTimestamp = h.MaxTimestamp, h.MaxTimestamp
	}
	prevDelta := int32(-1)
	pos := 0
	for i := 0; i < count; i++ {
		if pos == len(data) {
			return Timestamps{}, fmt.Errorf("%w: %d records declared, %d present", ErrRecord, count, i)
		}
		length, next := readVarint(data, pos)
		if next < 0 || length < recordBodyMin || int(length) > len(data)-next {
			return Timestamps{}, fmt.Errorf("%w: record %d: length %d with %d bytes left", ErrRecord, i, length, len(data)-pos)
		}
		pos = next + int(length)
		body := data[next:pos:pos]

		// body holds at least recordBodyMin bytes, so the attributes
		// byte is there.
		attributes := int8(body[0])
		timestampDelta, j := readVarlong(body, 1)
		offsetDelta, j := readVarint(body, j)
		key, j := readBytes(body, j, true)
		value, j := readBytes(body, j, true)
		numHeaders, j := readVarint(body, j)
		if j >= 0 && (numHeaders < 0 || int(numHeaders) > (len(body)-j)/headerEntryMin) {
			j = -1
		}
		if fn != nil {
			r.Headers = r.Headers[:0]
		}
		for k := 0; k < int(numHeaders) && j >= 0; k++ {
			var hk, hv []byte
			hk, j = readBytes(body, j, false)
			hv, j = readBytes(body, j, true)
			if fn != nil && j >= 0 {
				r.Headers = append(r.Headers, RecordHeader{Key: hk, Value: hv})
			}
		}
		if j < 0 {
			return Timestamps{}, fmt.Errorf("%w: record %d: malformed field", ErrRecord, i)
		}
		if j != len(body) {
			return Timestamps{}, fmt.Errorf("%w: record %d: %d bytes after its last header", ErrRecord, i, len(body)-j)
		}

		// Offset deltas. A producer numbers its records 0, 1, 2...;
		// compaction removes some, so a stored batch only keeps them
		// increasing and within lastOffsetDelta.
		if mode == Strict && offsetDelta != int32(i) {
			return Timestamps{}, fmt.Errorf("%w: record %d has offsetDelta %d", ErrRecord, i, offsetDelta)
		}
		if offsetDelta <= prevDelta || offsetDelta > h.LastOffsetDelta {
			return Timestamps{}, fmt.Errorf("%w: record %d: offsetDelta %d after %d, lastOffsetDelta %d", ErrRecord, i, offsetDelta, prevDelta, h.LastOffsetDelta)
		}
		prevDelta = offsetDelta

		if createTime {
			ts, ok := addTimestamp(h.BaseTimestamp, timestampDelta)
			if !ok {
				return Timestamps{}, fmt.Errorf("%w: record %d: baseTimestamp %d + delta %d", ErrTimestamp, i, h.BaseTimestamp, timestampDelta)
			}
			minTimestamp = min(minTimestamp, ts)
			maxTimestamp = max(maxTimestamp, ts)
		}

		if fn != nil {
			r.Attributes = attributes
			r.TimestampDelta = timestampDelta
			r.OffsetDelta = offsetDelta
			r.Key = key
			r.Value = value
			if err := fn(r); err != nil {
				return Timestamps{}, err
			}
		}
	}
	if pos != len(data) {
		return Timestamps{}, fmt.Errorf("%w: %d bytes after the %d declared records", ErrRecord, len(data)-pos, count)
	}
	return Timestamps{Min: minTimestamp, Max: maxTimestamp}, nil
}

// addTimestamp adds a record's timestamp delta to the batch's base
// timestamp, reporting false on int64 overflow.
func addTimestamp(base, delta int64) (int64, bool) {
	if (delta > 0 && base > math.MaxInt64-delta) || (delta < 0 && base < math.MinInt64-delta) {
		return 0, false
	}
	return base + delta, true
}
