package kwire

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
)

// Readers of every primitive, for the table: each returns what it read in a
// comparable form.
var (
	int8Of          = func(r *Reader) any { return r.Int8() }
	int16Of         = func(r *Reader) any { return r.Int16() }
	int32Of         = func(r *Reader) any { return r.Int32() }
	int64Of         = func(r *Reader) any { return r.Int64() }
	uuidOf          = func(r *Reader) any { return r.UUID() }
	uvarintOf       = func(r *Reader) any { return r.Uvarint() }
	strOf           = func(r *Reader) any { return nullable(r.Str()) }
	nullableStrOf   = func(r *Reader) any { return nullable(r.NullableStr()) }
	bytesOf         = func(r *Reader) any { return nullable(r.Bytes()) }
	nullableBytesOf = func(r *Reader) any { return nullable(r.NullableBytes()) }
	arrayLenOf      = func(r *Reader) any { return r.ArrayLen() }
	tagsOf          = func(r *Reader) any { return r.Tags() }
)

// nullable tells a nil slice (null) from an empty one.
func nullable(b []byte) string {
	if b == nil {
		return "<null>"
	}
	return fmt.Sprintf("%q", b)
}

func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flexible bool
		in       []byte
		read     func(*Reader) any
		want     any
		rest     int // bytes left after the read
		bad      bool
	}{
		{"int8", false, []byte{0xff, 9}, int8Of, int8(-1), 1, false},
		{"int8 empty", false, nil, int8Of, int8(0), 0, true},
		{"int16", false, []byte{0x80, 0x01}, int16Of, int16(-32767), 0, false},
		{"int16 short", false, []byte{1}, int16Of, int16(0), 0, true},
		{"int32", false, []byte{0, 0, 1, 0, 7}, int32Of, int32(256), 1, false},
		{"int32 short", false, []byte{0, 0, 1}, int32Of, int32(0), 0, true},
		{"int64", false, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}, int64Of, int64(-2), 0, false},
		{"int64 short", false, make([]byte, 7), int64Of, int64(0), 0, true},
		{"uuid", false, append(bytes.Repeat([]byte{7}, 16), 1), uuidOf, [16]byte{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}, 1, false},
		{"uuid short", false, make([]byte, 15), uuidOf, [16]byte{}, 0, true},

		{"uvarint one byte", true, []byte{0x7f, 1}, uvarintOf, uint32(127), 1, false},
		{"uvarint two bytes", true, []byte{0x80, 0x01}, uvarintOf, uint32(128), 0, false},
		{"uvarint overlong zero", true, []byte{0x80, 0x00}, uvarintOf, uint32(0), 0, false},
		{"uvarint max", true, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, uvarintOf, uint32(1<<32 - 1), 0, false},
		{"uvarint fifth byte too large", true, []byte{0xff, 0xff, 0xff, 0xff, 0x10}, uvarintOf, uint32(0), 0, true},
		{"uvarint six bytes", true, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, uvarintOf, uint32(0), 0, true},
		{"uvarint cut", true, []byte{0x80, 0x80}, uvarintOf, uint32(0), 0, true},
		{"uvarint empty", true, nil, uvarintOf, uint32(0), 0, true},

		{"string", false, []byte{0, 2, 'h', 'i', 9}, strOf, `"hi"`, 1, false},
		{"string empty", false, []byte{0, 0}, strOf, `""`, 0, false},
		{"string null", false, []byte{0xff, 0xff}, strOf, "<null>", 0, true},
		{"string past the end", false, []byte{0, 3, 'h', 'i'}, strOf, "<null>", 0, true},
		{"compact string", true, []byte{3, 'h', 'i'}, strOf, `"hi"`, 0, false},
		{"compact string null", true, []byte{0}, strOf, "<null>", 0, true},
		{"compact string past the end", true, []byte{4, 'h', 'i'}, strOf, "<null>", 0, true},
		{"nullable string null", false, []byte{0xff, 0xff, 1}, nullableStrOf, "<null>", 1, false},
		{"nullable string -2 is null", false, []byte{0xff, 0xfe}, nullableStrOf, "<null>", 0, false},
		{"nullable string empty", false, []byte{0, 0}, nullableStrOf, `""`, 0, false},
		{"compact nullable string null", true, []byte{0}, nullableStrOf, "<null>", 0, false},
		{"compact nullable string empty", true, []byte{1}, nullableStrOf, `""`, 0, false},
		{"compact nullable string", true, []byte{2, 'x', 'y'}, nullableStrOf, `"x"`, 1, false},

		{"bytes", false, []byte{0, 0, 0, 1, 0xab}, bytesOf, `"\xab"`, 0, false},
		{"bytes null", false, []byte{0xff, 0xff, 0xff, 0xff}, bytesOf, "<null>", 0, true},
		{"bytes past the end", false, []byte{0, 0, 0, 2, 0xab}, bytesOf, "<null>", 0, true},
		{"compact bytes", true, []byte{2, 0xab}, bytesOf, `"\xab"`, 0, false},
		{"nullable bytes null", false, []byte{0xff, 0xff, 0xff, 0xff}, nullableBytesOf, "<null>", 0, false},
		{"nullable bytes empty", false, []byte{0, 0, 0, 0}, nullableBytesOf, `""`, 0, false},
		{"compact nullable bytes null", true, []byte{0, 5}, nullableBytesOf, "<null>", 1, false},
		{"compact nullable bytes past the end", true, []byte{9, 5}, nullableBytesOf, "<null>", 0, true},

		{"array", false, []byte{0, 0, 0, 2, 1, 2}, arrayLenOf, int32(2), 2, false},
		{"array null", false, []byte{0xff, 0xff, 0xff, 0xff}, arrayLenOf, int32(-1), 0, false},
		{"array -7 is null", false, []byte{0xff, 0xff, 0xff, 0xf9}, arrayLenOf, int32(-1), 0, false},
		{"array count past the bytes left", false, []byte{0, 0, 0, 3, 1, 2}, arrayLenOf, int32(0), 0, true},
		{"array count of 2^31-1", false, []byte{0x7f, 0xff, 0xff, 0xff}, arrayLenOf, int32(0), 0, true},
		{"compact array", true, []byte{3, 1, 2}, arrayLenOf, int32(2), 2, false},
		{"compact array null", true, []byte{0}, arrayLenOf, int32(-1), 0, false},
		{"compact array count past the bytes left", true, []byte{4, 1, 2}, arrayLenOf, int32(0), 0, true},
		// kbin reads a compact count through int32: 2^31 wraps to 2^31-1
		// (too many), 2^31+1 and up to negative (null).
		{"compact array count 2^31", true, []byte{0x80, 0x80, 0x80, 0x80, 0x08}, arrayLenOf, int32(0), 0, true},
		{"compact array count 2^31+1", true, []byte{0x81, 0x80, 0x80, 0x80, 0x08}, arrayLenOf, int32(-1), 0, false},

		// The cases of replication/fetcher's TestSkipTags, whose function
		// this replaced.
		{"tags none", true, []byte{0, 9, 9}, tagsOf, 0, 2, false},
		{"tags one", true, []byte{1, 5, 2, 0xa, 0xb, 9}, tagsOf, 1, 1, false},
		{"tags two", true, []byte{2, 0, 0, 1, 1, 0xa}, tagsOf, 2, 0, false},
		{"tags size past the end", true, []byte{1, 5, 9, 0xa}, tagsOf, 1, 0, true},
		{"tags count past the end", true, []byte{0x7f}, tagsOf, 0, 0, true},
		{"tags empty", true, nil, tagsOf, 0, 0, true},
		{"tags in a classic reader", false, []byte{1, 0, 0}, tagsOf, 1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(tc.in, tc.flexible)
			got := tc.read(&r)
			if !reflect.DeepEqual(got, tc.want) || r.Remaining() != tc.rest || r.Bad() != tc.bad {
				t.Errorf("read %v (%d left, bad %v), want %v (%d left, bad %v)", got, r.Remaining(), r.Bad(), tc.want, tc.rest, tc.bad)
			}
			if tc.bad && r.Rest() != nil {
				t.Errorf("a bad reader still has %d bytes", len(r.Rest()))
			}
		})
	}
}

// TestReaderSticky: after the first bad read, every read returns zero and
// consumes nothing, so that a decoder checks Bad once at the end.
func TestReaderSticky(t *testing.T) {
	r := NewReader([]byte{0, 0, 0, 10, 1, 0, 0, 0, 0, 0, 0, 0, 0}, false)
	if r.ArrayLen() != 0 || !r.Bad() {
		t.Fatal("a count of 10 with 9 bytes left was accepted")
	}
	// The bytes after a failed read are not read as the next field.
	if r.Int8() != 0 || r.Int64() != 0 || r.Uvarint() != 0 || r.Str() != nil ||
		r.NullableBytes() != nil || r.ArrayLen() != 0 || r.Tags() != 0 || r.UUID() != [16]byte{} {
		t.Fatal("a bad reader returned a value")
	}
	if !r.Bad() || r.Remaining() != 0 {
		t.Fatalf("bad %v, %d left", r.Bad(), r.Remaining())
	}
}

// TestSpanCapacity: a span cannot be appended over the bytes after it (a
// records field followed by the next partition's, in one request).
func TestSpanCapacity(t *testing.T) {
	in := []byte{0, 0, 0, 1, 'a', 'b'}
	r := NewReader(in, false)
	b := r.Bytes()
	_ = append(b, 'X')
	if in[5] != 'b' || cap(b) != 1 {
		t.Fatalf("append to a span wrote into the input (cap %d)", cap(b))
	}
}

func TestSkipTags(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		rest int
		ok   bool
	}{
		{[]byte{0, 9, 9}, 2, true},
		{[]byte{1, 5, 2, 0xa, 0xb, 9}, 1, true},
		{[]byte{1, 5, 9, 0xa}, 0, false},
		{[]byte{0x7f}, 0, false},
		{nil, 0, false},
	} {
		rest, ok := SkipTags(tc.in)
		if ok != tc.ok || len(rest) != tc.rest {
			t.Errorf("SkipTags(%x): %d left, ok %v; want %d, %v", tc.in, len(rest), ok, tc.rest, tc.ok)
		}
	}
}

// TestReaderAllocs: reading allocates nothing, whatever the counts say.
func TestReaderAllocs(t *testing.T) {
	in := []byte{0x7f, 0xff, 0xff, 0xff, 3, 'a', 'b', 2, 1, 0, 0, 0xff, 0xff, 0xff, 0x0f}
	allocs := testing.AllocsPerRun(100, func() {
		r := NewReader(in, true)
		r.Int32()
		r.Str()
		r.Tags()
		r.ArrayLen()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per read", allocs)
	}
}
