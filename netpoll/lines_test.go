package netpoll

import (
	"bytes"
	"strings"
	"testing"
)

func TestLines(t *testing.T) {
	x := func(n int) []byte { return bytes.Repeat([]byte("x"), n) }
	lines := func(ls ...string) [][]byte {
		var out [][]byte
		for _, l := range ls {
			out = append(out, []byte(l))
		}
		return out
	}
	runFrameCases(t, Lines{}, []frameCase{
		{"lf", 100, []byte("hello\n"), lines("hello"), nil},
		{"crlf", 100, []byte("hello\r\n"), lines("hello"), nil},
		{"pipelined", 100, []byte("a\r\nbc\nd"), lines("a", "bc"), nil},
		{"empty lines", 100, []byte("\n\r\n"), lines("", ""), nil},
		{"cr inside a line", 100, []byte("a\rb\n"), lines("a\rb"), nil},
		{"bare cr then crlf", 100, []byte("a\r\r\n"), lines("a\r"), nil},
		{"no end yet", 100, []byte("abc"), nil, nil},
		{"at limit, crlf", 5, []byte("12345\r\n"), lines("12345"), nil},
		{"at limit, lf", 5, []byte("12345\n"), lines("12345"), nil},
		{"above limit", 5, []byte("123456\n"), nil, ErrFrameTooLarge},
		{"above limit, no end", 5, x(100), nil, ErrFrameTooLarge},
		{"good then too long", 5, append([]byte("ok\n"), x(100)...), lines("ok"), ErrFrameTooLarge},
		{"long, grown", 1 << 20, append(x(300<<10), '\n'), [][]byte{x(300 << 10)}, nil},
	})
}

// TestLinesResume: a line arriving byte by byte is scanned once, and the
// answers with Resume agree with one look at the whole line.
func TestLinesResume(t *testing.T) {
	line := []byte(strings.Repeat("abc", 100) + "\r\n")
	var resume int64
	for n := 1; n <= len(line); n++ {
		fr, err := Lines{}.Split(line[:n], resume, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n < len(line) {
			if fr.Len != 0 || fr.Resume != int64(n) {
				t.Fatalf("%d bytes: %+v, want more with Resume %d", n, fr, n)
			}
			resume = fr.Resume
			continue
		}
		if want := (Frame{Len: len(line), Tail: 2}); fr != want {
			t.Fatalf("whole line: %+v, want %+v", fr, want)
		}
	}
}
