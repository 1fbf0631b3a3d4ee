package netpoll

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
)

// feed runs stream through fr the way the connections do: at most chunk
// bytes arrive at a time into an inbound buffer; a frame of known length
// takes them with need and advance, anything else with offer, which
// leaves what it did not use in the buffer; with the buffer empty, an
// announced body that has started is read into directly (gnet's direct
// socket reads). check, if set, runs after every step with the bytes the
// frame under way has used so far. feed returns the frames and the first
// error.
func feed(t testing.TB, fr *framer, stream []byte, chunk int, check func(received int)) ([][]byte, error) {
	var frames [][]byte
	var inbound []byte
	received := 0
	take := func(n int) []byte { // n more bytes arrive
		b := stream[:min(n, len(stream))]
		stream = stream[len(b):]
		return b
	}
	for len(stream) > 0 || len(inbound) > 0 {
		if len(inbound) == 0 {
			if room := fr.bodyRoom(); room != nil {
				n := copy(room, take(min(chunk, len(room))))
				received += n
				f, err := fr.advance(n)
				if err != nil {
					return frames, err
				}
				if f != nil {
					frames, received = append(frames, f), 0
				}
				continue
			}
			inbound = take(chunk)
		}
		var n int
		var f []byte
		var err error
		if fr.announced() {
			n = copy(fr.need(), inbound)
			f, err = fr.advance(n)
		} else {
			n, f, err = fr.offer(inbound)
		}
		if err != nil {
			return frames, err
		}
		if n == 0 && f == nil {
			t.Fatalf("no progress with %d bytes offered", len(inbound))
		}
		inbound = inbound[n:]
		received += n
		if f != nil {
			frames, received = append(frames, f), 0
		} else if check != nil {
			check(received)
		}
	}
	return frames, nil
}

// frameCase is one row of the splitters' table tests: stream cut by sp
// with max as MaxFrameBytes must give frames, then err (nil: the stream
// ends between frames or inside one).
type frameCase struct {
	name   string
	max    int32
	stream []byte
	frames [][]byte
	err    error
}

// runFrameCases feeds every case through a framer in chunks of several
// sizes and checks the frames (exact length and capacity) and the error.
func runFrameCases(t *testing.T, sp Splitter, tests []frameCase) {
	t.Helper()
	for _, tc := range tests {
		for _, chunk := range []int{1, 3, 4096, 1 << 30} {
			fr := newFramer(sp, tc.max)
			frames, err := feed(t, &fr, tc.stream, chunk, nil)
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

func be32(n int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

func TestLengthPrefixed(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 300<<10)
	runFrameCases(t, LengthPrefixed{}, []frameCase{
		{"one", 100, frame([]byte("hello")), [][]byte{[]byte("hello")}, nil},
		{"empty frame", 100, frame(nil), [][]byte{{}}, nil},
		{"two", 100, append(frame([]byte("a")), frame([]byte("bc"))...), [][]byte{[]byte("a"), []byte("bc")}, nil},
		{"at limit", 5, frame([]byte("12345")), [][]byte{[]byte("12345")}, nil},
		{"above limit", 4, frame([]byte("12345")), nil, ErrFrameTooLarge},
		{"max int32", 100 << 20, be32(1<<31 - 1), nil, ErrFrameTooLarge},
		{"negative", 100, be32(-1), nil, ErrFrameNegative},
		{"min int32", 100, be32(-1 << 31), nil, ErrFrameNegative},
		{"partial header", 100, []byte{0, 0}, nil, nil},
		{"partial body", 100, append(be32(10), "abc"...), nil, nil},
		{"large, grown", 1 << 20, frame(big), [][]byte{big}, nil},
		// Pooled buffers are rounded up to a power of two: the bytes past
		// the first frame's end belong to the second.
		{"two large", 1 << 20, append(frame(big), frame(big[:100<<10])...), [][]byte{big, big[:100<<10]}, nil},
		{"good then bad", 100, append(frame([]byte("ok")), be32(-5)...), [][]byte{[]byte("ok")}, ErrFrameNegative},
	})
}

// A client announcing a frame just under the limit and sending a few bytes
// costs the first chunk, not the announced size, or the largest body it
// sent whole before.
func TestFramerAllocatesWithArrivals(t *testing.T) {
	fr := newFramer(LengthPrefixed{}, 100<<20)
	stream := append(be32(100<<20-1), "tiny"...)
	if _, err := feed(t, &fr, stream, 1<<30, nil); err != nil {
		t.Fatal(err)
	}
	if c := cap(fr.buf); c > frameChunkMin {
		t.Fatalf("%d bytes allocated for 4 received", c)
	}
	if !fr.midFrame() {
		t.Fatal("midFrame = false inside a frame")
	}
	// A connection that sent a 1 MiB body whole gets its next one of that
	// size in one buffer at its first bytes (no growth, no copies), and no
	// more than that for a larger one; a fresh connection still gets the
	// first chunk.
	body := bytes.Repeat([]byte{7}, 1<<20)
	fr = newFramer(LengthPrefixed{}, 100<<20)
	stream = slices.Concat(frame(body), be32(1<<20), []byte("tiny"))
	if got, err := feed(t, &fr, stream, 16<<10, nil); err != nil || len(got) != 1 || !bytes.Equal(got[0], body) {
		t.Fatalf("%d frames, %v", len(got), err)
	}
	if c := cap(fr.buf); c != 1<<20 {
		t.Fatalf("the second 1 MiB body: %d bytes allocated at its first 4, want 1 MiB", c)
	}
	fr = newFramer(LengthPrefixed{}, 100<<20)
	stream = slices.Concat(frame(body), be32(8<<20), []byte("tiny"))
	if _, err := feed(t, &fr, stream, 16<<10, nil); err != nil {
		t.Fatal(err)
	}
	if c := cap(fr.buf); c != 1<<20 {
		t.Fatalf("an 8 MiB body after a 1 MiB one: %d bytes allocated at its first 4, want 1 MiB", c)
	}
	// A line protocol's frame grows with its bytes too.
	fr = newFramer(Lines{}, 100<<20)
	if _, err := feed(t, &fr, []byte(strings.Repeat("x", 1000)), 1<<30, nil); err != nil {
		t.Fatal(err)
	}
	if c := cap(fr.buf); c > 4*1000 {
		t.Fatalf("%d bytes allocated for 1000 received", c)
	}
}

// badSplitter answers whatever its function says, to check that the
// framer holds a broken splitter to the contract instead of misframing,
// looping or growing without bound.
type badSplitter func(data []byte) Frame

func (b badSplitter) Split(data []byte, _ int64, _ int) (Frame, error) { return b(data), nil }
func (badSplitter) AppendResponsePrefix(dst []byte, _ int64) ([]byte, error) {
	return dst, nil
}

func TestFramerHoldsSplitterToContract(t *testing.T) {
	stream := []byte(strings.Repeat("abcdefgh", 64))
	for _, tc := range []struct {
		name string
		sp   badSplitter
		err  error
	}{
		{"negative length", func([]byte) Frame { return Frame{Len: -1} }, ErrSplitter},
		{"head past the end", func([]byte) Frame { return Frame{Len: 2, Head: 3} }, ErrSplitter},
		{"framing too long", func([]byte) Frame { return Frame{Len: 100, Head: MaxFramingBytes, Tail: 1} }, ErrSplitter},
		{"announced before its head", func(d []byte) Frame { return Frame{Len: 150, Head: len(d) + 1} }, ErrSplitter},
		{"body above the limit", func([]byte) Frame { return Frame{Len: 300} }, ErrFrameTooLarge},
		{"never an end", func([]byte) Frame { return Frame{} }, ErrFrameTooLarge},
		{"an end it said was not there", func(d []byte) Frame {
			if len(d) < 10 {
				return Frame{}
			}
			return Frame{Len: 1}
		}, ErrSplitter},
	} {
		for _, chunk := range []int{1, 7} {
			fr := newFramer(tc.sp, 200)
			if _, err := feed(t, &fr, stream, chunk, nil); !errors.Is(err, tc.err) {
				t.Errorf("%s/chunk %d: %v, want %v", tc.name, chunk, err, tc.err)
			}
		}
	}
}
