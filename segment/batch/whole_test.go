package batch

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// shapedBatch returns a batch-shaped run of bytes: a header with base offset,
// batchLength and magic set, and n zero bytes of records. Only framing
// reads it; its CRC and counts are zero.
func shapedBatch(base int64, n int) []byte {
	b := AppendHeader(nil, Header{BaseOffset: base, Length: int32(LengthMin + n), Magic: MagicV2})
	return append(b, make([]byte, n)...)
}

// withLength returns a copy of b with batchLength set to n.
func withLength(b []byte, n uint32) []byte {
	c := bytes.Clone(b)
	be.PutUint32(c[LengthPos:], n)
	return c
}

// TestWholePrefix holds the cases of replication/fetcher's TestWholeBatches,
// whose framing moved here, on real batches where they can be.
func TestWholePrefix(t *testing.T) {
	all, each := produceRecords(t)
	a, b := each[0], each[1]
	badMagic := bytes.Clone(a)
	badMagic[MagicPos] = 1
	for _, tc := range []struct {
		name string
		in   []byte
		want int
		err  error
	}{
		{"empty", nil, 0, nil},
		{"one", a, len(a), nil},
		{"every codec", all, len(all), nil},
		{"cut in records", slices.Concat(a, b[:len(b)-1]), len(a), nil},
		{"cut in header", slices.Concat(a, b[:30]), len(a), nil},
		{"cut in length", slices.Concat(a, b[:10]), len(a), nil},
		{"only a cut batch", b[:len(b)-1], 0, nil},
		{"header only, no records", shapedBatch(1, 0), HeaderSize, nil},
		{"length below the header", slices.Concat(a, withLength(a, LengthMin-1)), len(a), ErrLength},
		{"negative length", slices.Concat(a, withLength(a, 0xffffff00)), len(a), ErrLength},
		{"length below the header, header cut", slices.Concat(a, withLength(a, 20)[:12]), len(a), ErrLength},
		{"bad magic", slices.Concat(a, badMagic, b), len(a), ErrMagic},
		{"bad magic of a cut batch", slices.Concat(a, badMagic[:len(badMagic)-1]), len(a), nil},
		{"bad magic cut before the magic", slices.Concat(a, badMagic[:15]), len(a), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := WholePrefix(tc.in)
			if n != tc.want || !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Errorf("WholePrefix: %d bytes, %v; want %d, %v", n, err, tc.want, tc.err)
			}
			if err != nil {
				checkSentinel(t, err)
			}
		})
	}
}

// TestWholePrefixAllocs: framing allocates nothing.
func TestWholePrefixAllocs(t *testing.T) {
	all, _ := produceRecords(t)
	in := all[:len(all)-1]
	allocs := testing.AllocsPerRun(100, func() {
		if n, err := WholePrefix(in); n == 0 || err != nil {
			t.Fatal(n, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per walk", allocs)
	}
}

// FuzzWholePrefix (replication/fetcher's FuzzWholeBatches, moved with the
// code): no input panics; the prefix is made of batches that Split frames,
// and WholePrefix of it is itself; what is left after a prefix without an
// error is a cut batch; errors wrap one sentinel; nothing is allocated.
func FuzzWholePrefix(f *testing.F) {
	f.Add(slices.Concat(shapedBatch(0, 3), shapedBatch(4, 9)[:40]))
	f.Add(shapedBatch(7, 0))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := WholePrefix(data)
		if n < 0 || n > len(data) {
			t.Fatalf("prefix of %d bytes in %d", n, len(data))
		}
		if err != nil {
			checkSentinel(t, err)
		}
		if again, err2 := WholePrefix(data[:n]); again != n || err2 != nil {
			t.Fatalf("whole prefix framed again as %d (%v), first %d (%v)", again, err2, n, err)
		}
		it := Split(data[:n])
		for it.Next() {
		}
		if it.Err() != nil || it.Pos() != n {
			t.Fatalf("Split stops at %d of the %d-byte prefix: %v", it.Pos(), n, it.Err())
		}
		if rest := data[n:]; err == nil && len(rest) >= LengthPrefix {
			if length := int64(int32(be.Uint32(rest[LengthPos:]))); LengthPrefix+length <= int64(len(rest)) {
				t.Fatalf("a whole batch of %d bytes left after the prefix", LengthPrefix+length)
			}
		}
		if allocs := testing.AllocsPerRun(1, func() { WholePrefix(data[:n]) }); allocs != 0 {
			t.Fatalf("framing %d bytes allocated %v times", n, allocs)
		}
	})
}
