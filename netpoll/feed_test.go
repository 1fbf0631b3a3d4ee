package netpoll

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// feedBuffers pushes stream through a bufFeed cut at the given offsets
// into provided buffers, each a fresh copy that is poisoned as soon as
// push returns (the loop hands it back to the ring then). pauses says,
// bit by bit, whether the connection is paused at each frame boundary;
// whatever is pending is drained, unpaused, at the end. It returns the
// frames, checked only after every buffer was poisoned, and the error.
func feedBuffers(stream []byte, cuts []int, maxFrame int32, pauses uint64) ([][]byte, error) {
	b := bufFeed{fr: newFramer(LengthPrefixed{}, maxFrame)}
	var frames [][]byte
	asks := 0
	ready := func() bool {
		asks++
		return pauses>>(asks%64)&1 == 0
	}
	emit := func(frame, _ []byte) bool {
		frames = append(frames, frame)
		return true
	}
	prev := 0
	for _, cut := range append(cuts, len(stream)) {
		buf := append([]byte(nil), stream[prev:cut]...)
		prev = cut
		if len(buf) == 0 {
			continue
		}
		err := b.push(buf, ready, emit)
		for i := range buf {
			buf[i] = 0xEE
		}
		if err != nil {
			return frames, err
		}
	}
	err := b.drain(func() bool { return true }, emit)
	if err == nil && b.paused() {
		err = errStillPending
	}
	return frames, err
}

var errStillPending = bytes.ErrTooLarge // any sentinel: bytes left pending after an unpaused drain

// FuzzProvidedBuffers runs Kafka's framing over the uring path's receive
// side: the stream in provided buffers of the input's chunk size, and
// then cut in two at every byte, with the connection pausing at frame
// boundaries as the input says. Frames must match a direct parse, whatever
// the cuts and pauses, and hold no byte of a buffer after it went back.
// Input: byte 0 chunk size, byte 1 MaxFrameBytes as a power of two,
// bytes 2-9 the pause pattern, then the stream.
func FuzzProvidedBuffers(f *testing.F) {
	seed := func(chunk, maxLog byte, pauses uint64, stream []byte) {
		in := []byte{chunk, maxLog}
		in = binary.BigEndian.AppendUint64(in, pauses)
		f.Add(append(in, stream...))
	}
	seed(1, 10, 0, frame([]byte("hello")))
	seed(3, 10, 0xaaaa, append(append(frame([]byte("a")), frame(nil)...), frame([]byte("bcdefgh"))...))
	seed(64, 20, 0xf0f0, bytes.Repeat(frame(bytes.Repeat([]byte{7}, 100)), 5))
	seed(5, 4, 0, frame(bytes.Repeat([]byte{1}, 17)))
	seed(2, 20, 1, binary.BigEndian.AppendUint32(nil, 0xffffffff))

	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 10 {
			return
		}
		chunk := int(in[0])%256 + 1
		maxFrame := int32(1) << min(in[1]%32, 24)
		pauses := binary.BigEndian.Uint64(in[2:])
		stream := in[10:]

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
		check := func(name string, got [][]byte, err error) {
			t.Helper()
			if err == errStillPending {
				t.Fatalf("%s: bytes left pending after an unpaused drain", name)
			}
			if (err != nil) != wantBad {
				t.Fatalf("%s: error %v, want bad stream %v", name, err, wantBad)
			}
			if len(got) != len(want) {
				t.Fatalf("%s: %d frames, want %d", name, len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("%s: frame %d differs: %q, want %q", name, i, got[i], want[i])
				}
			}
		}

		var cuts []int
		for c := chunk; c < len(stream); c += chunk {
			cuts = append(cuts, c)
		}
		got, err := feedBuffers(stream, cuts, maxFrame, pauses)
		check("chunked", got, err)

		// Two buffers, the cut at every byte (bounded: quadratic).
		if len(stream) <= 256 {
			for at := 1; at < len(stream); at++ {
				got, err := feedBuffers(stream, []int{at}, maxFrame, pauses)
				check("cut", got, err)
			}
		}
	})
}
