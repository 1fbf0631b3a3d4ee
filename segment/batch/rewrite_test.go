package batch

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRewritesOutsideCRC checks that assigning offsets and stamping the
// leader epoch keep the batch valid without touching the CRC.
func TestRewritesOutsideCRC(t *testing.T) {
	b := validBatch(t)
	crc := append([]byte{}, b[CRCPos:CRCPos+4]...)
	if err := SetBaseOffset(b, 1<<50); err != nil {
		t.Fatal(err)
	}
	if err := SetPartitionLeaderEpoch(b, 42); err != nil {
		t.Fatal(err)
	}
	h, err := Validate(b, Stored)
	if err != nil {
		t.Fatal(err)
	}
	if h.BaseOffset != 1<<50 || h.PartitionLeaderEpoch != 42 || !bytes.Equal(crc, b[CRCPos:CRCPos+4]) {
		t.Fatalf("header after rewrites: %+v", h)
	}
	if err := SetBaseOffset(b[:HeaderSize-1], 0); !errors.Is(err, ErrShort) {
		t.Fatalf("SetBaseOffset on a short buffer: %v", err)
	}
	if err := SetPartitionLeaderEpoch(nil, 0); !errors.Is(err, ErrShort) {
		t.Fatalf("SetPartitionLeaderEpoch on nil: %v", err)
	}
}

// TestSetMaxTimestamp checks the rewrite of maxTimestamp and of the
// timestamp type, and that the updated CRC equals a full recomputation, for
// batches of many sizes and every codec.
func TestSetMaxTimestamp(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, c := range allCodecs {
		for _, n := range []int{1, 2, 17, 300} {
			b := clientBatch(t, batchSpec{codec: c, baseTimestamp: 1000, producerID: -1, baseSequence: -1}, genRecords(rng, n, 100))
			for _, step := range []struct {
				ts  int64
				lat bool
			}{{2_000_000, true}, {-1, true}, {math.MinInt64, false}, {math.MaxInt64, true}, {5, false}} {
				if err := SetMaxTimestamp(b, step.ts, step.lat); err != nil {
					t.Fatal(err)
				}
				h, err := Validate(b, Strict)
				if err != nil {
					t.Fatalf("%s/%d after SetMaxTimestamp(%d, %v): %v", c, n, step.ts, step.lat, err)
				}
				if h.MaxTimestamp != step.ts || h.LogAppendTime() != step.lat || h.Codec() != c {
					t.Fatalf("header after SetMaxTimestamp(%d, %v): %+v", step.ts, step.lat, h)
				}
				if h.CRC != Checksum(b) {
					t.Fatalf("CRC %#x, recomputed %#x", h.CRC, Checksum(b))
				}
			}
		}
	}
}

// TestSetMaxTimestampKeepsCorruption is the reason the CRC is updated and not
// recomputed: a batch damaged before the rewrite must still fail its CRC
// after it, or the damage would be sealed into the log.
func TestSetMaxTimestampKeepsCorruption(t *testing.T) {
	b := validBatch(t)
	b[len(b)-3] ^= 0x10
	if err := SetMaxTimestamp(b, 99, true); err != nil {
		t.Fatal(err)
	}
	if _, err := Validate(b, Stored); !errors.Is(err, ErrCRC) {
		t.Fatalf("Validate after rewriting a corrupt batch: %v, want ErrCRC", err)
	}
}

// TestSetMaxTimestampNoChange checks that the rewrite leaves the bytes alone
// when nothing changes, as Kafka's setMaxTimestamp does.
func TestSetMaxTimestampNoChange(t *testing.T) {
	b := validBatch(t)
	h, _ := ParseHeader(b)
	before := append([]byte{}, b...)
	if err := SetMaxTimestamp(b, h.MaxTimestamp, false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, before) {
		t.Fatal("bytes changed")
	}
	for _, bad := range [][]byte{b[:HeaderSize-1], b[:len(b)-1], append(b, 0)} {
		if err := SetMaxTimestamp(bad, 1, true); err == nil {
			t.Fatalf("SetMaxTimestamp accepted %d bytes of a %d-byte batch", len(bad), len(b))
		}
	}
}

// TestCRCShift checks the GF(2) arithmetic behind the CRC update against the
// plain definition: shifting the linear CRC of p over n zero bytes equals the
// linear CRC of p followed by n zeros.
func TestCRCShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{0, 1, 2, 3, 7, 8, 100, 4095, 65536, 1<<20 + 3} {
		p := make([]byte, 1+rng.IntN(30))
		for i := range p {
			p[i] = byte(rng.UintN(256))
		}
		want := crcLinear(append(append([]byte{}, p...), make([]byte, n)...))
		if got := crcShift(crcLinear(p), n); got != want {
			t.Fatalf("n=%d: %#x, want %#x", n, got, want)
		}
	}
}

// TestCRCShiftLarge checks the byte-table shift against one bit of n at a
// time, for shifts too large to check against real zero bytes.
func TestCRCShiftLarge(t *testing.T) {
	slow := func(c uint32, n int) uint32 {
		for k := 3; n > 0; n, k = n>>1, k+1 {
			if n&1 != 0 {
				c = multModP(x2nModP[k], c)
			}
		}
		return c
	}
	rng := rand.New(rand.NewPCG(17, 18))
	for _, n := range []int{255, 256, 65535, 1 << 24, SizeMax, 1<<32 - 1, 1 << 32, 1<<40 + 12345, 1<<60 + 3} {
		c := rng.Uint32()
		if got, want := crcShift(c, n), slow(c, n); got != want {
			t.Fatalf("n=%d: %#x, want %#x", n, got, want)
		}
	}
}

// TestMaxRecordTimestamp checks the value Kafka's broker writes into
// maxTimestamp for CreateTime topics, against timestamp deltas that go
// backwards, and the LogAppendTime case.
func TestMaxRecordTimestamp(t *testing.T) {
	deltas := []int64{5, -3, 100, 7, -50}
	var in []kmsg.Record
	for _, d := range deltas {
		in = append(in, kmsg.Record{TimestampDelta64: d, Value: []byte("v")})
	}
	for _, c := range allCodecs {
		b := clientBatch(t, batchSpec{codec: c, baseTimestamp: 1000, producerID: -1, baseSequence: -1}, in)
		h, err := Validate(b, Strict)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := MaxRecordTimestamp(h, b, 1<<16)
		if err != nil || ts != 1100 {
			t.Fatalf("%s: MaxRecordTimestamp = %d, %v; want 1100", c, ts, err)
		}
		if err := SetMaxTimestamp(b, 777, true); err != nil {
			t.Fatal(err)
		}
		h, _ = Validate(b, Strict)
		if ts, err := MaxRecordTimestamp(h, b, 1<<16); err != nil || ts != 777 {
			t.Fatalf("%s: LogAppendTime: %d, %v; want 777", c, ts, err)
		}
	}
}
