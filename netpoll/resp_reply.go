package netpoll

import (
	"strconv"
	"strings"
)

// Replies of RESP2, for a handler serving RESP: each appends one reply (or
// an array's header, followed by its elements) to b and returns the
// extended slice.

// AppendRESPSimple appends a simple string, "+s\r\n" (s without a line
// break: one is replaced by a space).
func AppendRESPSimple(b []byte, s string) []byte { return appendRESPLine(b, '+', s) }

// AppendRESPError appends an error reply, "-msg\r\n"; by Redis's habit msg
// starts with a code such as "ERR ". A line break in msg would end the
// reply early: it is replaced by a space.
func AppendRESPError(b []byte, msg string) []byte { return appendRESPLine(b, '-', msg) }

// AppendRESPInt appends an integer reply, ":n\r\n".
func AppendRESPInt(b []byte, n int64) []byte {
	return append(strconv.AppendInt(append(b, ':'), n, 10), "\r\n"...)
}

// AppendRESPBulk appends a bulk string, "$<len>\r\n<v>\r\n"; a nil v is
// the null bulk string, "$-1\r\n".
func AppendRESPBulk(b, v []byte) []byte {
	if v == nil {
		return append(b, "$-1\r\n"...)
	}
	b = append(strconv.AppendInt(append(b, '$'), int64(len(v)), 10), "\r\n"...)
	return append(append(b, v...), "\r\n"...)
}

// AppendRESPArray appends the header of an array of n elements, which
// follow it; n < 0 is the null array, "*-1\r\n", with none.
func AppendRESPArray(b []byte, n int) []byte {
	return append(strconv.AppendInt(append(b, '*'), int64(max(n, -1)), 10), "\r\n"...)
}

func appendRESPLine(b []byte, kind byte, s string) []byte {
	if strings.ContainsAny(s, "\r\n") {
		s = strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	}
	return append(append(append(b, kind), s...), "\r\n"...)
}
