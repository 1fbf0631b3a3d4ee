package netpoll

import (
	"encoding/binary"
	"fmt"
	"math"
)

// A Splitter is a wire protocol's framing as netpoll sees it: where each
// request frame ends in a connection's byte stream, which of its bytes the
// handler gets, and what netpoll writes before each response. netpoll
// knows nothing else of the protocol. Config.Splitter picks one;
// LengthPrefixed (Kafka's framing) is the default, Lines and RESP are
// ready-made for line protocols and Redis clients.
//
// One Splitter serves every connection of a server, from every event loop
// (gnet) or reader goroutine (portable) at once, so its methods must be
// safe for concurrent use; the ready-made ones are stateless values.
type Splitter interface {
	// Split looks at data, the bytes of a connection's stream from the
	// start of a frame on (never empty), and says where that frame ends.
	// It runs on the connection's event loop or reader goroutine, the
	// goroutine of Handler.Serve, before the frame is served; it must not
	// block, and must not keep data, which netpoll reuses.
	//
	// maxFrameBytes is Config.MaxFrameBytes, the largest body (the bytes
	// the handler gets) a frame may have. A Splitter reports a frame above
	// it with ErrFrameTooLarge as soon as data shows it, without waiting
	// for the rest.
	//
	// resume is zero for a frame's first call. After an answer that needs
	// more bytes, the next call for the same frame passes the Resume of
	// that answer with data grown by the bytes that arrived (its start
	// unchanged), so that a splitter can go on where it stopped instead of
	// scanning data again: a client trickling a long frame byte by byte
	// must not cost time quadratic in its length.
	//
	// It answers one of (see Frame):
	//   - the frame is complete: 0 < Len <= len(data);
	//   - the frame's length is known, its bytes are not all here yet:
	//     Len > len(data), with Head <= len(data); netpoll then reads
	//     exactly up to Len without calling Split again for this frame,
	//     and hands data[Head:Len-Tail] to the handler;
	//   - more bytes are needed to tell: Len == 0, with Resume;
	//   - an error: the bytes break the protocol (ErrMalformedFrame,
	//     ErrFrameNegative) or the frame is too large (ErrFrameTooLarge).
	//     The connection is closed; frames served before it stand.
	Split(data []byte, resume int64, maxFrameBytes int) (Frame, error)

	// AppendResponsePrefix appends to dst the bytes netpoll writes before
	// a response whose parts hold size bytes, and returns the result
	// (LengthPrefixed: the size as 4 bytes; nothing for protocols whose
	// handlers frame their own responses). An error (a response the
	// prefix cannot describe) closes the connection. It runs on the
	// goroutine of Conn.Reply, any goroutine.
	AppendResponsePrefix(dst []byte, size int64) ([]byte, error)
}

// Frame is a Splitter's answer about the frame at the start of data.
//
//	stream:   | Head | body: the handler's frame | Tail | next frame ...
//	          <------------------ Len ------------------>
type Frame struct {
	// Len is the frame's length in the stream, framing included; zero
	// while the splitter needs more bytes to tell.
	Len int
	// Head and Tail are the framing bytes at the start and the end of
	// the frame (a length prefix, a line terminator) that the handler
	// does not get: its frame is data[Head:Len-Tail]. Together at most
	// MaxFramingBytes.
	Head, Tail int
	// Resume is what the splitter wants passed back with the same frame's
	// next bytes, when Len is zero (how far it got).
	Resume int64
}

// MaxFramingBytes bounds a frame's Head plus Tail. With the body bounded
// by MaxFrameBytes, it bounds what netpoll holds for a frame whose end a
// Splitter has not found yet: MaxFrameBytes + MaxFramingBytes bytes, after
// which the connection is closed whatever the splitter says.
const MaxFramingBytes = 64

// LengthPrefixed is Kafka's framing, netpoll's default: a 4-byte
// big-endian length, then that many bytes of body; a response gets the
// same prefix, written by netpoll.
//
//	+----------------------+----------------------------+
//	| length: int32, BE    | body: length bytes         |
//	+----------------------+----------------------------+
//
// A negative length is ErrFrameNegative and one above maxFrameBytes
// ErrFrameTooLarge, both known from the prefix alone: the connection is
// closed before any of the body is read or allocated.
type LengthPrefixed struct{}

// Split implements Splitter.
func (LengthPrefixed) Split(data []byte, _ int64, maxFrameBytes int) (Frame, error) {
	if len(data) < 4 {
		return Frame{}, nil
	}
	size := int32(binary.BigEndian.Uint32(data))
	switch {
	case size < 0:
		return Frame{}, fmt.Errorf("%w: %d", ErrFrameNegative, size)
	case int64(size) > int64(maxFrameBytes):
		return Frame{}, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, size, maxFrameBytes)
	}
	return Frame{Len: 4 + int(size), Head: 4}, nil
}

// AppendResponsePrefix implements Splitter: the size as a big-endian int32
// (ErrResponseTooLarge above 2 GiB - 1).
func (LengthPrefixed) AppendResponsePrefix(dst []byte, size int64) ([]byte, error) {
	if size < 0 || size > math.MaxInt32 {
		return dst, ErrResponseTooLarge
	}
	return binary.BigEndian.AppendUint32(dst, uint32(size)), nil
}
