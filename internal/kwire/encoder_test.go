package kwire

import (
	"bytes"
	"strings"
	"testing"
)

func TestEncoder(t *testing.T) {
	s := "hi"
	for _, tc := range []struct {
		name     string
		flexible bool
		write    func(*Encoder)
		want     []byte
	}{
		{"int8", false, func(e *Encoder) { e.Int8(-1) }, []byte{0xff}},
		{"int16", false, func(e *Encoder) { e.Int16(-32767) }, []byte{0x80, 0x01}},
		{"int32", false, func(e *Encoder) { e.Int32(256) }, []byte{0, 0, 1, 0}},
		{"int64", false, func(e *Encoder) { e.Int64(-2) }, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}},
		{"uuid", false, func(e *Encoder) { e.UUID([16]byte{1, 15: 2}) }, []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}},
		{"uvarint", true, func(e *Encoder) { e.Uvarint(128) }, []byte{0x80, 0x01}},
		{"uvarint max", true, func(e *Encoder) { e.Uvarint(1<<32 - 1) }, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}},

		{"string", false, func(e *Encoder) { e.Str(s) }, []byte{0, 2, 'h', 'i'}},
		{"compact string", true, func(e *Encoder) { e.Str(s) }, []byte{3, 'h', 'i'}},
		{"nullable string null", false, func(e *Encoder) { e.NullableStr(nil) }, []byte{0xff, 0xff}},
		{"compact nullable string null", true, func(e *Encoder) { e.NullableStr(nil) }, []byte{0}},
		{"compact nullable string", true, func(e *Encoder) { e.NullableStr(&s) }, []byte{3, 'h', 'i'}},

		{"bytes", false, func(e *Encoder) { e.Bytes([]byte{9}) }, []byte{0, 0, 0, 1, 9}},
		{"bytes nil is empty", false, func(e *Encoder) { e.Bytes(nil) }, []byte{0, 0, 0, 0}},
		{"compact bytes", true, func(e *Encoder) { e.Bytes([]byte{9}) }, []byte{2, 9}},
		{"nullable bytes null", false, func(e *Encoder) { e.NullableBytes(nil) }, []byte{0xff, 0xff, 0xff, 0xff}},
		{"nullable bytes empty", false, func(e *Encoder) { e.NullableBytes([]byte{}) }, []byte{0, 0, 0, 0}},
		{"compact nullable bytes null", true, func(e *Encoder) { e.NullableBytes(nil) }, []byte{0}},
		{"bytes length", false, func(e *Encoder) { e.BytesLen(300) }, []byte{0, 0, 1, 0x2c}},
		{"compact bytes length", true, func(e *Encoder) { e.BytesLen(300) }, []byte{0xad, 0x02}},

		{"array", false, func(e *Encoder) { e.ArrayLen(2) }, []byte{0, 0, 0, 2}},
		{"compact array", true, func(e *Encoder) { e.ArrayLen(2) }, []byte{3}},
		{"null array", false, func(e *Encoder) { e.NullArray() }, []byte{0xff, 0xff, 0xff, 0xff}},
		{"compact null array", true, func(e *Encoder) { e.NullArray() }, []byte{0}},
		{"empty tags", true, func(e *Encoder) { e.EmptyTags() }, []byte{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Encoder{Flexible: tc.flexible, Buf: []byte{0xee}}
			tc.write(&e)
			if !bytes.Equal(e.Buf[1:], tc.want) || e.Buf[0] != 0xee {
				t.Errorf("encoded %x, want ee%x", e.Buf, tc.want)
			}
		})
	}
}

// TestEncoderLengthLimits: a length that does not fit its field is a bug of
// the caller and panics, rather than write a misframed response.
func TestEncoderLengthLimits(t *testing.T) {
	long := strings.Repeat("x", 1<<15)
	for _, tc := range []struct {
		name  string
		write func(*Encoder)
	}{
		{"string of 32 KiB", func(e *Encoder) { e.Str(long) }},
		{"bytes length of 2 GiB", func(e *Encoder) { e.BytesLen(1 << 31) }},
		{"negative bytes length", func(e *Encoder) { e.BytesLen(-1) }},
		{"negative array count", func(e *Encoder) { e.ArrayLen(-1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			tc.write(&Encoder{})
		})
	}
	// The same string fits a compact length.
	e := Encoder{Flexible: true}
	e.Str(long)
	if r := NewReader(e.Buf, true); string(r.Str()) != long || r.Remaining() != 0 {
		t.Error("a 32 KiB compact string does not read back")
	}
}
