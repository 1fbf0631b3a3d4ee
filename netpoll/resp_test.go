package netpoll

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
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
		{"count with a leading zero", 100, []byte("*01\r\n$1\r\na\r\n"), nil, ErrMalformedFrame},
		{"length with a leading zero", 100, []byte("*1\r\n$01\r\na\r\n"), nil, ErrMalformedFrame},
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

func TestRESPArgs(t *testing.T) {
	for _, c := range []struct {
		name, frame string
		want        []string // nil: none
		err         error
	}{
		{"array", command("XADD", "s", "*", "a", "1"), []string{"XADD", "s", "*", "a", "1"}, nil},
		{"empty array", "*0\r\n", nil, nil},
		{"empty bulks", command("", ""), []string{"", ""}, nil},
		{"crlf and binary inside a bulk", command("a\r\nb", "\x00\xff"), []string{"a\r\nb", "\x00\xff"}, nil},
		{"inline", "XADD s * a 1\r\n", []string{"XADD", "s", "*", "a", "1"}, nil},
		{"inline with lf only", "PING\n", []string{"PING"}, nil},
		{"inline, blanks around and between", " \tPING\v\fa\rb  \r\n", []string{"PING", "a", "b"}, nil},
		{"inline quotes are words", "SET k \"a b\"\r\n", []string{"SET", "k", "\"a", "b\""}, nil},
		{"blank line", "\r\n", nil, nil},
		{"blanks only", " \t \r\n", nil, nil},

		{"empty", "", nil, ErrMalformedFrame},
		{"two inline lines", "PING\nPING\n", nil, ErrMalformedFrame},
		{"inline without its end", "PING", nil, ErrMalformedFrame},
		{"bytes after the array", command("PING") + "x", nil, ErrMalformedFrame},
		{"two arrays", command("PING") + command("PING"), nil, ErrMalformedFrame},
		{"array cut short", "*2\r\n$4\r\nPING\r\n", nil, ErrMalformedFrame},
		{"bulk cut short", "*1\r\n$4\r\nPI", nil, ErrMalformedFrame},
		{"count cut short", "*1", nil, ErrMalformedFrame},
		{"huge count, few bytes", "*2147483647\r\n$0\r\n\r\n", nil, ErrMalformedFrame},
		{"count above int32", "*2147483648\r\n", nil, ErrFrameTooLarge},
		{"length above int32", "*1\r\n$4294967296\r\n", nil, ErrFrameTooLarge},
		{"negative count", "*-1\r\n", nil, ErrMalformedFrame},
		{"negative length", "*1\r\n$-1\r\n", nil, ErrMalformedFrame},
		{"leading zero", "*1\r\n$04\r\nPING\r\n", nil, ErrMalformedFrame},
		{"element not a bulk string", "*1\r\n:1\r\n", nil, ErrMalformedFrame},
		{"nested array", "*1\r\n*1\r\n$1\r\na\r\n", nil, ErrMalformedFrame},
		{"bulk without crlf", "*1\r\n$1\r\nab\r\n", nil, ErrMalformedFrame},
	} {
		args, err := RESP{}.Args([]byte(c.frame))
		if !errors.Is(err, c.err) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.err)
			continue
		}
		var got []string
		for _, a := range args {
			got = append(got, string(a))
		}
		if !reflect.DeepEqual(got, c.want) || (err != nil) != (args == nil) {
			t.Errorf("%s: %q (nil %v), want %q", c.name, got, args == nil, c.want)
		}
		// One reader of the format: Args takes exactly the frames that
		// Split cuts whole.
		fr, splitErr := Frame{}, errors.New("empty")
		if c.frame != "" {
			fr, splitErr = RESP{}.Split([]byte(c.frame), 0, 1<<20)
		}
		if whole := splitErr == nil && fr.Len == len(c.frame); whole != (err == nil) {
			t.Errorf("%s: Args err %v, but Split says %+v %v", c.name, err, fr, splitErr)
		}
	}
}

// TestRESPArgsAppendCopies: an argument is capped at its end, so that
// appending to it leaves the frame (and the next argument) as it was.
func TestRESPArgsAppendCopies(t *testing.T) {
	for _, frame := range []string{command("ab", "cd"), "ab cd\r\n"} {
		f := []byte(frame)
		args, err := RESP{}.Args(f)
		if err != nil {
			t.Fatal(err)
		}
		_ = append(args[0], "XXXXXX"...)
		_ = append(args, []byte("more"))
		if string(f) != frame || string(args[1]) != "cd" {
			t.Errorf("%q: appending wrote over the frame: %q", frame, f)
		}
	}
}

// TestRESPArgsCountOffTheWire: a count that the frame's bytes cannot hold
// allocates nothing in its proportion (a million elements announced in 20
// bytes would be 24 MB of slice headers).
func TestRESPArgsCountOffTheWire(t *testing.T) {
	frame := []byte("*1000000\r\n$1\r\na\r\n")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := (RESP{}).Args(frame); !errors.Is(err, ErrMalformedFrame) {
			t.Fatalf("err %v, want ErrMalformedFrame", err)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("10 calls allocated %d bytes", n)
	}
}

// respEncode is a command as an array of bulk strings, the way clients send
// it.
func respEncode(args [][]byte) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = append(fmt.Appendf(b, "$%d\r\n", len(a)), a...)
		b = append(b, "\r\n"...)
	}
	return b
}

// FuzzRESPArgs: Args, the one reader of RESP's commands, against Split.
// Whatever the bytes, Args does not panic; it succeeds exactly on the
// inputs that Split cuts as one whole frame, and on the frame Split cuts
// from the start of any input. Its arguments are then sized by what they
// hold (no spare capacity, in the slice or in an argument), an array's
// arguments re-encode to the frame byte for byte, an inline command's words
// are its bytes less its blanks, and re-encoded as an array any command
// reads back to the same arguments.
func FuzzRESPArgs(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		args, err := RESP{}.Args(data)
		fr, splitErr := Frame{}, errors.New("no bytes, which Split is never shown")
		if len(data) > 0 {
			fr, splitErr = RESP{}.Split(data, 0, math.MaxInt32)
		}
		if whole := splitErr == nil && fr.Len == len(data); whole != (err == nil) {
			t.Fatalf("%q: Args err %v, but Split says %+v %v", data, err, fr, splitErr)
		}
		if err == nil {
			checkArgs(t, data, args)
		} else if args != nil {
			t.Fatalf("%q: arguments %q with error %v", data, args, err)
		}
		if splitErr == nil && fr.Len > 0 && fr.Len < len(data) {
			frame := data[:fr.Len]
			args, err := RESP{}.Args(frame)
			if err != nil {
				t.Fatalf("%q, a frame Split cut: %v", frame, err)
			}
			checkArgs(t, frame, args)
		}
	})
}

func checkArgs(t *testing.T, frame []byte, args [][]byte) {
	t.Helper()
	if cap(args) != len(args) {
		t.Fatalf("%q: %d arguments in a slice of %d", frame, len(args), cap(args))
	}
	for _, a := range args {
		if cap(a) != len(a) {
			t.Fatalf("%q: argument %q not capped at its end", frame, a)
		}
	}
	enc := respEncode(args)
	if frame[0] == '*' && !bytes.Equal(enc, frame) {
		t.Fatalf("%q: arguments %q re-encode to %q", frame, args, enc)
	}
	if frame[0] != '*' {
		var nonBlank []byte
		for _, c := range frame {
			if !respBlank(c) {
				nonBlank = append(nonBlank, c)
			}
		}
		if joined := bytes.Join(args, nil); !bytes.Equal(joined, nonBlank) {
			t.Fatalf("%q: words %q, not its bytes less blanks", frame, args)
		}
		for _, a := range args {
			if len(a) == 0 || bytes.ContainsAny(a, " \t\n\v\f\r") {
				t.Fatalf("%q: word %q empty or with a blank", frame, a)
			}
		}
	}
	again, err := RESP{}.Args(enc)
	if err != nil || len(again) != len(args) {
		t.Fatalf("%q: re-encoded as %q, read back as %q %v", frame, enc, again, err)
	}
	for i := range args {
		if !bytes.Equal(again[i], args[i]) {
			t.Fatalf("%q: re-encoded, argument %d reads back as %q, not %q", frame, i, again[i], args[i])
		}
	}
}
