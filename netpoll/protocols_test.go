package netpoll

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// lineHandler serves a line protocol (Config.Splitter = Lines{}); every
// answer is a line the handler ends itself, or nothing at all:
//
//	ECHO <text>          <text>
//	LEN <text>           the length of <text>
//	CAT <pos> <n>        n bytes of the test file from pos (a file region)
//	LATER <ms> <text>    <text>, answered ms later from another goroutine
//	NOTHING              an empty response: no bytes on the wire
//	QUIT                 the handler closes the connection
//	anything else        ERR <command>
type lineHandler struct {
	file *os.File
	wg   sync.WaitGroup
}

func (h *lineHandler) Serve(c *Conn, seq uint64, line []byte) {
	if _, ok := ours.Load(c.RemoteAddr().String()); !ok {
		c.Close()
		return
	}
	cmd, arg, _ := bytes.Cut(line, []byte(" "))
	r := &Response{}
	switch string(cmd) {
	case "ECHO":
		r.AppendBytes(arg)
		r.AppendBytes([]byte("\n"))
	case "LEN":
		r.AppendBytes([]byte(strconv.Itoa(len(arg)) + "\n"))
	case "CAT":
		var pos, n int64
		fmt.Sscan(string(arg), &pos, &n)
		r.AppendRegion(h.file, pos, n)
		r.AppendBytes([]byte("\n"))
	case "LATER":
		ms, text, _ := bytes.Cut(arg, []byte(" "))
		d, _ := strconv.Atoi(string(ms))
		r.AppendBytes(text)
		r.AppendBytes([]byte("\n"))
		h.wg.Add(1)
		time.AfterFunc(time.Duration(d)*time.Millisecond, func() {
			defer h.wg.Done()
			c.Reply(seq, r)
		})
		return
	case "NOTHING":
	case "QUIT":
		c.Close()
		return
	default:
		r.AppendBytes([]byte("ERR " + string(cmd) + "\n"))
	}
	c.Reply(seq, r)
}

func (h *lineHandler) Closed(*Conn) {}

// lineClient speaks the line protocol over a plain socket.
type lineClient struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func dialLines(t testing.TB, s *Server) *lineClient {
	t.Helper()
	nc, err := dialRaw(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &lineClient{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *lineClient) write(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// expect reads the next answer lines and compares them with want.
func (c *lineClient) expect(want ...string) {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for _, w := range want {
		got, err := c.br.ReadString('\n')
		if err != nil {
			c.t.Fatalf("waiting for %.40q: %v", w, err)
		}
		if got != w+"\n" {
			c.t.Fatalf("got %.60q, want %.60q", got, w+"\n")
		}
	}
}

// TestLineProtocol serves a line protocol over each path: pipelined lines
// with either terminator, an empty line, answers out of order and empty
// answers, a line arriving byte by byte, lines longer than a read (and
// than the pooled-buffer threshold), a file region without a size prefix,
// and a line above MaxFrameBytes, which closes its connection only.
func TestLineProtocol(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		f, data := testFile(t, 1<<20)
		h := &lineHandler{file: f}
		s := serveHandler(t, via, Config{Splitter: Lines{}, MaxFrameBytes: 512 << 10}, h, h.wg.Wait)
		c := dialLines(t, s)

		c.write("ECHO a\r\nECHO b\nNOTHING\nLATER 30 slow\r\nNOTHING\r\nECHO after\n\n")
		c.expect("a", "b", "slow", "after", "ERR ")

		for _, b := range []byte("ECHO byte by byte\r\n") {
			c.write(string(b))
			time.Sleep(200 * time.Microsecond)
		}
		c.expect("byte by byte")

		long := strings.Repeat("x", 300<<10)
		c.write("LEN " + long + "\nECHO " + long[:100<<10] + "\r\nLEN\n")
		c.expect(strconv.Itoa(len(long)), long[:100<<10], "0")

		c.write("CAT 1000 200000\nECHO next\n")
		_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		got := make([]byte, 200000+1)
		if _, err := io.ReadFull(c.br, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:200000], data[1000:201000]) || got[200000] != '\n' {
			t.Fatal("file region differs")
		}
		c.expect("next")

		other := dialLines(t, s)
		_, _ = io.WriteString(c.nc, "ECHO "+strings.Repeat("y", 600<<10)) // may fail: the server closes
		_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, c.br); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("a line above MaxFrameBytes did not close the connection")
			}
		}
		other.write("ECHO still here\n")
		other.expect("still here")

		q := dialLines(t, s)
		q.write("QUIT\nECHO never\n")
		_ = q.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, _ := io.Copy(io.Discard, q.br); n != 0 {
			t.Fatalf("%d bytes after QUIT", n)
		}
	})
}

// respHandler answers every RESP command with the command itself as a bulk
// string, so that the client sees exactly the frame the handler got.
type respHandler struct{}

func (respHandler) Serve(c *Conn, seq uint64, frame []byte) {
	if _, ok := ours.Load(c.RemoteAddr().String()); !ok {
		c.Close()
		return
	}
	r := &Response{}
	r.AppendBytes([]byte(fmt.Sprintf("$%d\r\n", len(frame))))
	r.AppendBytes(frame)
	r.AppendBytes([]byte("\r\n"))
	c.Reply(seq, r)
}

func (respHandler) Closed(*Conn) {}

// TestRESPProtocol: redis-cli's commands, pipelined and in pieces, and
// inline commands reach the handler whole, over each path.
func TestRESPProtocol(t *testing.T) {
	ios(t, func(t *testing.T, via string) {
		s := serveHandler(t, via, Config{Splitter: RESP{}}, respHandler{}, nil)
		c := dialLines(t, s)
		cmds := []string{
			command("SET", "k", "v"),
			"PING\r\n",
			command("SET", "big", strings.Repeat("z", 150<<10)),
			command("GET", "k"),
			"*0\r\n",
		}
		all := strings.Join(cmds, "")
		for len(all) > 0 { // in pieces that cut lines and strings anywhere
			n := min(len(all), 7777)
			c.write(all[:n])
			all = all[n:]
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		for _, want := range cmds {
			var n int
			if _, err := fmt.Fscanf(c.br, "$%d\r\n", &n); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, n+2)
			if _, err := io.ReadFull(c.br, got); err != nil {
				t.Fatal(err)
			}
			if string(got[:n]) != want {
				t.Fatalf("handler got %.60q, want %.60q", got[:n], want)
			}
		}
	})
}
