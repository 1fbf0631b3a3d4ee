package batch

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// validBatch is an uncompressed producer batch of three records made by
// franz-go's encoder.
func validBatch(t testing.TB) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	return clientBatch(t, batchSpec{baseTimestamp: 1_700_000_000_000, producerID: -1, producerEpoch: -1, baseSequence: -1}, genRecords(rng, 3, 20))
}

func put16(pos int, v int16) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint16(b[pos:], uint16(v)); return b }
}

func put32(pos int, v int32) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint32(b[pos:], uint32(v)); return b }
}

func put64(pos int, v int64) func([]byte) []byte {
	return func(b []byte) []byte { binary.BigEndian.PutUint64(b[pos:], uint64(v)); return b }
}

// sealed applies edits and then recomputes the CRC.
func sealed(edits ...func([]byte) []byte) func([]byte) []byte {
	return func(b []byte) []byte {
		for _, e := range edits {
			b = e(b)
		}
		return reseal(b)
	}
}

// TestValidateHeaderErrors breaks a good batch one header field at a time.
func TestValidateHeaderErrors(t *testing.T) {
	cases := []struct {
		name   string
		edit   func([]byte) []byte
		strict error // nil: accepted
		stored error
	}{
		{"valid", func(b []byte) []byte { return b }, nil, nil},
		{"empty", func(b []byte) []byte { return nil }, ErrShort, ErrShort},
		{"header cut", func(b []byte) []byte { return b[:HeaderSize-1] }, ErrShort, ErrShort},
		{"records cut", func(b []byte) []byte { return b[:len(b)-1] }, ErrShort, ErrShort},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }, ErrLength, ErrLength},
		{"magic 1", func(b []byte) []byte { b[MagicPos] = 1; return b }, ErrMagic, ErrMagic},
		{"magic 3", func(b []byte) []byte { b[MagicPos] = 3; return b }, ErrMagic, ErrMagic},
		{"zeroed header", func(b []byte) []byte { clear(b[:HeaderSize]); return b }, ErrMagic, ErrMagic},
		{"length below header", put32(LengthPos, LengthMin-1), ErrLength, ErrLength},
		{"length negative", put32(LengthPos, -1), ErrLength, ErrLength},
		{"length absurd", put32(LengthPos, math.MaxInt32), ErrLength, ErrLength},
		{"length past buffer", put32(LengthPos, LengthMax), ErrShort, ErrShort},
		{"crc flipped", func(b []byte) []byte { b[CRCPos] ^= 1; return b }, ErrCRC, ErrCRC},
		{"attributes flipped", func(b []byte) []byte { b[AttributesPos+1] ^= 0x08; return b }, ErrCRC, ErrCRC},
		{"record byte flipped", func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b }, ErrCRC, ErrCRC},
		// baseOffset and partitionLeaderEpoch are outside the CRC.
		{"base offset rewritten", put64(BaseOffsetPos, 12345), nil, nil},
		{"leader epoch rewritten", put32(PartitionLeaderEpochPos, 7), nil, nil},
		{"count 0", sealed(put32(NumRecordsPos, 0)), ErrCount, nil},
		{"count negative", sealed(put32(NumRecordsPos, -1)), ErrCount, ErrCount},
		{"count below lastOffsetDelta", sealed(put32(NumRecordsPos, 2)), ErrCount, nil},
		{"count above lastOffsetDelta", sealed(put32(NumRecordsPos, 4)), ErrCount, ErrCount},
		{"lastOffsetDelta negative", sealed(put32(LastOffsetDeltaPos, -1), put32(NumRecordsPos, 0)), ErrCount, ErrCount},
		{"lastOffsetDelta beyond count", sealed(put32(LastOffsetDeltaPos, 9)), ErrCount, nil},
		{"codec 5", sealed(put16(AttributesPos, 5)), ErrCodec, ErrCodec},
		{"codec 6", sealed(put16(AttributesPos, 6)), ErrCodec, ErrCodec},
		{"codec 7", sealed(put16(AttributesPos, 7|AttrTransactional)), ErrCodec, ErrCodec},
		{"control batch", sealed(put16(AttributesPos, AttrControl)), ErrControl, nil},
		{"producer id without sequence", sealed(put64(ProducerIDPos, 42)), ErrSequence, nil},
		{"producer id with sequence", sealed(put64(ProducerIDPos, 42), put32(BaseSequencePos, 0)), nil, nil},
		{"unused attribute bits", sealed(put16(AttributesPos, -0x80)), nil, nil},
		{"stored negative base offset", put64(BaseOffsetPos, -1), nil, ErrOffset},
		{"stored last offset overflows", put64(BaseOffsetPos, math.MaxInt64-1), nil, ErrOffset},
		{"stored last offset at the edge", put64(BaseOffsetPos, math.MaxInt64-3), nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, m := range []struct {
				mode Mode
				want error
			}{{Strict, tc.strict}, {Stored, tc.stored}} {
				b := tc.edit(validBatch(t))
				h, err := Validate(b, m.mode)
				if !errors.Is(err, m.want) || (err == nil) != (m.want == nil) {
					t.Fatalf("%s: Validate = %v, want %v", m.mode, err, m.want)
				}
				if err != nil {
					checkSentinel(t, err)
					if h != (Header{}) {
						t.Fatalf("%s: header %+v returned with an error", m.mode, h)
					}
				}
			}
		})
	}
}

// TestValidateRecordErrors hands Validate batches whose header and CRC are
// right but whose records are broken, one way each.
func TestValidateRecordErrors(t *testing.T) {
	ok0, ok1, ok2 := okRecord(0), okRecord(1), okRecord(2)
	headerOK := func(offsetDelta int64, headers ...[]byte) []byte {
		fields := [][]byte{{0}, vi(0), vi(offsetDelta), vi(-1), vi(-1)}
		return rec(append(fields, headers...)...)
	}
	cases := []struct {
		name    string
		count   int32
		records [][]byte
		want    error
	}{
		{"three good records", 3, [][]byte{ok0, ok1, ok2}, nil},
		{"null key and value", 1, [][]byte{headerOK(0, vi(0))}, nil},
		{"header with null value", 1, [][]byte{headerOK(0, vi(1), vi(1), []byte("h"), vi(-1))}, nil},
		{"count lies high", 4, [][]byte{ok0, ok1, ok2}, ErrRecord},
		{"count lies low", 2, [][]byte{ok0, ok1, ok2}, ErrRecord},
		{"count beyond what the bytes hold", 1000, [][]byte{ok0}, ErrRecord},
		{"trailing garbage", 1, [][]byte{ok0, {0xde, 0xad}}, ErrRecord},
		{"offset delta skips", 2, [][]byte{ok0, ok2}, ErrRecord},
		{"offset delta repeats", 2, [][]byte{ok0, ok0}, ErrRecord},
		{"offset delta negative", 1, [][]byte{okRecord(-1)}, ErrRecord},
		{"length past end", 1, [][]byte{append(vi(200), ok0[1:]...)}, ErrRecord},
		{"length negative", 1, [][]byte{append(vi(-5), ok0[1:]...)}, ErrRecord},
		{"length under minimum", 1, [][]byte{append(vi(3), ok0[1:]...)}, ErrRecord},
		{"length leaves bytes after headers", 1, [][]byte{rec([]byte{0}, vi(0), vi(0), vi(-1), vi(-1), vi(0), []byte{0})}, ErrRecord},
		{"key length under -1", 1, [][]byte{rec([]byte{0}, vi(0), vi(0), vi(-2), vi(-1), vi(0))}, ErrRecord},
		{"key length past record", 1, [][]byte{rec([]byte{0}, vi(0), vi(0), vi(50), vi(-1), vi(0))}, ErrRecord},
		{"value length past record", 1, [][]byte{rec([]byte{0}, vi(0), vi(0), vi(-1), vi(9), vi(0))}, ErrRecord},
		{"headers count negative", 1, [][]byte{headerOK(0, vi(-1))}, ErrRecord},
		{"headers count huge", 1, [][]byte{headerOK(0, vi(math.MaxInt32))}, ErrRecord},
		{"header key null", 1, [][]byte{headerOK(0, vi(1), vi(-1), vi(-1))}, ErrRecord},
		{"header value cut", 1, [][]byte{headerOK(0, vi(1), vi(1), []byte("h"), vi(4), []byte("ab"))}, ErrRecord},
		{"varint six bytes", 1, [][]byte{rec([]byte{0}, vi(0), []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, vi(-1), vi(-1), vi(0))}, ErrRecord},
		{"varint over 32 bits", 1, [][]byte{rec([]byte{0}, vi(0), []byte{0x80, 0x80, 0x80, 0x80, 0x70}, vi(-1), vi(-1), vi(0))}, ErrRecord},
		{"varlong eleven bytes", 1, [][]byte{rec([]byte{0}, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, vi(0), vi(-1), vi(-1), vi(0))}, ErrRecord},
		{"varint cut at record end", 1, [][]byte{rec([]byte{0}, vi(0), []byte{0x80})}, ErrRecord},
		{"record length varint cut", 1, [][]byte{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}, ErrRecord},
		{"timestamp overflows", 1, [][]byte{rec([]byte{0}, vi(math.MaxInt64), vi(0), vi(-1), vi(-1), vi(0))}, ErrTimestamp},
		{"timestamp at the bottom", 1, [][]byte{rec([]byte{0}, vi(math.MinInt64), vi(0), vi(-1), vi(-1), vi(0))}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := rawBatch(t, tc.count, tc.records...)
			_, err := Validate(b, Strict)
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("Validate = %v, want %v", err, tc.want)
			}
			if err != nil {
				checkSentinel(t, err)
			}
			// Records applies the same structural rules; the header
			// may not parse (a count of 0 under Strict is not among
			// these cases), so use the parsed one.
			h, perr := ParseHeader(b)
			if perr != nil {
				t.Fatal(perr)
			}
			rerr := Records(h, b, 1<<20, func(*Record) error { return nil })
			if (rerr == nil) != (tc.want == nil) {
				t.Fatalf("Records = %v, want %v", rerr, tc.want)
			}
		})
	}
}

// TestStoredCompactedBatch covers what compaction leaves behind: gaps in the
// offset deltas, fewer records than lastOffsetDelta+1, and empty batches.
func TestStoredCompactedBatch(t *testing.T) {
	// Records 0 and 3 of a batch of 5 survive compaction.
	h := Header{BaseOffset: 100, PartitionLeaderEpoch: 3, LastOffsetDelta: 4, NumRecords: 2, ProducerID: -1, BaseSequence: -1}
	b, err := Encode(nil, h, append(okRecord(0), okRecord(3)...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Validate(b, Strict); !errors.Is(err, ErrCount) {
		t.Fatalf("Strict = %v, want ErrCount", err)
	}
	got, err := Validate(b, Stored)
	if err != nil {
		t.Fatalf("Stored = %v", err)
	}
	if got.NextOffset() != 105 {
		t.Fatalf("NextOffset = %d, want 105", got.NextOffset())
	}
	if _, err := CheckRecords(got, b, Stored, 0); err != nil {
		t.Fatalf("CheckRecords(Stored) = %v", err)
	}
	if _, err := CheckRecords(got, b, Strict, 0); !errors.Is(err, ErrRecord) {
		t.Fatalf("CheckRecords(Strict) = %v, want ErrRecord", err)
	}
	recs := collect(t, got, b, 0)
	if len(recs) != 2 || recs[0].OffsetDelta != 0 || recs[1].OffsetDelta != 3 {
		t.Fatalf("records %+v", recs)
	}

	// A delta past lastOffsetDelta is not a compacted batch but a broken one.
	h.LastOffsetDelta = 2
	b, _ = Encode(nil, h, append(okRecord(0), okRecord(3)...))
	h, _ = ParseHeader(b)
	if _, err := CheckRecords(h, b, Stored, 0); !errors.Is(err, ErrRecord) {
		t.Fatalf("delta past lastOffsetDelta: %v, want ErrRecord", err)
	}

	// The emptied batch keeps its header, and compressed or not it has
	// no records.
	for _, c := range []Codec{None, Zstd} {
		e := Header{BaseOffset: 200, LastOffsetDelta: 9, Attributes: int16(c), ProducerID: 7, BaseSequence: 0}
		b, _ := Encode(nil, e, nil)
		got, err := Validate(b, Stored)
		if err != nil {
			t.Fatalf("%s empty batch: %v", c, err)
		}
		if ts, err := MaxRecordTimestamp(got, b, 0); err != nil || ts != NoTimestamp {
			t.Fatalf("%s empty batch: MaxRecordTimestamp = %d, %v", c, ts, err)
		}
		if recs := collect(t, got, b, 0); len(recs) != 0 {
			t.Fatalf("%s empty batch: %d records", c, len(recs))
		}
	}
}

// TestValidateUnknownMode checks that a Mode outside the enum is refused
// rather than treated as one of the two.
func TestValidateUnknownMode(t *testing.T) {
	b := validBatch(t)
	for _, m := range []Mode{-1, 2, 100} {
		if _, err := Validate(b, m); !errors.Is(err, ErrMode) {
			t.Fatalf("Validate(%s) = %v, want ErrMode", m, err)
		}
		if _, err := CheckRecords(Header{}, b, m, 0); !errors.Is(err, ErrMode) {
			t.Fatalf("CheckRecords(%s) = %v, want ErrMode", m, err)
		}
	}
}

// TestParseHeader checks every field against franz-go's decoder of the same
// bytes, and that a header needs only its 61 bytes.
func TestParseHeader(t *testing.T) {
	b := clientBatch(t, batchSpec{
		codec:         Zstd,
		baseOffset:    1 << 40,
		attributes:    AttrTransactional | AttrLogAppendTime,
		baseTimestamp: -1,
		producerID:    1234567,
		producerEpoch: 9,
		baseSequence:  77,
	}, genRecords(rand.New(rand.NewPCG(3, 4)), 10, 50))
	h, err := ParseHeader(b[:HeaderSize])
	if err != nil {
		t.Fatal(err)
	}
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil {
		t.Fatal(err)
	}
	want := Header{
		BaseOffset: rb.FirstOffset, Length: rb.Length, PartitionLeaderEpoch: rb.PartitionLeaderEpoch,
		Magic: rb.Magic, CRC: uint32(rb.CRC), Attributes: rb.Attributes, LastOffsetDelta: rb.LastOffsetDelta,
		BaseTimestamp: rb.FirstTimestamp, MaxTimestamp: rb.MaxTimestamp, ProducerID: rb.ProducerID,
		ProducerEpoch: rb.ProducerEpoch, BaseSequence: rb.FirstSequence, NumRecords: rb.NumRecords,
	}
	if h != want {
		t.Fatalf("ParseHeader\n got %+v\nwant %+v", h, want)
	}
	if h.Size() != len(b) || h.LastOffset() != 1<<40+9 || h.NextOffset() != 1<<40+10 {
		t.Fatalf("Size %d LastOffset %d NextOffset %d", h.Size(), h.LastOffset(), h.NextOffset())
	}
	if h.Codec() != Zstd || !h.Transactional() || !h.LogAppendTime() || h.Control() || h.HasDeleteHorizon() {
		t.Fatalf("attribute accessors wrong for %#x", h.Attributes)
	}
	if got := AppendHeader(nil, h); string(got) != string(b[:HeaderSize]) {
		t.Fatalf("AppendHeader does not give back the header bytes")
	}
}

// TestHeaderAttributes checks each attribute accessor against its bit.
func TestHeaderAttributes(t *testing.T) {
	for c := range Codec(8) {
		if got := (Header{Attributes: int16(c) | 0x7f00}).Codec(); got != c {
			t.Fatalf("Codec() = %s, want %s", got, c)
		}
	}
	bits := []struct {
		attr int16
		get  func(Header) bool
	}{
		{AttrLogAppendTime, Header.LogAppendTime},
		{AttrTransactional, Header.Transactional},
		{AttrControl, Header.Control},
		{AttrDeleteHorizon, Header.HasDeleteHorizon},
	}
	for _, b := range bits {
		if !b.get(Header{Attributes: b.attr}) || b.get(Header{Attributes: ^b.attr}) {
			t.Fatalf("accessor for bit %#x wrong", b.attr)
		}
	}
}

// TestAddTimestamp checks the overflow guard at both ends of int64.
func TestAddTimestamp(t *testing.T) {
	cases := []struct {
		base, delta int64
		ok          bool
	}{
		{1000, 5, true},
		{1000, -5, true},
		{math.MaxInt64, 0, true},
		{math.MaxInt64, 1, false},
		{math.MaxInt64 - 1, 1, true},
		{math.MinInt64, -1, false},
		{math.MinInt64 + 1, -1, true},
		{-1, math.MinInt64, false},
		{0, math.MinInt64, true},
		{1, math.MaxInt64, false},
	}
	for _, tc := range cases {
		got, ok := addTimestamp(tc.base, tc.delta)
		if ok != tc.ok || (ok && got != tc.base+tc.delta) {
			t.Fatalf("addTimestamp(%d, %d) = %d, %v", tc.base, tc.delta, got, ok)
		}
	}
}
