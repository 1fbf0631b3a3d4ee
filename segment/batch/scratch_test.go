package batch

import (
	"bytes"
	"testing"
)

// TestCheckRecordsReusesScratchSafely alternates large, small and broken
// compressed batches through CheckRecords, whose decompression buffer is
// pooled: leftovers of one batch must never make another pass or fail.
func TestCheckRecordsReusesScratchSafely(t *testing.T) {
	for _, c := range []Codec{Gzip, Snappy, LZ4, Zstd} {
		big := make([]Record, 300)
		for i := range big {
			big[i] = Record{OffsetDelta: int32(i), Value: bytes.Repeat([]byte{byte(i)}, 500)}
		}
		hb := Header{LastOffsetDelta: 299, MaxTimestamp: 7, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		bigBatch, err := Build(nil, hb, c, big)
		if err != nil {
			t.Fatal(err)
		}
		small := []Record{{Value: []byte("x")}, {OffsetDelta: 1, Value: []byte("y")}}
		hs := Header{LastOffsetDelta: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		smallBatch, _ := Build(nil, hs, c, small)
		// A batch that declares 3 records but holds 2.
		liar := Header{LastOffsetDelta: 2, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		liarBatch, _ := Build(nil, liar, c, small)
		be.PutUint32(liarBatch[NumRecordsPos:], 3)
		seal(liarBatch)
		for range 20 {
			for _, tc := range []struct {
				b  []byte
				ok bool
			}{{bigBatch, true}, {liarBatch, false}, {smallBatch, true}, {bigBatch, true}} {
				h, err := ParseHeader(tc.b)
				if err != nil {
					t.Fatal(err)
				}
				_, err = CheckRecords(h, tc.b, Strict, 1<<20)
				if (err == nil) != tc.ok {
					t.Fatalf("%s: CheckRecords = %v, want ok=%v", c, err, tc.ok)
				}
			}
		}
	}
}
