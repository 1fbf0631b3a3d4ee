package netpoll

import (
	"encoding/binary"
	"fmt"

	"ringlog/internal/framepool"
)

// frameChunkMin is the first allocation for a frame body. A body grows from
// there to at most four times what has arrived, so that a client announcing
// a large frame and sending nothing more costs this much, not the announced
// size.
const frameChunkMin = 64 << 10

// splitter cuts a byte stream into Kafka frames:
//
//	+----------------------+----------------------------+
//	| length: int32, BE    | body: length bytes         |
//	+----------------------+----------------------------+
//
// It is a pure state machine, fed by copying stream bytes into the slice
// need returns and reporting how many with advance; the caller decides where
// the bytes come from (gnet's inbound buffer, a bufio.Reader, a fuzzer).
// Bytes are copied once, straight into the frame body handed to the handler.
//
// The length is checked before anything is allocated for the body; the body
// then grows with what arrives (frameChunkMin, then up to 4x the bytes
// received), never to the announced length ahead of the bytes.
//
// Bodies of frameChunkMin bytes and more live in pooled buffers
// (internal/framepool) whose capacity is a power of two; the frame handed out is
// cut to its exact length and capacity all the same, and the whole buffer
// is kept in done until the caller takes it (to be recycled once the
// handler has finished with the frame).
type splitter struct {
	max  int32   // MaxFrameBytes
	hdr  [4]byte // the length prefix being received
	nhdr int     // bytes of hdr received
	size int     // the body's announced length, once nhdr == 4
	body []byte  // len: bytes received, cap: bytes allocated
	err  error   // sticky: once the stream is bad it stays bad
	// done is the pooled buffer under the frame advance returned last, or
	// nil when that frame was allocated exactly (small frames).
	done []byte
}

func newSplitter(maxFrameBytes int32) splitter { return splitter{max: maxFrameBytes} }

// need returns where the next stream bytes go: the rest of the length
// prefix, or free room in the frame body (growing it if it is full). It is
// never empty unless the splitter failed.
func (s *splitter) need() []byte {
	if s.err != nil {
		return nil
	}
	if s.nhdr < len(s.hdr) {
		return s.hdr[s.nhdr:]
	}
	if len(s.body) == cap(s.body) {
		// Grow geometrically so a large frame is copied a bounded number of
		// times (a 1 MiB frame: 64 KiB -> 256 KiB -> 1 MiB), and cap at the
		// announced size so the final body is exactly the frame.
		// A pooled buffer rounds the size up to a power of two; that stays
		// within 4x the bytes received, since 4x a previous class size is
		// itself a class size.
		grown := framepool.Get(min(s.size, max(frameChunkMin, 4*len(s.body))))[:len(s.body)]
		copy(grown, s.body)
		framepool.Put(s.body)
		s.body = grown
	}
	// A pooled buffer may be larger than the frame: the bytes after the
	// frame are the next frame's.
	return s.body[len(s.body):min(cap(s.body), s.size)]
}

// bodyRoom returns need's slice when a frame body has started arriving
// and is not complete (growing the body if it is full, as need does), and
// nil otherwise: between frames, inside the length prefix, or before the
// first byte of a body, whose chunk only arriving bytes justify.
func (s *splitter) bodyRoom() []byte {
	if s.err != nil || s.nhdr < len(s.hdr) || len(s.body) == 0 {
		return nil
	}
	return s.need()
}

// advance records that n bytes were copied into the slice need returned. It
// returns the frame body when it is complete (owned by the caller from then
// on: the splitter forgets it, but for the pooled buffer under it, which
// takeDone hands over), or an error when the length prefix is negative or
// above the limit; the error is sticky.
func (s *splitter) advance(n int) ([]byte, error) {
	s.done = nil
	if s.err != nil {
		return nil, s.err
	}
	if s.nhdr < len(s.hdr) {
		s.nhdr += n
		if s.nhdr < len(s.hdr) {
			return nil, nil
		}
		size := int32(binary.BigEndian.Uint32(s.hdr[:]))
		switch {
		case size < 0:
			s.err = fmt.Errorf("%w: %d", ErrFrameNegative, size)
			return nil, s.err
		case size > s.max:
			s.err = fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, size, s.max)
			return nil, s.err
		}
		s.size = int(size)
		if s.size == 0 {
			s.nhdr = 0
			return []byte{}, nil
		}
		s.body = nil // allocated by the next need, once bytes arrive for it
		return nil, nil
	}
	s.body = s.body[:len(s.body)+n]
	if len(s.body) < s.size {
		return nil, nil
	}
	frame := s.body[:s.size:s.size]
	if framepool.Pooled(cap(s.body)) {
		s.done = s.body
	}
	s.body, s.nhdr, s.size = nil, 0, 0
	return frame, nil
}

// takeDone returns the pooled buffer under the frame advance returned last
// (nil if it had none) and forgets it.
func (s *splitter) takeDone() []byte {
	b := s.done
	s.done = nil
	return b
}

// midFrame reports whether part of a frame has been received: a connection
// that ends now was cut inside a frame.
func (s *splitter) midFrame() bool { return s.err == nil && s.nhdr > 0 }
