package netpoll

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// FuzzFrames feeds an arbitrary byte stream through the splitter in
// arbitrary chunks. The splitter must never panic, never hold more body
// memory than max(frameChunkMin, 4x the body bytes received), agree with a
// direct parse of the stream, and stop at the first bad length.
//
// Input: byte 0 = chunk size (1..256), byte 1 = MaxFrameBytes as a power of
// two (capped at 2^24), then the stream.
func FuzzFrames(f *testing.F) {
	seed := func(chunk, maxLog byte, stream []byte) { f.Add(append([]byte{chunk, maxLog}, stream...)) }
	seed(1, 10, frame([]byte("hello")))
	seed(7, 10, append(frame([]byte("a")), frame(nil)...))
	seed(255, 4, frame(bytes.Repeat([]byte{1}, 17)))
	seed(3, 20, binary.BigEndian.AppendUint32(nil, 0x7fffffff))
	seed(4, 20, binary.BigEndian.AppendUint32(nil, 0xffffffff))
	seed(200, 24, append(binary.BigEndian.AppendUint32(nil, 1<<20), bytes.Repeat([]byte{9}, 1000)...))

	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 2 {
			return
		}
		chunk := int(in[0])%256 + 1
		maxFrame := int32(1) << min(in[1]%32, 24)
		stream := in[2:]

		// The reference: a direct parse.
		var want [][]byte
		wantBad := false
		for rest := stream; len(rest) >= 4; {
			n := int32(binary.BigEndian.Uint32(rest))
			if n < 0 || n > maxFrame {
				wantBad = true
				break
			}
			if len(rest) < 4+int(n) {
				break
			}
			want = append(want, rest[4:4+n])
			rest = rest[4+n:]
		}

		s := newSplitter(maxFrame)
		var got [][]byte
		bad := false
		for rest := stream; len(rest) > 0; {
			dst := s.need()
			if len(dst) == 0 {
				t.Fatal("need returned nothing on a healthy stream")
			}
			n := copy(dst, rest[:min(chunk, len(rest))])
			rest = rest[n:]
			fr, err := s.advance(n)
			if err != nil {
				bad = true
				if s.need() != nil {
					t.Fatal("need after an error")
				}
				break
			}
			if fr != nil {
				got = append(got, fr)
			}
			if c := cap(s.body); c > max(frameChunkMin, 4*len(s.body)) {
				t.Fatalf("holding %d bytes for %d received", c, len(s.body))
			}
		}
		if bad != wantBad {
			t.Fatalf("bad stream: got %v, want %v", bad, wantBad)
		}
		if len(got) != len(want) {
			t.Fatalf("%d frames, want %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("frame %d differs", i)
			}
		}
	})
}
