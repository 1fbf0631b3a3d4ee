package netpoll

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// The fuzz targets share one input layout: byte 0 = chunk size (1..256),
// byte 1 = MaxFrameBytes as a power of two (capped at 2^24), then the
// stream. Each checks its splitter with fuzzSplitter; FuzzFrames also
// against a direct parse of Kafka's framing.

func seedFuzz(f *testing.F, chunk, maxLog byte, stream []byte) {
	f.Add(append([]byte{chunk, maxLog}, stream...))
}

func fuzzInput(in []byte) (chunk int, maxFrame int32, stream []byte, ok bool) {
	if len(in) < 2 {
		return 0, 0, nil, false
	}
	return int(in[0])%256 + 1, int32(1) << min(in[1]%32, 24), in[2:], true
}

// fuzzSplitter cuts stream two ways and compares them. The reference asks
// sp about the whole rest of the stream at once (resume 0), checking every
// answer: it never panics, never reports a frame longer than the input or
// a body above the limit. The framer gets the stream in chunks, as a
// connection does, so that sp sees each frame grow with the Resume of its
// previous answer: it must cut the same frames (with the same bytes) and
// fail where the reference fails, and never hold more than
// max(frameChunkMin, 4x) the bytes a frame has received, or a pooled
// buffer for the largest body completed before (earned, rounded up to a
// power of two).
func fuzzSplitter(t *testing.T, sp Splitter, chunk int, maxFrame int32, stream []byte) {
	var want [][]byte
	wantBad := false
	for rest := stream; len(rest) > 0; {
		fr, err := sp.Split(rest, 0, int(maxFrame))
		if err != nil {
			wantBad = true
			break
		}
		if fr.Len < 0 || fr.Head < 0 || fr.Tail < 0 || fr.Head+fr.Tail > MaxFramingBytes {
			t.Fatalf("answer %+v out of bounds", fr)
		}
		if fr.Len == 0 {
			if len(rest) >= int(maxFrame)+MaxFramingBytes {
				wantBad = true // the framer's own bound
			}
			break
		}
		if fr.Head+fr.Tail > fr.Len || fr.Len-fr.Head-fr.Tail > int(maxFrame) {
			t.Fatalf("frame %+v: body beyond the frame or above the limit %d", fr, maxFrame)
		}
		if fr.Len > len(rest) {
			break // announced, not all here
		}
		want = append(want, rest[fr.Head:fr.Len-fr.Tail])
		rest = rest[fr.Len:]
	}

	f := newFramer(sp, maxFrame)
	got, err := feed(t, &f, stream, chunk, func(received int) {
		if c := cap(f.buf); c > max(frameChunkMin, 4*received, 2*f.earned) {
			t.Fatalf("holding %d bytes for %d received", c, received)
		}
	})
	if err != nil && !errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, ErrFrameNegative) && !errors.Is(err, ErrMalformedFrame) {
		t.Fatalf("unexpected error %v", err)
	}
	if bad := err != nil; bad != wantBad {
		t.Fatalf("bad stream: got %v (%v), want %v", bad, err, wantBad)
	}
	if len(got) != len(want) {
		t.Fatalf("%d frames, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) || cap(got[i]) != len(want[i]) {
			t.Fatalf("frame %d differs: %q, want %q", i, got[i], want[i])
		}
	}
}

// FuzzFrames: LengthPrefixed, also against a direct parse of the stream,
// stopping at the first bad length.
func FuzzFrames(f *testing.F) {
	seedFuzz(f, 1, 10, frame([]byte("hello")))
	seedFuzz(f, 7, 10, append(frame([]byte("a")), frame(nil)...))
	seedFuzz(f, 255, 4, frame(bytes.Repeat([]byte{1}, 17)))
	seedFuzz(f, 3, 20, binary.BigEndian.AppendUint32(nil, 0x7fffffff))
	seedFuzz(f, 4, 20, binary.BigEndian.AppendUint32(nil, 0xffffffff))
	seedFuzz(f, 200, 24, append(binary.BigEndian.AppendUint32(nil, 1<<20), bytes.Repeat([]byte{9}, 1000)...))

	f.Fuzz(func(t *testing.T, in []byte) {
		chunk, maxFrame, stream, ok := fuzzInput(in)
		if !ok {
			return
		}
		var want [][]byte
		for rest := stream; len(rest) >= 4; {
			n := int32(binary.BigEndian.Uint32(rest))
			if n < 0 || n > maxFrame || len(rest) < 4+int(n) {
				break
			}
			want = append(want, rest[4:4+n])
			rest = rest[4+n:]
		}
		fr := newFramer(LengthPrefixed{}, maxFrame)
		got, _ := feed(t, &fr, stream, chunk, nil)
		if len(got) != len(want) {
			t.Fatalf("%d frames, want %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("frame %d differs", i)
			}
		}
		fuzzSplitter(t, LengthPrefixed{}, chunk, maxFrame, stream)
	})
}

// FuzzLines: Lines.
func FuzzLines(f *testing.F) {
	seedFuzz(f, 1, 10, []byte("hello\nworld\r\n"))
	seedFuzz(f, 3, 4, []byte("\n\r\n\r\r\nabcd\r\nabcde\n"))
	seedFuzz(f, 255, 20, []byte(strings.Repeat("x", 3000)+"\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if chunk, maxFrame, stream, ok := fuzzInput(in); ok {
			fuzzSplitter(t, Lines{}, chunk, maxFrame, stream)
		}
	})
}

// FuzzRESP: RESP.
func FuzzRESP(f *testing.F) {
	seedFuzz(f, 1, 10, []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n"))
	seedFuzz(f, 5, 10, []byte("PING\r\n*1\r\n$4\r\nPING\r\n*0\r\n"))
	seedFuzz(f, 2, 6, []byte("*2\r\n$40\r\n"))
	seedFuzz(f, 9, 20, []byte("*1\r\n$-1\r\n*99999999999\r\n$x\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if chunk, maxFrame, stream, ok := fuzzInput(in); ok {
			fuzzSplitter(t, RESP{}, chunk, maxFrame, stream)
		}
	})
}
