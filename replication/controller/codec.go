package controller

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// The primitives of every encoding in this package (commands, snapshots,
// RPC frames): big-endian fixed-width integers, unsigned varints for
// lengths and counts, strings as a varint length and the bytes.
//
// The decoder keeps a sticky error: after the first short or invalid read
// every read returns a zero value, and the caller checks err once at the
// end. A count is refused when it is larger than the bytes left divided by
// the smallest encoding of one element, so nothing is ever allocated beyond
// what the input could describe (the defence against CVE-2022-34917).

type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)    { e.b = append(e.b, v) }
func (e *encoder) i16(v int16)   { e.b = binary.BigEndian.AppendUint16(e.b, uint16(v)) }
func (e *encoder) i32(v int32)   { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *encoder) u32(v uint32)  { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *encoder) i64(v int64)   { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *encoder) u64(v uint64)  { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *encoder) uvarint(n int) { e.b = binary.AppendUvarint(e.b, uint64(n)) }

func (e *encoder) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

func (e *encoder) str(s string) {
	e.uvarint(len(s))
	e.b = append(e.b, s...)
}

func (e *encoder) bytes(p []byte) {
	e.uvarint(len(p))
	e.b = append(e.b, p...)
}

func (e *encoder) int32s(v []int32) {
	e.uvarint(len(v))
	for _, x := range v {
		e.i32(x)
	}
}

func (e *encoder) int64s(v []int64) {
	e.uvarint(len(v))
	for _, x := range v {
		e.i64(x)
	}
}

func (e *encoder) strs(v []string) {
	e.uvarint(len(v))
	for _, s := range v {
		e.str(s)
	}
}

// stringMap encodes keys in sorted order, so that equal maps encode to equal
// bytes (snapshots of equal states are byte-identical).
func (e *encoder) stringMap(m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.uvarint(len(keys))
	for _, k := range keys {
		e.str(k)
		e.str(m[k])
	}
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	d.b = nil
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("need %d bytes, %d left", n, len(d.b))
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u8() uint8 {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) i16() int16 {
	if p := d.take(2); p != nil {
		return int16(binary.BigEndian.Uint16(p))
	}
	return 0
}

func (d *decoder) i32() int32 { return int32(d.u32()) }

func (d *decoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) i64() int64 { return int64(d.u64()) }

func (d *decoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) bool() bool {
	switch d.u8() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bool is not 0 or 1")
	return false
}

// count reads a varint count of elements whose smallest encoding is
// minSize bytes, and refuses one the remaining input cannot hold.
func (d *decoder) count(minSize int) int {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	if v > math.MaxInt32 || int(v)*minSize > len(d.b) {
		d.fail("count %d larger than the %d bytes left allow", v, len(d.b))
		return 0
	}
	return int(v)
}

func (d *decoder) str() string { return string(d.take(d.count(1))) }

func (d *decoder) bytes() []byte {
	p := d.take(d.count(1))
	if p == nil {
		return nil
	}
	return slices.Clone(p)
}

func (d *decoder) int32s() []int32 {
	n := d.count(4)
	if n == 0 {
		return nil
	}
	v := make([]int32, n)
	for i := range v {
		v[i] = d.i32()
	}
	return v
}

func (d *decoder) int64s() []int64 {
	n := d.count(8)
	if n == 0 {
		return nil
	}
	v := make([]int64, n)
	for i := range v {
		v[i] = d.i64()
	}
	return v
}

func (d *decoder) strs() []string {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	v := make([]string, n)
	for i := range v {
		v[i] = d.str()
	}
	return v
}

// stringMap decodes a map encoded by encoder.stringMap; keys must be
// strictly increasing, so that a decoded map re-encodes to the same bytes.
func (d *decoder) stringMap() map[string]string {
	return sortedMap(d, (*decoder).str, "map keys")
}

// sortedMap decodes a count, then that many keys each followed by its
// value (value decodes one), the keys strictly increasing; what names
// the keys in the error. An empty map decodes as nil.
func sortedMap[V any](d *decoder, value func(*decoder) V, what string) map[string]V {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	m := make(map[string]V, n)
	prev := ""
	for i := range n {
		k := d.str()
		v := value(d)
		if d.err != nil {
			return nil
		}
		if i > 0 && k <= prev {
			d.fail("%s out of order", what)
			return nil
		}
		prev = k
		m[k] = v
	}
	return m
}

// done fails when bytes are left over: every encoding here has an exact
// length, so trailing bytes mean a frame was cut or glued wrongly.
func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}
