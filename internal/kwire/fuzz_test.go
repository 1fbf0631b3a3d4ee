package kwire

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// A fuzz program is a list of ops, one byte a field: the low bits pick the
// primitive (op % opKinds), the top bit the flexible forms. FuzzReader reads
// the fields the ops name from the data, so that the fuzzer explores every
// primitive in every order and mode.
const (
	opInt8 = iota
	opInt16
	opInt32
	opInt64
	opUUID
	opUvarint
	opStr
	opNullableStr
	opBytes
	opNullableBytes
	opArrayLen
	opTags
	opKinds

	opFlexible = 0x80
)

// field is one decoded field; b is nil for null.
type field struct {
	n    int64
	id   [16]byte
	b    []byte
	tags []byte // a tagged-field section as read, re-encoded verbatim
}

// readFields reads the fields ops names from data, and keeps them if keep
// is set: without keep it allocates nothing of its own, which leaves what
// the Reader allocates to be measured (nothing).
func readFields(ops, data []byte, keep bool) ([]field, Reader) {
	r := NewReader(data, false)
	var out []field
	for _, op := range ops {
		r.Flexible = op&opFlexible != 0
		var f field
		switch (op &^ opFlexible) % opKinds {
		case opInt8:
			f.n = int64(r.Int8())
		case opInt16:
			f.n = int64(r.Int16())
		case opInt32:
			f.n = int64(r.Int32())
		case opInt64:
			f.n = r.Int64()
		case opUUID:
			f.id = r.UUID()
		case opUvarint:
			f.n = int64(r.Uvarint())
		case opStr:
			f.b = r.Str()
		case opNullableStr:
			f.b = r.NullableStr()
		case opBytes:
			f.b = r.Bytes()
		case opNullableBytes:
			f.b = r.NullableBytes()
		case opArrayLen:
			f.n = int64(r.ArrayLen())
		case opTags:
			before := r.Rest()
			f.n = int64(r.Tags())
			f.tags = before[:len(before)-r.Remaining()]
		}
		if keep {
			out = append(out, f)
		}
	}
	return out, r
}

// writeFields encodes fields as ops names them.
func writeFields(ops []byte, fields []field) []byte {
	var e Encoder
	for i, op := range ops {
		e.Flexible = op&opFlexible != 0
		f := fields[i]
		switch (op &^ opFlexible) % opKinds {
		case opInt8:
			e.Int8(int8(f.n))
		case opInt16:
			e.Int16(int16(f.n))
		case opInt32:
			e.Int32(int32(f.n))
		case opInt64:
			e.Int64(f.n)
		case opUUID:
			e.UUID(f.id)
		case opUvarint:
			e.Uvarint(uint32(f.n))
		case opStr:
			e.Str(string(f.b))
		case opNullableStr:
			if f.b == nil {
				e.NullableStr(nil)
			} else {
				s := string(f.b)
				e.NullableStr(&s)
			}
		case opBytes:
			e.Bytes(f.b)
		case opNullableBytes:
			e.NullableBytes(f.b)
		case opArrayLen:
			if f.n < 0 {
				e.NullArray()
			} else {
				e.ArrayLen(int(f.n))
			}
		case opTags:
			e.Buf = append(e.Buf, f.tags...)
		}
	}
	return e.Buf
}

// FuzzReader: no input panics; a Reader allocates nothing; after its first
// bad read every field is zero; and what it reads, encoded and read again,
// reads the same and encodes to the same bytes, never longer than the bytes
// it was read from. SkipTags agrees with Tags. The seeds are in
// testdata/fuzz/FuzzReader (fuzzSeeds, written by TestWriteFuzzCorpus).
func FuzzReader(f *testing.F) {
	f.Fuzz(func(t *testing.T, ops, data []byte) {
		if len(ops) > 64 {
			ops = ops[:64] // longer programs find nothing new, slowly
		}
		if rest, ok := SkipTags(data); ok {
			r := NewReader(data, true)
			r.Tags()
			if r.Bad() || !bytes.Equal(rest, r.Rest()) {
				t.Fatalf("SkipTags left %d bytes, Tags %d (bad %v)", len(rest), r.Remaining(), r.Bad())
			}
		}
		if allocs := testing.AllocsPerRun(1, func() { readFields(ops, data, false) }); allocs != 0 {
			t.Fatalf("reading allocated %v times", allocs)
		}

		fields, r := readFields(ops, data, true)
		if r.Bad() {
			if r.Rest() != nil {
				t.Fatal("a bad reader has bytes left")
			}
			// Sticky: once a read fails, nothing more is read.
			for i := range fields {
				if _, r2 := readFields(ops[:i+1], data, false); r2.Bad() {
					for _, g := range fields[i+1:] {
						if !reflect.DeepEqual(g, field{}) {
							t.Fatalf("field after the failed read %d: %+v", i, g)
						}
					}
					break
				}
			}
			return
		}
		consumed := len(data) - r.Remaining()
		enc := writeFields(ops, fields)
		if len(enc) > consumed {
			t.Fatalf("%d bytes re-encode as %d", consumed, len(enc))
		}
		// Padded to the input's length: a count is bounded by the bytes
		// left, and the canonical encoding may have fewer of them.
		again, r2 := readFields(ops, append(enc, make([]byte, len(data)-len(enc))...), true)
		if r2.Bad() || !reflect.DeepEqual(again, fields) {
			t.Fatalf("decode-encode-decode differs (bad %v):\n%+v\n%+v", r2.Bad(), fields, again)
		}
		if enc2 := writeFields(ops, again); !bytes.Equal(enc, enc2) {
			t.Fatalf("encodings differ:\n%x\n%x", enc, enc2)
		}
	})
}

type fuzzSeed struct {
	name      string
	ops, data []byte
}

// fuzzSeeds are the fields of real headers and bodies in both modes, and
// broken ones.
func fuzzSeeds() []fuzzSeed {
	f := byte(opFlexible)
	// A produce v9 body (flexible): transactional id, acks, timeout, one
	// topic with one partition and its records.
	produce := Encoder{Flexible: true}
	produce.NullableStr(nil)
	produce.Int16(-1)
	produce.Int32(30000)
	produce.ArrayLen(1)
	produce.Str("topic")
	produce.ArrayLen(1)
	produce.Int32(0)
	produce.NullableBytes(bytes.Repeat([]byte{0xab}, 70))
	produce.EmptyTags()
	produce.EmptyTags()
	produce.EmptyTags()
	produceOps := []byte{f | opNullableStr, opInt16, opInt32, f | opArrayLen, f | opStr, f | opArrayLen, opInt32, f | opNullableBytes, opTags, opTags, opTags}

	// The same in the classic forms (produce v3).
	classic := Encoder{}
	classic.NullableStr(nil)
	classic.Int16(1)
	classic.Int32(1000)
	classic.ArrayLen(1)
	classic.Str("t")
	classic.ArrayLen(1)
	classic.Int32(3)
	classic.NullableBytes([]byte{1, 2, 3})
	classicOps := []byte{opNullableStr, opInt16, opInt32, opArrayLen, opStr, opArrayLen, opInt32, opNullableBytes}

	// A request header v2: key, version, correlation id, classic client
	// id, then tags with one unknown field.
	header := Encoder{}
	header.Int16(1)
	header.Int16(12)
	header.Int32(7)
	header.Str("client")
	header.Buf = append(header.Buf, 1, 3, 2, 0xa, 0xb)
	headerOps := []byte{opInt16, opInt16, opInt32, opNullableStr, opTags}

	// Every other primitive once, flexible where it has a form.
	rest := Encoder{Flexible: true}
	rest.Int8(-3)
	rest.Int64(-1 << 40)
	rest.UUID([16]byte{9, 8, 7})
	rest.Uvarint(1<<32 - 1)
	rest.Bytes([]byte("payload"))
	rest.NullArray()
	restOps := []byte{opInt8, opInt64, opUUID, opUvarint, f | opBytes, f | opArrayLen}

	return []fuzzSeed{
		{"produce-v9", produceOps, produce.Buf},
		{"produce-v9-cut", produceOps, produce.Buf[:40]},
		{"produce-v3", classicOps, classic.Buf},
		{"request-header-v2", headerOps, header.Buf},
		{"primitives", restOps, rest.Buf},
		{"count-past-the-end", []byte{f | opArrayLen, opInt8}, []byte{0x7f, 1}},
		{"compact-count-2p31", []byte{f | opArrayLen}, []byte{0x81, 0x80, 0x80, 0x80, 0x08}},
		{"uvarint-six-bytes", []byte{f | opUvarint}, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}},
		{"tags-size-past-the-end", []byte{opTags}, []byte{1, 5, 9, 0xa}},
		{"null-required-string", []byte{opStr, opInt8}, []byte{0xff, 0xff, 1}},
	}
}

// TestWriteFuzzCorpus writes the seed corpus of FuzzReader when
// RINGLOG_FUZZ_CORPUS=1; otherwise it checks that the committed corpus in
// testdata/fuzz/FuzzReader has every seed.
func TestWriteFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReader")
	write := os.Getenv("RINGLOG_FUZZ_CORPUS") == "1"
	if write {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range fuzzSeeds() {
		path := filepath.Join(dir, s.name)
		content := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s.ops)) + ")\n[]byte(" + strconv.Quote(string(s.data)) + ")\n"
		if write {
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != content {
			t.Errorf("seed %s missing or stale in %s (RINGLOG_FUZZ_CORPUS=1 rewrites it): %v", s.name, dir, err)
		}
	}
}
