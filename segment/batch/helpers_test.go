package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file builds batches the way a real client does, with franz-go's own
// encoding types (kmsg) and its own compressors (kgo.DefaultCompressor), so
// that the tests check this package against an independent implementation of
// the format rather than against itself.

// sentinels lists every sentinel error; each error the package returns must
// wrap exactly one of them.
var sentinels = []error{
	ErrShort, ErrLength, ErrMagic, ErrCRC, ErrCount, ErrOffset, ErrCodec,
	ErrDecompress, ErrTooLarge, ErrRecord, ErrTimestamp, ErrControl,
	ErrSequence, ErrMode, ErrMarker,
}

// checkSentinel fails t unless err wraps exactly one sentinel and reads as
// this package's error.
func checkSentinel(t testing.TB, err error) {
	t.Helper()
	n := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("error %q wraps %d sentinels, want 1", err, n)
	}
	if !bytes.Contains([]byte(err.Error()), []byte("batch: ")) {
		t.Fatalf("error %q lacks the package prefix", err)
	}
}

// kgoCodec maps a Codec onto franz-go's codec choice.
func kgoCodec(c Codec) kgo.CompressionCodec {
	switch c {
	case Gzip:
		return kgo.GzipCompression()
	case Snappy:
		return kgo.SnappyCompression()
	case LZ4:
		return kgo.Lz4Compression()
	case Zstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// clientCompress compresses raw as franz-go's producer does.
func clientCompress(t testing.TB, c Codec, raw []byte) []byte {
	t.Helper()
	if c == None {
		return raw
	}
	comp, err := kgo.DefaultCompressor(kgoCodec(c))
	if err != nil {
		t.Fatalf("kgo compressor for %s: %v", c, err)
	}
	out, used := comp.Compress(new(bytes.Buffer), raw)
	if int8(used) != int8(c) {
		t.Fatalf("kgo compressed with codec %d, want %s", used, c)
	}
	// The returned slice aliases a buffer; keep a copy of our own.
	return append([]byte(nil), out...)
}

// clientRecord encodes one record with kmsg, setting its Length as a
// producer does: the size of everything after the length field.
func clientRecord(r kmsg.Record) []byte {
	r.Length = 0
	body := r.AppendTo(nil)
	r.Length = int32(len(body) - 1) // a zero Length is one varint byte
	return r.AppendTo(nil)
}

// batchSpec describes a producer batch for clientBatch.
type batchSpec struct {
	codec         Codec
	baseOffset    int64
	attributes    int16 // besides the codec bits
	baseTimestamp int64
	producerID    int64
	producerEpoch int16
	baseSequence  int32
}

// clientBatch builds a whole batch from records with kmsg, compressed by
// franz-go's compressor, with the CRC computed as Kafka does.
func clientBatch(t testing.TB, s batchSpec, recs []kmsg.Record) []byte {
	t.Helper()
	var raw []byte
	maxTS := int64(math.MinInt64)
	for i := range recs {
		recs[i].OffsetDelta = int32(i)
		raw = append(raw, clientRecord(recs[i])...)
		maxTS = max(maxTS, s.baseTimestamp+recs[i].TimestampDelta64)
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          s.baseOffset,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           s.attributes | int16(s.codec),
		LastOffsetDelta:      int32(len(recs) - 1),
		FirstTimestamp:       s.baseTimestamp,
		MaxTimestamp:         maxTS,
		ProducerID:           s.producerID,
		ProducerEpoch:        s.producerEpoch,
		FirstSequence:        s.baseSequence,
		NumRecords:           int32(len(recs)),
		Records:              clientCompress(t, s.codec, raw),
	}
	return sealClient(&rb)
}

// sealClient fills in Length and CRC of rb and encodes it: the CRC is
// CRC-32C over the bytes after the CRC field, which Kafka's
// DefaultRecordBatch.computeChecksum covers.
func sealClient(rb *kmsg.RecordBatch) []byte {
	rb.Length = 0
	rb.CRC = 0
	b := rb.AppendTo(nil)
	rb.Length = int32(len(b) - 12)
	rb.CRC = int32(crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return rb.AppendTo(nil)
}

// genRecords makes n records with the variety a test needs: keys and null
// keys, values, null values (tombstones) and empty values, headers with and
// without values, timestamp deltas that go up and down.
func genRecords(rng *rand.Rand, n, valueSize int) []kmsg.Record {
	recs := make([]kmsg.Record, n)
	for i := range recs {
		r := &recs[i]
		r.TimestampDelta64 = int64(rng.IntN(2000)) - 100
		switch i % 5 {
		case 0:
			r.Key = nil
		case 1:
			r.Key = []byte{}
		default:
			r.Key = fmt.Appendf(nil, "key-%d", rng.IntN(1000))
		}
		switch i % 7 {
		case 3:
			r.Value = nil
		case 5:
			r.Value = []byte{}
		default:
			r.Value = make([]byte, rng.IntN(valueSize+1))
			// Half random, half text: compressible but not trivially.
			for j := range r.Value {
				if j%2 == 0 {
					r.Value[j] = byte(rng.UintN(256))
				} else {
					r.Value[j] = 'a' + byte(j%26)
				}
			}
		}
		for j := range i % 4 {
			h := kmsg.Header{Key: fmt.Sprintf("h%d", j)}
			if j != 1 {
				h.Value = fmt.Appendf(nil, "v%d", rng.IntN(100))
			}
			r.Headers = append(r.Headers, h)
		}
	}
	return recs
}

// fromClient converts a kmsg record to this package's Record.
func fromClient(kr kmsg.Record) Record {
	r := Record{
		Attributes:     kr.Attributes,
		TimestampDelta: kr.TimestampDelta64,
		OffsetDelta:    kr.OffsetDelta,
		Key:            kr.Key,
		Value:          kr.Value,
	}
	for _, h := range kr.Headers {
		r.Headers = append(r.Headers, RecordHeader{Key: []byte(h.Key), Value: h.Value})
	}
	return r
}

// cloneRecord deep-copies r, keeping nil apart from empty, since Records
// reuses the Record it passes and its Headers slice.
func cloneRecord(r *Record) Record {
	c := Record{
		Attributes:     r.Attributes,
		TimestampDelta: r.TimestampDelta,
		OffsetDelta:    r.OffsetDelta,
		Key:            cloneBytes(r.Key),
		Value:          cloneBytes(r.Value),
	}
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, RecordHeader{Key: cloneBytes(h.Key), Value: cloneBytes(h.Value)})
	}
	return c
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// sameRecord reports how a and b differ, or "" if they are equal, telling
// null apart from empty for keys and values (header keys are never null).
func sameRecord(a, b Record) string {
	switch {
	case a.Attributes != b.Attributes:
		return fmt.Sprintf("attributes %d != %d", a.Attributes, b.Attributes)
	case a.TimestampDelta != b.TimestampDelta:
		return fmt.Sprintf("timestampDelta %d != %d", a.TimestampDelta, b.TimestampDelta)
	case a.OffsetDelta != b.OffsetDelta:
		return fmt.Sprintf("offsetDelta %d != %d", a.OffsetDelta, b.OffsetDelta)
	case (a.Key == nil) != (b.Key == nil) || !bytes.Equal(a.Key, b.Key):
		return fmt.Sprintf("key %q (nil %v) != %q (nil %v)", a.Key, a.Key == nil, b.Key, b.Key == nil)
	case (a.Value == nil) != (b.Value == nil) || !bytes.Equal(a.Value, b.Value):
		return fmt.Sprintf("value of %d bytes (nil %v) != %d bytes (nil %v)", len(a.Value), a.Value == nil, len(b.Value), b.Value == nil)
	case len(a.Headers) != len(b.Headers):
		return fmt.Sprintf("%d headers != %d", len(a.Headers), len(b.Headers))
	}
	for i := range a.Headers {
		ha, hb := a.Headers[i], b.Headers[i]
		if !bytes.Equal(ha.Key, hb.Key) || (ha.Value == nil) != (hb.Value == nil) || !bytes.Equal(ha.Value, hb.Value) {
			return fmt.Sprintf("header %d: %q=%q != %q=%q", i, ha.Key, ha.Value, hb.Key, hb.Value)
		}
	}
	return ""
}

// collect returns deep copies of the records of the batch b.
func collect(t testing.TB, h Header, b []byte, limit int) []Record {
	t.Helper()
	var out []Record
	err := Records(h, b, limit, func(r *Record) error {
		out = append(out, cloneRecord(r))
		return nil
	})
	if err != nil {
		t.Fatalf("Records: %v", err)
	}
	return out
}

// vi encodes v as a zigzag varint (Go's binary varint is Kafka's zigzag).
func vi(v int64) []byte { return binary.AppendVarint(nil, v) }

// rec assembles a record from raw field encodings, prefixing the length of
// the body so that hand-broken fields stay inside their record.
func rec(fields ...[]byte) []byte {
	body := bytes.Join(fields, nil)
	return append(vi(int64(len(body))), body...)
}

// okRecord is a well-formed record with the given offset delta: attributes
// 0, timestamp delta 0, key "k", value "v", no headers.
func okRecord(offsetDelta int64) []byte {
	return rec([]byte{0}, vi(0), vi(offsetDelta), vi(1), []byte("k"), vi(1), []byte("v"), vi(0))
}

// rawBatch seals a batch around hand-made records with a producer-style
// header for n records.
func rawBatch(t testing.TB, n int32, records ...[]byte) []byte {
	t.Helper()
	h := Header{
		PartitionLeaderEpoch: -1,
		LastOffsetDelta:      n - 1,
		BaseTimestamp:        1000,
		MaxTimestamp:         1000,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
		NumRecords:           n,
	}
	b, err := Encode(nil, h, bytes.Join(records, nil))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reseal recomputes the CRC of a batch after a test broke a field inside it,
// so that the check under test, not the CRC, is what rejects it.
func reseal(b []byte) []byte {
	binary.BigEndian.PutUint32(b[CRCPos:], crc32.Checksum(b[AttributesPos:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}
