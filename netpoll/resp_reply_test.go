package netpoll

import (
	"bytes"
	"testing"
)

func TestRESPReplies(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{string(AppendRESPSimple(nil, "PONG")), "+PONG\r\n"},
		{string(AppendRESPSimple([]byte("x"), "a\r\nb")), "x+a  b\r\n"},
		{string(AppendRESPError(nil, "ERR bad\nthing")), "-ERR bad thing\r\n"},
		{string(AppendRESPInt(nil, -42)), ":-42\r\n"},
		{string(AppendRESPBulk(nil, []byte("hi\r\n"))), "$4\r\nhi\r\n\r\n"},
		{string(AppendRESPBulk(nil, []byte{})), "$0\r\n\r\n"},
		{string(AppendRESPBulk(nil, nil)), "$-1\r\n"},
		{string(AppendRESPArray(nil, 3)), "*3\r\n"},
		{string(AppendRESPArray(nil, -7)), "*-1\r\n"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// An array of bulk strings built with the reply helpers is a command the
// RESP splitter cuts whole and Args reads back, whatever bytes it holds.
func TestRESPRepliesReadBack(t *testing.T) {
	args := [][]byte{[]byte("XADD"), {}, []byte("a\r\nb"), bytes.Repeat([]byte{'*', '$', 0}, 100)}
	b := AppendRESPArray(nil, len(args))
	for _, a := range args {
		b = AppendRESPBulk(b, a)
	}
	fr, err := RESP{}.Split(b, 0, 1<<20)
	if err != nil || fr.Len != len(b) {
		t.Fatalf("split: %+v %v", fr, err)
	}
	got, err := RESP{}.Args(b)
	if err != nil || len(got) != len(args) {
		t.Fatalf("args: %q %v", got, err)
	}
	for i := range args {
		if !bytes.Equal(got[i], args[i]) {
			t.Fatalf("argument %d: %q, want %q", i, got[i], args[i])
		}
	}
}
