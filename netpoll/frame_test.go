package netpoll

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// split feeds stream to a splitter in chunks of at most chunk bytes and
// returns the frames and the first error.
func split(t testing.TB, maxFrame int32, stream []byte, chunk int) ([][]byte, error) {
	s := newSplitter(maxFrame)
	var frames [][]byte
	for len(stream) > 0 {
		dst := s.need()
		if len(dst) == 0 {
			t.Fatalf("need returned nothing with %d bytes to go", len(stream))
		}
		n := copy(dst, stream[:min(chunk, len(stream))])
		stream = stream[n:]
		f, err := s.advance(n)
		if err != nil {
			return frames, err
		}
		if f != nil {
			frames = append(frames, f)
		}
	}
	return frames, nil
}

func TestSplitter(t *testing.T) {
	be := func(n int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }
	big := bytes.Repeat([]byte{7}, 300<<10)
	tests := []struct {
		name   string
		max    int32
		stream []byte
		frames [][]byte
		err    error
	}{
		{"one", 100, frame([]byte("hello")), [][]byte{[]byte("hello")}, nil},
		{"empty frame", 100, frame(nil), [][]byte{{}}, nil},
		{"two", 100, append(frame([]byte("a")), frame([]byte("bc"))...), [][]byte{[]byte("a"), []byte("bc")}, nil},
		{"at limit", 5, frame([]byte("12345")), [][]byte{[]byte("12345")}, nil},
		{"above limit", 4, frame([]byte("12345")), nil, ErrFrameTooLarge},
		{"max int32", 100 << 20, be(1<<31 - 1), nil, ErrFrameTooLarge},
		{"negative", 100, be(-1), nil, ErrFrameNegative},
		{"min int32", 100, be(-1 << 31), nil, ErrFrameNegative},
		{"partial header", 100, []byte{0, 0}, nil, nil},
		{"partial body", 100, append(be(10), "abc"...), nil, nil},
		{"large, grown", 1 << 20, frame(big), [][]byte{big}, nil},
		// Pooled buffers are rounded up to a power of two: the bytes past
		// the first frame's end belong to the second.
		{"two large", 1 << 20, append(frame(big), frame(big[:100<<10])...), [][]byte{big, big[:100<<10]}, nil},
		{"good then bad", 100, append(frame([]byte("ok")), be(-5)...), [][]byte{[]byte("ok")}, ErrFrameNegative},
	}
	for _, tc := range tests {
		for _, chunk := range []int{1, 3, 4096, 1 << 30} {
			frames, err := split(t, tc.max, tc.stream, chunk)
			if !errors.Is(err, tc.err) {
				t.Errorf("%s/chunk %d: err %v, want %v", tc.name, chunk, err, tc.err)
			}
			if len(frames) != len(tc.frames) {
				t.Errorf("%s/chunk %d: %d frames, want %d", tc.name, chunk, len(frames), len(tc.frames))
				continue
			}
			for i := range frames {
				if !bytes.Equal(frames[i], tc.frames[i]) || cap(frames[i]) != len(tc.frames[i]) {
					t.Errorf("%s/chunk %d: frame %d differs (len %d cap %d)", tc.name, chunk, i, len(frames[i]), cap(frames[i]))
				}
			}
		}
	}
}

// A client announcing a frame just under the limit and sending a few bytes
// costs the first chunk, not the announced size.
func TestSplitterAllocatesWithArrivals(t *testing.T) {
	s := newSplitter(100 << 20)
	stream := binary.BigEndian.AppendUint32(nil, 100<<20-1)
	stream = append(stream, "tiny"...)
	for len(stream) > 0 {
		n := copy(s.need(), stream)
		stream = stream[n:]
		if _, err := s.advance(n); err != nil {
			t.Fatal(err)
		}
	}
	if c := cap(s.body); c > frameChunkMin {
		t.Fatalf("%d bytes allocated for 4 received", c)
	}
	if !s.midFrame() {
		t.Fatal("midFrame = false inside a frame")
	}
}
