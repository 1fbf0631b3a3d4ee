package batch

import (
	"bytes"
	"testing"
)

// TestCopySum: the copy is exact and the sum is Checksum's, for lengths
// around the header's checked range and the chunks' boundaries, and for a
// destination shorter than the source.
func TestCopySum(t *testing.T) {
	src := make([]byte, 3*copySumChunk+100)
	for i := range src {
		src[i] = byte(i*7 + i>>9)
	}
	for _, n := range []int{0, 1, AttributesPos - 1, AttributesPos, AttributesPos + 1, HeaderSize, copySumChunk - 1, copySumChunk, copySumChunk + 1, 2*copySumChunk + AttributesPos, len(src)} {
		dst := make([]byte, n)
		got, sum := CopySum(dst, src)
		if got != n || !bytes.Equal(dst, src[:n]) {
			t.Fatalf("%d bytes: copied %d, equal %v", n, got, bytes.Equal(dst, src[:n]))
		}
		if want := Checksum(src[:n]); sum != want {
			t.Fatalf("%d bytes: sum %#x, Checksum %#x", n, sum, want)
		}
	}
}
