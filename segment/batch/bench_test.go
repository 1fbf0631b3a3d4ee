package batch

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// benchBatch builds an uncompressed producer batch of n records whose
// values fill it to about size bytes.
func benchBatch(b *testing.B, n, size int) []byte {
	rng := rand.New(rand.NewPCG(31, 32))
	valueSize := (size - HeaderSize) / n
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i].Key = fmt.Appendf(nil, "key-%04d", i)
		recs[i].Value = make([]byte, valueSize-20) // room for the key and the fields
		for j := range recs[i].Value {
			recs[i].Value[j] = byte(rng.UintN(256))
		}
		recs[i].TimestampDelta64 = int64(i)
	}
	return clientBatch(b, batchSpec{baseTimestamp: 1_700_000_000_000, producerID: -1, baseSequence: -1}, recs)
}

var benchShapes = []struct {
	name    string
	records int
	size    int
}{
	{"1KiB-10rec", 10, 1 << 10},
	{"16KiB-10rec", 10, 16 << 10},
	{"16KiB-100rec", 100, 16 << 10},
	{"16KiB-150rec", 150, 16 << 10}, // about 100 B values, as the bench's 100 B workload
}

// BenchmarkValidateStrict measures what every produced batch costs: the
// header checks, the CRC, and the walk over the records.
func BenchmarkValidateStrict(b *testing.B) {
	for _, s := range benchShapes {
		buf := benchBatch(b, s.records, s.size)
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(buf, Strict); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidateStored measures recovery's per-batch cost: the CRC and
// the header, without the record walk.
func BenchmarkValidateStored(b *testing.B) {
	for _, s := range benchShapes[:2] {
		buf := benchBatch(b, s.records, s.size)
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(buf, Stored); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseHeader measures the fetch path's step from batch to batch.
func BenchmarkParseHeader(b *testing.B) {
	buf := benchBatch(b, 10, 1<<10)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseHeader(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSetMaxTimestamp shows that the CRC update does not depend on the
// batch size, against the full recomputation it replaces.
func BenchmarkSetMaxTimestamp(b *testing.B) {
	buf := benchBatch(b, 100, 16<<10)
	b.Run("update", func(b *testing.B) {
		ts := int64(0)
		for b.Loop() {
			ts++
			if err := SetMaxTimestamp(buf, ts, ts&1 == 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("recompute-16KiB", func(b *testing.B) {
		for b.Loop() {
			seal(buf)
		}
	})
}

// BenchmarkRecords measures decoding every record, uncompressed and zstd.
func BenchmarkRecords(b *testing.B) {
	for _, c := range []Codec{None, Zstd} {
		rng := rand.New(rand.NewPCG(33, 34))
		buf := clientBatch(b, batchSpec{codec: c, producerID: -1, baseSequence: -1}, genRecords(rng, 100, 150))
		h, err := Validate(buf, Strict)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.String(), func(b *testing.B) {
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if err := Records(h, buf, 1<<20, func(*Record) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCopySum copies 64 KiB batches from a 64 MiB source into a 128
// MiB destination, both walked through so that neither is in the caches,
// as a shard stages a produce request: "stream" is CopySum, "cached" the
// same chunked copy and sum with the builtin copy (stores through the
// caches, the sum over the destination), side by side in one run.
func BenchmarkCopySum(b *testing.B) {
	const size = 64 << 10
	src := make([]byte, 64<<20)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, 128<<20)
	cached := func(dst, src []byte) (int, uint32) {
		var sum uint32
		for at := 0; at < len(src); at += copySumChunk {
			end := min(at+copySumChunk, len(src))
			copy(dst[at:end], src[at:end])
			sum = crc32.Update(sum, castagnoli, dst[max(at, AttributesPos):end])
		}
		return len(src), sum
	}
	for _, c := range []struct {
		name string
		copy func(dst, src []byte) (int, uint32)
	}{{"stream", CopySum}, {"cached", cached}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(size)
			s, d := 0, 0
			for b.Loop() {
				if s+size > len(src) {
					s = 0
				}
				if d+size+4096 > len(dst) {
					d = 0
				}
				// A destination off its cache lines, as a stage's
				// batches mostly are.
				c.copy(dst[d+17:d+17+size], src[s:s+size])
				s += size
				d += size + 4096
			}
		})
	}
}
