package batch

import (
	"encoding/binary"
)

// Kafka's record fields are zigzag varints: a varint is an int32 in at most
// 5 bytes, a varlong an int64 in at most 10 (ByteUtils.readVarint and
// readVarlong). The zigzag mapping of an int32 and of its int64 extension
// are the same number, which is why Go's binary.AppendUvarint of zigzag32
// writes exactly what Kafka writes.
// The read functions take the input and a position in it, and return the
// value and the position after it. A failed read returns position -1, and a
// read at a negative position fails again and returns zero: the failure is
// sticky, so a record is decoded straight through and checked once at the
// end, without an error branch per field (franz-go's kbin reader does the
// same with a bad flag). Positions rather than a reader struct keep the
// state in registers on the record walk, the hot path of Validate. No read
// goes outside b, and none allocates.

// readVarint reads a zigzag int32 of at most 5 bytes. Five bytes can carry
// 35 bits; a value that does not fit 32 bits is rejected rather than
// truncated (Java truncates), since only a broken encoder writes one. The
// loop is written out rather than calling binary.Uvarint: the walk over a
// batch's records spends most of its time here.
func readVarint(b []byte, i int) (int32, int) {
	if i < 0 {
		return 0, -1
	}
	var u uint32
	for shift := uint(0); i < len(b); shift += 7 {
		c := b[i]
		i++
		if shift == 28 && c > 0x0f {
			// The fifth byte may carry only the top four bits, and
			// must end the varint.
			return 0, -1
		}
		u |= uint32(c&0x7f) << shift
		if c < 0x80 {
			return int32(u>>1) ^ -int32(u&1), i
		}
	}
	return 0, -1
}

// readVarlong reads a zigzag int64 of at most 10 bytes, the tenth holding
// only the top bit.
func readVarlong(b []byte, i int) (int64, int) {
	if i < 0 {
		return 0, -1
	}
	var u uint64
	for shift := uint(0); i < len(b); shift += 7 {
		c := b[i]
		i++
		if shift == 63 && c > 1 {
			return 0, -1
		}
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i
		}
	}
	return 0, -1
}

// readBytes reads a varint length and that many bytes, aliasing b. A length
// of -1 is null and yields nil when nullable; an empty field yields a
// non-nil empty slice, so that callers can tell the two apart as Kafka does
// (a null value is a tombstone, an empty one is not).
func readBytes(b []byte, i int, nullable bool) ([]byte, int) {
	n, i := readVarint(b, i)
	switch {
	case i < 0:
		return nil, -1
	case n == -1 && nullable:
		return nil, i
	case n < 0 || int(n) > len(b)-i:
		return nil, -1
	}
	end := i + int(n)
	return b[i:end:end], end
}

// zigzag32 maps an int32 onto the unsigned number Kafka writes.
func zigzag32(v int32) uint64 { return uint64(uint32(v<<1) ^ uint32(v>>31)) }

// zigzag64 maps an int64 onto the unsigned number Kafka writes.
func zigzag64(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// uvarintLen is the encoded size of u.
func uvarintLen(u uint64) int {
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// appendVarint appends v as a zigzag varint.
func appendVarint(dst []byte, v int32) []byte { return binary.AppendUvarint(dst, zigzag32(v)) }

// appendVarlong appends v as a zigzag varlong.
func appendVarlong(dst []byte, v int64) []byte { return binary.AppendUvarint(dst, zigzag64(v)) }

// appendBytes appends a varint length and b; nil is written as null (-1).
func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return appendVarint(dst, -1)
	}
	dst = appendVarint(dst, int32(len(b)))
	return append(dst, b...)
}

// bytesLen is the encoded size of b as appendBytes writes it.
func bytesLen(b []byte) int {
	if b == nil {
		return 1
	}
	return uvarintLen(zigzag32(int32(len(b)))) + len(b)
}
