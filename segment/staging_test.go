package segment

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"ringlog/segment/batch"
)

// TestStaging: on a log with direct writes Add copies each batch into the
// staging buffer and runs the check on the copy, with the copy's
// Checksum; a batch whose check fails is not taken, and Truncate drops
// batches taken; the append writes exactly the batches left, in order. On
// a log that writes through the page cache the batches are checked where
// they are.
func TestStaging(t *testing.T) {
	for _, direct := range []bool{true, false} {
		t.Run(fmt.Sprint("direct=", direct), func(t *testing.T) {
			l := openLog(t, t.TempDir(), smallConfig(), Options{DirectWrites: direct})
			defer l.Close()
			// Something written first, so that a direct stage starts
			// with the segment's last partial block.
			first := mkBatch(t, 2, 100, 1, 0)
			if _, err := l.Append([][]byte{first}, AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			want := stamped(t, first, 0, 0)
			bs := [][]byte{mkBatch(t, 3, 500, 1, 1), mkBatch(t, 1, 40000, 1, 2), mkBatch(t, 2, 70, 1, 3), mkBatch(t, 5, 900, 1, 4)}
			var size int64
			for _, b := range bs {
				size += int64(len(b))
			}
			st, err := l.Stage(size)
			if err != nil {
				t.Fatal(err)
			}
			refused := errors.New("refused")
			var checked int
			check := func(fail bool) func([]byte, uint32) error {
				return func(b []byte, sum uint32) error {
					checked++
					if sum != batch.Checksum(b) {
						t.Fatalf("sum %#x, the staged bytes' Checksum %#x", sum, batch.Checksum(b))
					}
					if fail {
						return refused
					}
					return nil
				}
			}
			for i, b := range bs {
				got, err := st.Add(b, check(i == 2))
				if i == 2 {
					if !errors.Is(err, refused) || st.Len() != 2 {
						t.Fatalf("a refused batch: %v, %d batches taken", err, st.Len())
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if same := unsafe.SliceData(got) == unsafe.SliceData(b); same == direct || string(got) != string(b) {
					t.Fatalf("batch %d: staged in place %v on a log with direct writes %v, bytes equal %v", i, same, direct, string(got) == string(b))
				}
			}
			if checked != len(bs) {
				t.Fatalf("%d checks for %d batches", checked, len(bs))
			}
			st.Truncate(2) // drops bs[3]
			if _, err := st.Add(bs[2], nil); err != nil {
				t.Fatal(err)
			}
			task, err := l.PrepareStaged(st, AppendOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.run(task.Ops, task); err != nil || task.Err != nil {
				t.Fatal(err, task.Err)
			}
			want = append(want, stampedAll(t, [][]byte{bs[0], bs[1], bs[2]}, 2, 0)...)
			sameBytes(t, readAll(t, l), want, "after the staged append")
			full, _ := l.Stage(int64(len(bs[0]) - 1))
			if _, err := full.Add(bs[0], nil); !errors.Is(err, ErrStagingFull) {
				t.Fatalf("a batch past the staging's size: %v", err)
			}
			full.Release()
		})
	}
}
