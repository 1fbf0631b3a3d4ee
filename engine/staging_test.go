package engine

import (
	"errors"
	"fmt"
	"testing"

	"ringlog/segment"
	"ringlog/segment/batch"
)

// TestCorruptBatchesAmongGoodOnes: a producer's batches are checked on the
// shard as they are staged, with other requests of the same round around
// them. Appends sent without waiting (so that rounds hold several): every
// third one an intact batch followed by one whose records were corrupted
// after its CRC was sealed. Each such request is refused with the CRC
// error and leaves nothing: not its bytes, not its
// sequence (it reuses the sequence the next good batch carries, so a
// corrupt batch that slipped into the producer state would make that
// batch a duplicate or out of order), while every good one is written, in
// order, with its own bytes.
func TestCorruptBatchesAmongGoodOnes(t *testing.T) {
	for _, mode := range modes() {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			e := openEngine(t, t.TempDir(), mode)
			defer e.Close()
			tp := TP{"c", 0}
			if _, err := e.CreateTopic("c", 1, -1, nil, false); err != nil {
				t.Fatal(err)
			}
			type answer struct {
				i   int
				res AppendResult
				err error
			}
			const n = 90
			answers := make(chan answer, n)
			var good []uint32 // the CRCs of the good batches, in order
			seq := int32(0)
			for i := range n {
				b := mkBatch(t, 4, fmt.Sprint("v", i), 1_700_000_000_000, 7, 0, seq)
				if i%3 == 1 {
					// A request of two batches, the second corrupt: the
					// first, intact, must not be written either.
					bad := mkBatch(t, 4, fmt.Sprint("w", i), 1_700_000_000_000, 7, 0, seq+4)
					bad[len(bad)-2] ^= 0x40 // in the last record's value
					b = append(b, bad...)
				} else {
					h, _ := batch.ParseHeader(b)
					good = append(good, h.CRC)
					seq += 4
				}
				e.Append(tp, b, AppendOptions{}, func(res AppendResult, err error) { answers <- answer{i, res, err} })
			}
			next := map[int]int64{}
			for range n {
				a := <-answers
				if a.i%3 == 1 {
					if !errors.Is(a.err, segment.ErrInvalidBatch) || !errors.Is(a.err, batch.ErrCRC) {
						t.Fatalf("corrupt append %d: %v, want the CRC error", a.i, a.err)
					}
					continue
				}
				if a.err != nil {
					t.Fatalf("good append %d: %v", a.i, a.err)
				}
				next[a.i] = a.res.BaseOffset
			}
			hs := readAll(t, e, tp)
			if len(hs) != len(good) {
				t.Fatalf("%d batches in the log, %d good ones sent", len(hs), len(good))
			}
			for k, h := range hs {
				if h.CRC != good[k] || h.BaseOffset != int64(4*k) || h.BaseSequence != int32(4*k) {
					t.Fatalf("batch %d: offset %d sequence %d CRC %#x; want offset and sequence %d, CRC %#x", k, h.BaseOffset, h.BaseSequence, h.CRC, 4*k, good[k])
				}
			}
			for i, off := range next {
				k := 2*(i/3) + i%3/2 // the good batches before it
				if off != int64(4*k) {
					t.Fatalf("good append %d answered offset %d, want %d", i, off, 4*k)
				}
			}
		})
	}
}
