package batch

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// produceRecords concatenates one batch of each codec, as the records field
// of a produce request may.
func produceRecords(t testing.TB) ([]byte, [][]byte) {
	rng := rand.New(rand.NewPCG(15, 16))
	var all []byte
	var each [][]byte
	for _, c := range allCodecs {
		b := clientBatch(t, batchSpec{codec: c, producerID: -1, baseSequence: -1}, genRecords(rng, 20, 50))
		all = append(all, b...)
		each = append(each, b)
	}
	return all, each
}

// TestSplit walks concatenated batches and checks that each comes out whole
// and valid.
func TestSplit(t *testing.T) {
	all, each := produceRecords(t)
	it := Split(all)
	i, pos := 0, 0
	for it.Next() {
		if !bytes.Equal(it.Batch(), each[i]) {
			t.Fatalf("batch %d differs", i)
		}
		if cap(it.Batch()) != len(each[i]) {
			t.Fatalf("batch %d: capacity %d reaches into the next batch", i, cap(it.Batch()))
		}
		if it.Header().Codec() != allCodecs[i] {
			t.Fatalf("batch %d: codec %s", i, it.Header().Codec())
		}
		if _, err := Validate(it.Batch(), Strict); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		pos += len(each[i])
		if it.Pos() != pos {
			t.Fatalf("Pos %d, want %d", it.Pos(), pos)
		}
		i++
	}
	if it.Err() != nil || i != len(each) {
		t.Fatalf("%d batches, err %v", i, it.Err())
	}
	if it.Next() || it.Batch() != nil {
		t.Fatal("Next after the end")
	}

	empty := Split(nil)
	if empty.Next() || empty.Err() != nil {
		t.Fatal("empty input yields a batch or an error")
	}
}

// TestSplitTornTail cuts the input at every byte of the last batch: the
// batches before it come out, then ErrShort, with Pos at the cut batch, which
// is where recovery truncates a torn segment.
func TestSplitTornTail(t *testing.T) {
	all, each := produceRecords(t)
	lastStart := len(all) - len(each[len(each)-1])
	for cut := lastStart + 1; cut < len(all); cut++ {
		it := Split(all[:cut])
		n := 0
		for it.Next() {
			n++
		}
		if n != len(each)-1 || !errors.Is(it.Err(), ErrShort) || it.Pos() != lastStart {
			t.Fatalf("cut at %d: %d batches, err %v, pos %d", cut, n, it.Err(), it.Pos())
		}
		checkSentinel(t, it.Err())
	}
}

// TestSplitGarbage checks that a bad header in the middle stops the walk
// there with its own error.
func TestSplitGarbage(t *testing.T) {
	all, each := produceRecords(t)
	bad := append([]byte{}, all...)
	bad[len(each[0])+MagicPos] = 1
	it := Split(bad)
	n := 0
	for it.Next() {
		n++
	}
	if n != 1 || !errors.Is(it.Err(), ErrMagic) || it.Pos() != len(each[0]) {
		t.Fatalf("%d batches, err %v, pos %d", n, it.Err(), it.Pos())
	}
}

// TestSplitAllocs checks that walking batches allocates nothing.
func TestSplitAllocs(t *testing.T) {
	all, _ := produceRecords(t)
	allocs := testing.AllocsPerRun(100, func() {
		it := Split(all)
		for it.Next() {
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per walk", allocs)
	}
}
