package netpoll

import (
	"bytes"
	"fmt"
)

// Lines frames a line protocol: a request is a line ending in "\n" or
// "\r\n", and the handler gets it without its terminator (an empty line is
// an empty frame). A line longer than maxFrameBytes, terminator not
// counted, is ErrFrameTooLarge, found as soon as that many bytes arrived
// without an end. Responses get no prefix: the handler ends its own lines.
type Lines struct{}

// Split implements Splitter. Resume is how many bytes of data are known to
// hold no "\n", so that each byte is looked at once however the line
// arrives.
func (Lines) Split(data []byte, resume int64, maxFrameBytes int) (Frame, error) {
	from := int(min(max(resume, 0), int64(len(data))))
	i := bytes.IndexByte(data[from:], '\n')
	if i < 0 {
		// The line is at least len(data) bytes, less a final "\r" that may
		// start its terminator.
		if len(data)-1 > maxFrameBytes {
			return Frame{}, fmt.Errorf("%w: a line of more than %d bytes", ErrFrameTooLarge, maxFrameBytes)
		}
		return Frame{Resume: int64(len(data))}, nil
	}
	end := from + i
	fr := Frame{Len: end + 1, Tail: 1}
	if end > 0 && data[end-1] == '\r' {
		fr.Tail = 2
	}
	if body := fr.Len - fr.Tail; body > maxFrameBytes {
		return Frame{}, fmt.Errorf("%w: a line of %d bytes > %d", ErrFrameTooLarge, body, maxFrameBytes)
	}
	return fr, nil
}

// AppendResponsePrefix implements Splitter: none.
func (Lines) AppendResponsePrefix(dst []byte, _ int64) ([]byte, error) { return dst, nil }
