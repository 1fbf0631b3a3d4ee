package netpoll

import (
	"fmt"
	"strings"
	"testing"
)

// bulk is a RESP bulk string.
func bulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

// command is a RESP array of bulk strings, as redis-cli sends it.
func command(args ...string) string {
	s := fmt.Sprintf("*%d\r\n", len(args))
	for _, a := range args {
		s += bulk(a)
	}
	return s
}

func TestRESP(t *testing.T) {
	frames := func(fs ...string) [][]byte {
		var out [][]byte
		for _, f := range fs {
			out = append(out, []byte(f))
		}
		return out
	}
	set := command("SET", "key", "hello")
	big := command("SET", "big", strings.Repeat("v", 200<<10))
	runFrameCases(t, RESP{}, []frameCase{
		{"array", 100, []byte(set), frames(set), nil},
		{"pipelined", 100, []byte(set + command("GET", "key") + "*1\r\n$4\r\nPI"), frames(set, command("GET", "key")), nil},
		{"empty array", 100, []byte("*0\r\n"), frames("*0\r\n"), nil},
		{"empty bulk", 100, []byte(command("")), frames(command("")), nil},
		{"crlf inside a bulk", 100, []byte(command("a\r\nb")), frames(command("a\r\nb")), nil},
		{"inline", 100, []byte("PING\r\nECHO hi\n"), frames("PING\r\n", "ECHO hi\n"), nil},
		{"inline then array", 100, []byte("PING\n" + set), frames("PING\n", set), nil},
		{"at limit", int32(len(set)), []byte(set), frames(set), nil},
		{"large bulk, grown", 1 << 20, []byte(big), frames(big), nil},
		{"above limit", int32(len(set) - 1), []byte(set), nil, ErrFrameTooLarge},
		{"count above limit, before its bytes", 100, []byte("*17\r\n"), nil, ErrFrameTooLarge},
		{"length above limit, before its bytes", 100, []byte("*1\r\n$200\r\n"), nil, ErrFrameTooLarge},
		{"inline above limit", 10, []byte("PING PING PING\r\n"), nil, ErrFrameTooLarge},
		{"inline above limit, no end", 10, []byte(strings.Repeat("P", 50)), nil, ErrFrameTooLarge},
		{"element not a bulk string", 100, []byte("*1\r\n:1\r\n"), nil, ErrMalformedFrame},
		{"negative length", 100, []byte("*1\r\n$-1\r\n"), nil, ErrMalformedFrame},
		{"negative count", 100, []byte("*-1\r\n"), nil, ErrMalformedFrame},
		{"no count", 100, []byte("*\r\n"), nil, ErrMalformedFrame},
		{"count not a number", 100, []byte("*x\r\n"), nil, ErrMalformedFrame},
		{"too many digits", 1 << 20, []byte("*00000000001\r\n"), nil, ErrMalformedFrame},
		{"cr without lf", 100, []byte("*1\rx"), nil, ErrMalformedFrame},
		{"bulk without crlf", 100, []byte("*1\r\n$3\r\nabcde"), nil, ErrMalformedFrame},
		{"good then bad", 100, []byte(set + "*1\r\n+x\r\n"), frames(set), ErrMalformedFrame},
		{"partial count", 100, []byte("*1"), nil, nil},
		{"partial length", 100, []byte("*1\r\n$1"), nil, nil},
	})
}

// TestRESPResume: elements already seen are not parsed again; the answers
// with Resume agree with one look at the whole command.
func TestRESPResume(t *testing.T) {
	cmd := []byte(command("MSET", "a", "1", "b", "2", "c", strings.Repeat("3", 100)))
	var resume int64
	for n := 1; n <= len(cmd); n++ {
		fr, err := RESP{}.Split(cmd[:n], resume, 1000)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if n < len(cmd) {
			if fr.Len != 0 {
				t.Fatalf("%d bytes: %+v, want more", n, fr)
			}
			if pos := int(uint32(fr.Resume)); pos > n {
				t.Fatalf("%d bytes: resume past the data (%d)", n, pos)
			}
			resume = fr.Resume
			continue
		}
		if want := (Frame{Len: len(cmd)}); fr != want {
			t.Fatalf("whole command: %+v, want %+v", fr, want)
		}
	}
}
