package netpoll

import (
	"bytes"
	"fmt"
)

// RESP frames the requests of Redis clients (RESP2, as redis-cli and the
// client libraries send them): an array of bulk strings, or an inline
// command, a line of words, for typing at a telnet prompt.
//
//	*<count>\r\n  then count times  $<length>\r\n<length bytes>\r\n
//	<inline command>\n  (or \r\n; the first byte is not '*')
//
// The handler gets each command whole, as it came, framing included: a
// frame starting with '*' is an array, any other an inline command with
// its terminator; Args splits it into the command's arguments. Counts and
// lengths are decimal without a sign or a leading zero, as Redis reads
// them; anything else where RESP puts them, a missing "\r\n", or an element
// that is not a bulk string is ErrMalformedFrame. A command whose count or
// lengths show it longer than maxFrameBytes is ErrFrameTooLarge as soon as
// they are read, before its bytes arrive. Responses get no prefix: the
// handler writes RESP replies whole (+OK\r\n, $5\r\nhello\r\n, ...).
type RESP struct{}

// respNumberDigitsMax bounds the digits of a count or length: 10 digits
// hold every int32, and maxFrameBytes is one.
const respNumberDigitsMax = 10

// Split implements Splitter. For an array, Resume holds where the next
// element starts (low 32 bits) and how many elements are left (high 32
// bits), so that elements already seen are not parsed again; for an inline
// command, how many bytes are known to hold no "\n".
func (RESP) Split(data []byte, resume int64, maxFrameBytes int) (Frame, error) {
	if data[0] != '*' {
		return respInline(data, resume, maxFrameBytes)
	}
	pos, left := int(uint32(resume)), int(resume>>32)
	if resume <= 0 || left <= 0 || pos > len(data) {
		count, next, err := respNumber(data, 0, '*')
		if err != nil || next == 0 {
			return Frame{}, err
		}
		// Each element takes at least "$0\r\n\r\n".
		if int64(next)+6*int64(count) > int64(maxFrameBytes) {
			return Frame{}, fmt.Errorf("%w: an array of %d elements in at most %d bytes", ErrFrameTooLarge, count, maxFrameBytes)
		}
		pos, left = next, count
	}
	for left > 0 {
		start, end, err := respBulk(data, pos)
		if err != nil {
			return Frame{}, err
		}
		if start == 0 {
			break
		}
		if end+6*int64(left-1) > int64(maxFrameBytes) {
			return Frame{}, fmt.Errorf("%w: a command of more than %d bytes", ErrFrameTooLarge, maxFrameBytes)
		}
		if end > int64(len(data)) {
			break
		}
		pos, left = int(end), left-1
	}
	if left == 0 {
		return Frame{Len: pos}, nil
	}
	return Frame{Resume: int64(left)<<32 | int64(pos)}, nil
}

// Args splits a frame that Split cut into the command's arguments: an
// array's bulk strings, or an inline command's words, separated by spaces,
// tabs and the other ASCII blanks (Redis's quoting of inline words is not
// read). An empty array or a blank line has none. The arguments are slices
// of frame, each capped at its end so that appending to one copies it
// instead of writing over the frame. A frame that Split would not have cut
// whole, with nothing after it, is ErrMalformedFrame (or ErrFrameTooLarge,
// for a number above 2^31-1), and no argument is returned.
//
// Args walks an array with the code Split walks it with, so that the two
// cannot disagree on what a command is, and allocates nothing from the
// array's count beyond what the frame's bytes can hold.
func (RESP) Args(frame []byte) ([][]byte, error) {
	if len(frame) == 0 {
		return nil, fmt.Errorf("%w: an empty frame", ErrMalformedFrame)
	}
	if frame[0] != '*' {
		return respWords(frame)
	}
	count, pos, err := respNumber(frame, 0, '*')
	if err != nil {
		return nil, err
	}
	if pos == 0 {
		return nil, fmt.Errorf("%w: an array's count cut short", ErrMalformedFrame)
	}
	// Each element takes at least "$0\r\n\r\n": a count the bytes cannot
	// hold is refused below, by the walk, but must not size the slice.
	args := make([][]byte, 0, min(count, (len(frame)-pos)/6))
	for range count {
		start, end, err := respBulk(frame, pos)
		if err != nil {
			return nil, err
		}
		if start == 0 || end > int64(len(frame)) {
			return nil, fmt.Errorf("%w: an array of %d elements cut short after %d", ErrMalformedFrame, count, len(args))
		}
		args = append(args, frame[start:end-2:end-2])
		pos = int(end)
	}
	if pos != len(frame) {
		return nil, fmt.Errorf("%w: %d bytes after an array of %d elements", ErrMalformedFrame, len(frame)-pos, count)
	}
	return args, nil
}

// respWords splits an inline command, a line ending in its only "\n", into
// its words.
func respWords(line []byte) ([][]byte, error) {
	if i := bytes.IndexByte(line, '\n'); i != len(line)-1 {
		return nil, fmt.Errorf("%w: an inline command not one line ending in \\n", ErrMalformedFrame)
	}
	// Counted first, so that the slice is allocated once and exactly.
	n := 0
	for i := range line {
		if !respBlank(line[i]) && (i == 0 || respBlank(line[i-1])) {
			n++
		}
	}
	words := make([][]byte, 0, n)
	for i := 0; i < len(line); {
		if respBlank(line[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(line) && !respBlank(line[j]) {
			j++
		}
		words, i = append(words, line[i:j:j]), j
	}
	return words, nil
}

// respBlank reports the bytes that separate inline words: C's isspace in
// the C locale, which Redis splits them with.
func respBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// respInline frames an inline command: a line, handed over with its
// terminator. Resume is how many bytes hold no "\n".
func respInline(data []byte, resume int64, maxFrameBytes int) (Frame, error) {
	from := int(min(max(resume, 0), int64(len(data))))
	i := bytes.IndexByte(data[from:], '\n')
	if i < 0 {
		if len(data) >= maxFrameBytes { // its "\n" would make it longer
			return Frame{}, fmt.Errorf("%w: an inline command of more than %d bytes", ErrFrameTooLarge, maxFrameBytes)
		}
		return Frame{Resume: int64(len(data))}, nil
	}
	if n := from + i + 1; n <= maxFrameBytes {
		return Frame{Len: n}, nil
	}
	return Frame{}, fmt.Errorf("%w: an inline command of %d bytes > %d", ErrFrameTooLarge, from+i+1, maxFrameBytes)
}

// respBulk reads the bulk string at data[pos:]: its length line, then its
// bytes, which start at start and are followed by "\r\n" ending at end.
// start == 0 when the length line is not all there yet; end > len(data)
// when the bytes are not (end is int64: a length near 2^31 past pos would
// overflow a 32-bit int). The "\r\n" is checked once it is there.
func respBulk(data []byte, pos int) (start int, end int64, err error) {
	n, start, err := respNumber(data, pos, '$')
	if err != nil || start == 0 {
		return 0, 0, err
	}
	end = int64(start) + int64(n) + 2
	if end <= int64(len(data)) && (data[end-2] != '\r' || data[end-1] != '\n') {
		return 0, 0, fmt.Errorf("%w: a bulk string of %d bytes not followed by CRLF", ErrMalformedFrame, n)
	}
	return start, end, nil
}

// respNumber reads the line at data[pos:], which must be kind ('*' or '$')
// then a decimal number of at most respNumberDigitsMax digits and "\r\n",
// with no sign and no leading zero, as Redis's string2ll reads it (so that a
// command has one encoding, which Args's arguments re-encode to). It
// returns the number and where the line ends, or next == 0 when the line
// is not all there yet.
func respNumber(data []byte, pos int, kind byte) (n, next int, err error) {
	if pos >= len(data) {
		return 0, 0, nil
	}
	if data[pos] != kind {
		return 0, 0, fmt.Errorf("%w: %q where RESP expects %q", ErrMalformedFrame, data[pos], kind)
	}
	line := data[pos+1 : min(len(data), pos+1+respNumberDigitsMax+2)]
	i := bytes.IndexByte(line, '\r')
	switch {
	case i < 0 && len(line) > respNumberDigitsMax:
		return 0, 0, fmt.Errorf("%w: %c without a number of at most %d digits", ErrMalformedFrame, kind, respNumberDigitsMax)
	case i < 0:
		return 0, 0, nil // more digits or the "\r" to come
	case i == 0 || i > respNumberDigitsMax:
		return 0, 0, fmt.Errorf("%w: %c followed by %d digits", ErrMalformedFrame, kind, i)
	case i+1 == len(line):
		return 0, 0, nil // the "\n" to come
	case line[i+1] != '\n':
		return 0, 0, fmt.Errorf("%w: %c%s not followed by CRLF", ErrMalformedFrame, kind, line[:i])
	case line[0] == '0' && i > 1:
		return 0, 0, fmt.Errorf("%w: %c%s has a leading zero", ErrMalformedFrame, kind, line[:i])
	}
	var v int64
	for _, c := range line[:i] {
		if c < '0' || c > '9' {
			return 0, 0, fmt.Errorf("%w: %c followed by %q", ErrMalformedFrame, kind, line[:i])
		}
		v = 10*v + int64(c-'0')
	}
	if v > 1<<31-1 {
		return 0, 0, fmt.Errorf("%w: %c%d", ErrFrameTooLarge, kind, v)
	}
	return int(v), pos + 1 + i + 2, nil
}

// AppendResponsePrefix implements Splitter: none.
func (RESP) AppendResponsePrefix(dst []byte, _ int64) ([]byte, error) { return dst, nil }
