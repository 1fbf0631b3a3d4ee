package batch

import "fmt"

// AppendRecord appends r to dst in the wire format, the length prefix
// included, and returns the extended slice. A nil Key or Value is written as
// null; a nil header key as the empty string, since header keys cannot be
// null.
func AppendRecord(dst []byte, r *Record) []byte {
	dst = appendVarint(dst, int32(recordBodyLen(r)))
	dst = append(dst, byte(r.Attributes))
	dst = appendVarlong(dst, r.TimestampDelta)
	dst = appendVarint(dst, r.OffsetDelta)
	dst = appendBytes(dst, r.Key)
	dst = appendBytes(dst, r.Value)
	dst = appendVarint(dst, int32(len(r.Headers)))
	for i := range r.Headers {
		hd := &r.Headers[i]
		dst = appendVarint(dst, int32(len(hd.Key)))
		dst = append(dst, hd.Key...)
		dst = appendBytes(dst, hd.Value)
	}
	return dst
}

// recordBodyLen is the size of r's encoding after its length prefix. It is
// computed up front so that the record is written in one pass, without
// encoding the body twice or moving it.
func recordBodyLen(r *Record) int {
	n := 1 + uvarintLen(zigzag64(r.TimestampDelta)) + uvarintLen(zigzag32(r.OffsetDelta)) +
		bytesLen(r.Key) + bytesLen(r.Value) + uvarintLen(zigzag32(int32(len(r.Headers))))
	for i := range r.Headers {
		hd := &r.Headers[i]
		n += uvarintLen(zigzag32(int32(len(hd.Key)))) + len(hd.Key) + bytesLen(hd.Value)
	}
	return n
}

// Encode appends a whole batch to dst: the header h followed by records, the
// already encoded (and, if h's attributes say so, compressed) records
// section. It sets Magic and computes Length and CRC; every other field is
// written as h has it, so the caller keeps NumRecords, LastOffsetDelta and
// the codec bits consistent with records. It fails with ErrTooLarge when the
// batch would exceed SizeMax.
func Encode(dst []byte, h Header, records []byte) ([]byte, error) {
	if len(records) > SizeMax-HeaderSize {
		return dst, fmt.Errorf("%w: records section of %d bytes, a batch holds %d", ErrTooLarge, len(records), SizeMax-HeaderSize)
	}
	start := len(dst)
	h.Magic = MagicV2
	h.Length = int32(HeaderSize - LengthPrefix + len(records))
	h.CRC = 0
	dst = AppendHeader(dst, h)
	dst = append(dst, records...)
	seal(dst[start:])
	return dst, nil
}

// Build encodes records into a whole batch appended to dst, compressed with
// c. It sets NumRecords to len(records) and the codec bits of the attributes
// to c, then proceeds as Encode. The records' offset and timestamp deltas and
// h.LastOffsetDelta are the caller's: a producer-style batch numbers the
// records 0 to n-1 and sets LastOffsetDelta to n-1, while compaction keeps
// the deltas and LastOffsetDelta of the batch it rewrites.
func Build(dst []byte, h Header, c Codec, records []Record) ([]byte, error) {
	if !c.Valid() {
		return dst, fmt.Errorf("%w: %d", ErrCodec, int(c))
	}
	if len(records) > SizeMax/recordSizeMin {
		return dst, fmt.Errorf("%w: %d records", ErrTooLarge, len(records))
	}
	h.NumRecords = int32(len(records))
	h.Attributes = h.Attributes&^AttrCodecMask | int16(c)
	h.Magic = MagicV2
	start := len(dst)
	dst = AppendHeader(dst, h)
	if c == None {
		// Uncompressed records are written in place after the header,
		// with no intermediate buffer.
		for i := range records {
			dst = AppendRecord(dst, &records[i])
		}
	} else {
		var raw []byte
		for i := range records {
			raw = AppendRecord(raw, &records[i])
		}
		var err error
		if dst, err = Compress(c, dst, raw); err != nil {
			return dst[:start], err
		}
	}
	if len(dst)-start > SizeMax {
		return dst[:start], fmt.Errorf("%w: batch of %d bytes, at most %d", ErrTooLarge, len(dst)-start, SizeMax)
	}
	be.PutUint32(dst[start+LengthPos:], uint32(len(dst)-start-LengthPrefix))
	seal(dst[start:])
	return dst, nil
}

// seal writes the CRC of b, one whole batch, into its header.
func seal(b []byte) {
	be.PutUint32(b[CRCPos:], Checksum(b))
}
