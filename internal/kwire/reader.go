package kwire

import "encoding/binary"

// Reader reads Kafka's primitive types from a byte slice. The zero Reader
// reads nothing and is not bad; NewReader starts one on a slice.
type Reader struct {
	// Flexible selects the compact forms of lengths and counts (KIP-482).
	// It may be changed between reads: a request header reads its client id
	// as a classic string even in a flexible version.
	Flexible bool

	b   []byte
	bad bool
}

// NewReader returns a Reader over b.
func NewReader(b []byte, flexible bool) Reader {
	return Reader{Flexible: flexible, b: b}
}

// Bad reports whether a read ran past the end or met an impossible length.
// Once bad, a Reader stays bad and every read returns a zero value.
func (r *Reader) Bad() bool { return r.bad }

// Remaining is the number of bytes not read yet (0 once bad).
func (r *Reader) Remaining() int { return len(r.b) }

// Rest returns the bytes not read yet, aliasing the input (nil once bad).
func (r *Reader) Rest() []byte { return r.b }

// fail makes the Reader bad: nothing is left to read.
func (r *Reader) fail() {
	r.bad = true
	r.b = nil
}

// Span returns the next n bytes, aliasing the input, with their capacity
// clipped so that an append to them cannot write over what follows. A
// negative n, or more than remain, makes the Reader bad.
func (r *Reader) Span(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.fail()
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// Skip passes over the next n bytes, as Span does.
func (r *Reader) Skip(n int) { r.Span(n) }

// Int8 reads one byte as a signed integer.
func (r *Reader) Int8() int8 {
	if b := r.Span(1); b != nil {
		return int8(b[0])
	}
	return 0
}

// Int16 reads a big-endian int16.
func (r *Reader) Int16() int16 {
	if b := r.Span(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

// Int32 reads a big-endian int32.
func (r *Reader) Int32() int32 {
	if b := r.Span(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

// Int64 reads a big-endian int64.
func (r *Reader) Int64() int64 {
	if b := r.Span(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

// UUID reads a 16-byte UUID (a topic id, KIP-516).
func (r *Reader) UUID() (id [16]byte) {
	copy(id[:], r.Span(16))
	return id
}

// uvarintBytesMax is the longest uvarint Kafka writes: 32 bits, 7 a byte.
const uvarintBytesMax = 5

// Uvarint reads an unsigned varint of at most 32 bits, as Kafka's compact
// lengths and tags are (ByteUtils.readUnsignedVarint): at most five bytes,
// the fifth holding the top four bits. A longer or larger one is bad, even
// where binary.Uvarint would read it.
func (r *Reader) Uvarint() uint32 {
	var x uint32
	for i := 0; i < uvarintBytesMax && i < len(r.b); i++ {
		c := r.b[i]
		if i == uvarintBytesMax-1 {
			if c > 0x0f {
				break
			}
			r.b = r.b[i+1:]
			return x | uint32(c)<<28
		}
		x |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			r.b = r.b[i+1:]
			return x
		}
	}
	r.fail()
	return 0
}

// length reads a string (int16) or bytes (int32) length, or a compact one
// (uvarint length+1) in flexible mode. A negative result is null.
func (r *Reader) length(int32Classic bool) int {
	switch {
	case r.Flexible:
		return int(r.Uvarint()) - 1
	case int32Classic:
		return int(r.Int32())
	}
	return int(r.Int16())
}

// Str reads a string that may not be null, returning its bytes (aliasing the
// input: string(r.Str()) to keep it). A null one makes the Reader bad.
func (r *Reader) Str() []byte {
	return r.Span(r.length(false)) // Span fails a negative length
}

// NullableStr reads a nullable string: nil for null (any negative length,
// as kmsg reads it), else its bytes aliasing the input (empty, not nil, for
// an empty string).
func (r *Reader) NullableStr() []byte {
	if n := r.length(false); n >= 0 {
		return r.Span(n)
	}
	return nil
}

// Bytes reads a byte array that may not be null; a null one makes the
// Reader bad. The result aliases the input.
func (r *Reader) Bytes() []byte {
	return r.Span(r.length(true))
}

// NullableBytes reads a nullable byte array: nil for null (any negative
// length), else a slice of the input (empty, not nil, for no bytes).
func (r *Reader) NullableBytes() []byte {
	if n := r.length(true); n >= 0 {
		return r.Span(n)
	}
	return nil
}

// ArrayLen reads an array count: -1 for null (any negative count, as kmsg
// reads it), else the count. A count larger than the bytes left makes the
// Reader bad, since every element takes at least one byte: a caller may
// size a structure by the result.
func (r *Reader) ArrayLen() int32 {
	var n int32
	if r.Flexible {
		// Through int32 as kbin does, so that kmsg and a walk with this
		// Reader agree on every count: uvarints from 2^31+1 read as null.
		n = int32(r.Uvarint()) - 1
	} else {
		n = r.Int32()
	}
	switch {
	case r.bad:
		return 0
	case int64(n) > int64(len(r.b)):
		r.fail()
		return 0
	case n < 0:
		return -1
	}
	return n
}

// Tags skips a tagged-field section (KIP-482: a uvarint count of uvarint
// tag, uvarint size, size bytes) and returns how many fields it held. It
// reads the section whatever Flexible says; only flexible versions have
// one, which is the caller's to know. A count larger than the bytes left
// makes the Reader bad (every field takes at least two bytes).
func (r *Reader) Tags() int {
	n := r.Uvarint()
	if int64(n) > int64(len(r.b)) {
		r.fail()
		return 0
	}
	read := 0
	for ; n > 0 && !r.bad; n-- {
		r.Uvarint() // the tag
		r.Skip(int(r.Uvarint()))
		read++
	}
	return read
}

// SkipTags skips the tagged-field section at the start of b (a flexible
// request or response header's) and returns what follows it; ok is false
// when the section is malformed.
func SkipTags(b []byte) (rest []byte, ok bool) {
	r := NewReader(b, true)
	r.Tags()
	return r.Rest(), !r.Bad()
}
