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

// TestStreamCopy: streamCopy copies exactly, at every alignment of the
// destination within a cache line, for lengths around its streaming bound
// and the 64-byte lines, and writes no byte outside the destination.
func TestStreamCopy(t *testing.T) {
	src := make([]byte, 4*streamMin+200)
	for i := range src {
		src[i] = byte(i*13 + i>>8 + 1)
	}
	buf := make([]byte, len(src)+256)
	for off := range 64 + 3 {
		for _, n := range []int{0, 1, 63, 64, 65, streamMin - 1, streamMin, streamMin + 1, streamMin + 63, streamMin + 64, 2*streamMin + 127, len(src) - 1, len(src)} {
			for i := range buf {
				buf[i] = 0xee
			}
			dst := buf[off : off+n]
			if got := streamCopy(dst, src); got != n {
				t.Fatalf("offset %d, %d bytes: copied %d", off, n, got)
			}
			if !bytes.Equal(dst, src[:n]) {
				t.Fatalf("offset %d, %d bytes: copy differs", off, n)
			}
			for i, c := range buf {
				if (i < off || i >= off+n) && c != 0xee {
					t.Fatalf("offset %d, %d bytes: byte %d outside the destination written", off, n, i)
				}
			}
		}
	}
	// A source shorter than the destination: copy's length.
	if got := streamCopy(buf[:streamMin*2], src[:streamMin+5]); got != streamMin+5 || !bytes.Equal(buf[:got], src[:got]) {
		t.Fatalf("short source: copied %d", got)
	}
}
