package kwire

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Encoder appends Kafka's primitive types to Buf, in the forms Reader reads.
// It writes only canonical forms: shortest uvarints, and -1 (classic) or 0
// (compact) for null.
//
// Lengths must fit their classic field; a longer string or byte array is a
// bug of the caller (names are bounded long before 32 KiB, responses below
// 2 GiB), and panics rather than write a frame that every later byte of the
// connection would be misread after.
type Encoder struct {
	// Flexible selects the compact forms of lengths and counts (KIP-482).
	Flexible bool
	// Buf is what has been encoded so far; an Encoder appends to it.
	Buf []byte
}

// Int8 appends one byte.
func (e *Encoder) Int8(v int8) { e.Buf = append(e.Buf, byte(v)) }

// Int16 appends a big-endian int16.
func (e *Encoder) Int16(v int16) { e.Buf = binary.BigEndian.AppendUint16(e.Buf, uint16(v)) }

// Int32 appends a big-endian int32.
func (e *Encoder) Int32(v int32) { e.Buf = binary.BigEndian.AppendUint32(e.Buf, uint32(v)) }

// Int64 appends a big-endian int64.
func (e *Encoder) Int64(v int64) { e.Buf = binary.BigEndian.AppendUint64(e.Buf, uint64(v)) }

// UUID appends a 16-byte UUID.
func (e *Encoder) UUID(id [16]byte) { e.Buf = append(e.Buf, id[:]...) }

// Uvarint appends an unsigned varint (at most five bytes).
func (e *Encoder) Uvarint(v uint32) { e.Buf = binary.AppendUvarint(e.Buf, uint64(v)) }

// length appends the length of a non-null string (int16) or byte array
// (int32), or its compact form in flexible mode.
func (e *Encoder) length(n int, int32Classic bool) {
	switch {
	case n < 0 || uint64(n) >= math.MaxUint32:
		panic(fmt.Sprintf("kwire: length %d", n))
	case e.Flexible:
		e.Uvarint(uint32(n) + 1)
	case int32Classic:
		if n > math.MaxInt32 {
			panic(fmt.Sprintf("kwire: %d bytes in an int32-length field", n))
		}
		e.Int32(int32(n))
	default:
		if n > math.MaxInt16 {
			panic(fmt.Sprintf("kwire: string of %d bytes in an int16-length field", n))
		}
		e.Int16(int16(n))
	}
}

// null appends the null length of a nullable string (classic int16) or
// byte array or array (classic int32).
func (e *Encoder) null(int32Classic bool) {
	switch {
	case e.Flexible:
		e.Uvarint(0)
	case int32Classic:
		e.Int32(-1)
	default:
		e.Int16(-1)
	}
}

// Str appends a non-null string.
func (e *Encoder) Str(s string) {
	e.length(len(s), false)
	e.Buf = append(e.Buf, s...)
}

// NullableStr appends a nullable string: null for nil.
func (e *Encoder) NullableStr(s *string) {
	if s == nil {
		e.null(false)
		return
	}
	e.Str(*s)
}

// Bytes appends a non-null byte array (empty for nil).
func (e *Encoder) Bytes(b []byte) {
	e.length(len(b), true)
	e.Buf = append(e.Buf, b...)
}

// NullableBytes appends a nullable byte array: null for nil, empty for an
// empty non-nil slice.
func (e *Encoder) NullableBytes(b []byte) {
	if b == nil {
		e.null(true)
		return
	}
	e.Bytes(b)
}

// BytesLen appends the length prefix of a non-null byte array of n bytes
// that the caller sends separately (the fetch response's records, which
// follow as file regions).
func (e *Encoder) BytesLen(n int64) {
	if n > math.MaxInt32 {
		panic(fmt.Sprintf("kwire: %d bytes in one byte array", n))
	}
	e.length(int(n), true)
}

// ArrayLen appends the count of a non-null array of n elements.
func (e *Encoder) ArrayLen(n int) { e.length(n, true) }

// NullArray appends the count of a null array.
func (e *Encoder) NullArray() { e.null(true) }

// EmptyTags appends a tagged-field section with no fields. Only flexible
// versions have one, which is the caller's to know.
func (e *Encoder) EmptyTags() { e.Buf = append(e.Buf, 0) }
