package fetcher

import (
	"encoding/binary"
	"errors"
	"testing"

	"ringlog/segment/batch"
)

// mkBatch returns a batch-shaped byte run: a header with base, length and
// magic set, and n bytes of records.
func mkBatch(base int64, n int) []byte {
	b := batch.AppendHeader(nil, batch.Header{BaseOffset: base, Length: int32(batch.LengthMin + n), Magic: batch.MagicV2})
	return append(b, make([]byte, n)...)
}

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// TestWholeBatches checks what wholeBatches adds to batch.WholePrefix (whose
// own tests hold the framing cases): a header that cannot be framed is
// ErrCorruptBatch, and the prefix cannot be appended over the bytes after it.
func TestWholeBatches(t *testing.T) {
	a, b := mkBatch(0, 10), mkBatch(5, 100)
	badLen := mkBatch(9, 0)
	binary.BigEndian.PutUint32(badLen[batch.LengthPos:], 20)
	badMagic := mkBatch(9, 0)
	badMagic[batch.MagicPos] = 1
	for _, tc := range []struct {
		name string
		in   []byte
		want int
		err  error
	}{
		{"empty", nil, 0, nil},
		{"two", cat(a, b), len(a) + len(b), nil},
		{"cut in records", cat(a, b[:len(b)-1]), len(a), nil},
		{"length below the header", cat(a, badLen), len(a), ErrCorruptBatch},
		{"bad magic", cat(a, badMagic, b), len(a), ErrCorruptBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := wholeBatches(tc.in)
			if len(got) != tc.want || !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Errorf("wholeBatches: %d bytes, %v; want %d, %v", len(got), err, tc.want, tc.err)
			}
			// A caller's append must not write into the bytes after the
			// prefix (the next partition's, in a response buffer).
			if cap(got) != len(got) {
				t.Errorf("prefix of %d bytes has capacity %d", len(got), cap(got))
			}
		})
	}
}
