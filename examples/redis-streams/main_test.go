package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"ringlog/internal/testkit"
)

// serve starts the server on a free port of 127.0.0.1 with its data in dir,
// closed when the test ends (closing it twice is harmless).
func serve(t *testing.T, dir string) *server {
	t.Helper()
	s, err := start("127.0.0.1:0", dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.close() })
	return s
}

// cli runs Debian's redis-cli (redis-tools; scripts/test.sh installs it)
// against s and returns what it printed.
func cli(t *testing.T, s *server, args ...string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(s.ln.Addr().String())
	out, err := exec.Command(cliBin(t), append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func cliBin(t *testing.T) string {
	p, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal("redis-cli not installed (scripts/test.sh installs it: apt-get install redis-tools)")
	}
	return p
}

// TestRedisCLI drives the server with the real redis-cli, one process per
// command, as a shell script would.
func TestRedisCLI(t *testing.T) {
	s := serve(t, t.TempDir())
	for _, c := range []struct{ cmd, want string }{
		{"PING", "PONG"},
		{"PING hello", "hello"},
		{"XADD s 1-1 a 1 b 2", "1-1"},
		{"XADD s 1-1 a 1", "ERR The ID specified in XADD is equal or smaller than the target stream top item"},
		{"XADD s 1 a 1", "ERR The ID specified in XADD is equal or smaller than the target stream top item"},
		{"XADD s 0-0 a 1", "ERR The ID specified in XADD must be greater than 0-0"},
		{"XADD s 1-x a 1", "ERR Invalid stream ID specified as stream command argument"},
		{"XADD s 1-2 c 3", "1-2"},
		{"XADD s 2 d 4", "2-0"},
		{"XLEN s", "3"},
		{"XLEN nothing", "0"},
		{"XRANGE s - +", "1-1\na\n1\nb\n2\n1-2\nc\n3\n2-0\nd\n4"},
		{"XRANGE s 1-2 2", "1-2\nc\n3\n2-0\nd\n4"}, // inclusive; "2" as an end is 2-<max>
		{"XRANGE s 1 1", "1-1\na\n1\nb\n2\n1-2\nc\n3"},
		{"XRANGE s - + COUNT 1", "1-1\na\n1\nb\n2"},
		{"XRANGE s 3 +", ""},
		{"XRANGE nothing - +", ""},
		{"XRANGE s - + LIMIT 1", "ERR syntax error"},
		{"XREAD STREAMS s 1-1", "s\n1-2\nc\n3\n2-0\nd\n4"},
		{"XREAD COUNT 1 STREAMS nothing s 0 1-2", "s\n2-0\nd\n4"},
		{"XREAD STREAMS s $", ""},
		{"XREAD STREAMS s t 0", "ERR Unbalanced 'xread' list of streams: for each stream key an ID or '$' must be specified."},
		{"XREAD COUNT x STREAMS s 0", "ERR value is not an integer or out of range"},
		{"XREAD COUNT 1 STREAMS", "ERR syntax error"},
		{"XREAD COUNT 1 s 0", "ERR syntax error"},
		{"XLEN", "ERR wrong number of arguments for 'xlen' command"},
		{"XADD s * a", "ERR wrong number of arguments for 'xadd' command"},
		{"SET k v", "ERR unknown command 'SET', with args beginning with: 'k' 'v'"},
		{"COMMAND DOCS", "ERR unknown command 'COMMAND', with args beginning with: 'DOCS'"},
	} {
		if got := cli(t, s, strings.Fields(c.cmd)...); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.cmd, got, c.want)
		}
	}
	id := cli(t, s, "XADD", "s", "*", "e", "5")
	if ms, _, _ := strings.Cut(id, "-"); len(ms) != 13 || !strings.HasSuffix(id, "-0") {
		t.Errorf("XADD s *: %q, want the time in ms and seq 0", id)
	}

	// BLOCK with a time: nil once it passes.
	began := time.Now()
	if got := cli(t, s, "XREAD", "BLOCK", "200", "STREAMS", "s", "$"); got != "" {
		t.Errorf("XREAD BLOCK 200 on nothing new: %q", got)
	}
	if d := time.Since(began); d < 200*time.Millisecond {
		t.Errorf("XREAD BLOCK 200 returned after %v", d)
	}

	// BLOCK 0, on a stream that exists and on one yet to be created, woken
	// by an XADD from another connection.
	for _, key := range []string{"s", "later"} {
		out, done := &bytes.Buffer{}, make(chan error, 1)
		host, port, _ := net.SplitHostPort(s.ln.Addr().String())
		reader := exec.Command(cliBin(t), "-h", host, "-p", port, "XREAD", "BLOCK", "0", "STREAMS", key, "$")
		reader.Stdout = out
		if err := reader.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- reader.Wait() }()
		testkit.WaitFor(t, 10*time.Second, "the XREAD to block", func() bool { return s.ln.Stats().InFlight == 1 })
		var added []string
	wait: // the XREAD may read "$" after an XADD: add until it returns
		for {
			added = append(added, cli(t, s, "XADD", key, "*", "k", "v"))
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				break wait
			case <-time.After(200 * time.Millisecond):
			}
		}
		lines := strings.Fields(out.String())
		if len(lines) != 4 || lines[0] != key || !contains(added, lines[1]) || lines[2] != "k" || lines[3] != "v" {
			t.Errorf("XREAD BLOCK 0 STREAMS %s $ woken by XADD %v: %q", key, added, out)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestGoRedis drives the server with go-redis, which connects with HELLO 3
// and CLIENT SETINFO (both unknown here) and goes on in RESP2, then restarts
// the server on the same data directory.
func TestGoRedis(t *testing.T) {
	dir, ctx := t.TempDir(), context.Background()
	s := serve(t, dir)
	rdb := redis.NewClient(&redis.Options{Addr: s.ln.Addr().String()})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 {
		id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "orders:eu", Values: []string{"n", fmt.Sprint(i), "item", "x"}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	_, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "orders:eu", ID: "1-1", Values: []string{"a", "b"}}).Result()
	if err == nil || err.Error() != "ERR The ID specified in XADD is equal or smaller than the target stream top item" {
		t.Errorf("XADD below the top: %v", err)
	}
	got, err := rdb.XRange(ctx, "orders:eu", ids[1], "+").Result()
	want := []redis.XMessage{{ID: ids[1], Values: map[string]any{"n": "1", "item": "x"}}, {ID: ids[2], Values: map[string]any{"n": "2", "item": "x"}}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("XRANGE from %s: %v %v, want %v", ids[1], got, err, want)
	}
	if got, err := rdb.XRangeN(ctx, "orders:eu", "-", "+", 1).Result(); err != nil || len(got) != 1 || got[0].ID != ids[0] {
		t.Errorf("XRANGE COUNT 1: %v %v", got, err)
	}
	if n, err := rdb.XLen(ctx, "orders:eu").Result(); n != 3 || err != nil {
		t.Errorf("XLEN: %d %v", n, err)
	}
	if _, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{"orders:eu", "$"}, Block: 50 * time.Millisecond}).Result(); err != redis.Nil {
		t.Errorf("XREAD BLOCK 50 on nothing new: %v, want redis.Nil", err)
	}

	// A blocked XREAD on two streams, woken by an XADD on another connection.
	type result struct {
		streams []redis.XStream
		err     error
	}
	woken := make(chan result, 1)
	go func() {
		r, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{"orders:eu", "orders:us", ids[2], "0"}, Block: 0}).Result()
		woken <- result{r, err}
	}()
	testkit.WaitFor(t, 10*time.Second, "the XREAD to block", func() bool { return s.ln.Stats().InFlight == 1 })
	us, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "orders:us", ID: "7-7", Values: []string{"n", "0"}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	r := <-woken
	if want := []redis.XStream{{Stream: "orders:us", Messages: []redis.XMessage{{ID: us, Values: map[string]any{"n": "0"}}}}}; r.err != nil || !reflect.DeepEqual(r.streams, want) {
		t.Errorf("XREAD BLOCK 0 woken by XADD: %v %v, want %v", r.streams, r.err, want)
	}

	// A restart on the same data directory keeps the streams, and IDs go on
	// above the top.
	rdb.Close()
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	s = serve(t, dir)
	rdb = redis.NewClient(&redis.Options{Addr: s.ln.Addr().String()})
	defer rdb.Close()
	if got, err := rdb.XRange(ctx, "orders:eu", "-", "+").Result(); err != nil || len(got) != 3 || got[2].ID != ids[2] {
		t.Errorf("XRANGE after a restart: %v %v", got, err)
	}
	if _, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "orders:us", ID: "7-7", Values: []string{"n", "1"}}).Result(); err == nil {
		t.Error("XADD of the top's ID after a restart was taken")
	}
	if id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: "orders:us", ID: "7-*", Values: []string{"n", "1"}}).Result(); err == nil {
		t.Errorf("XADD 7-* took %s: this server does not do <ms>-*", id)
	}
}

// TestBadInput: malformed RESP closes the connection, bad numbers are
// errors, and the server goes on serving.
func TestBadInput(t *testing.T) {
	s := serve(t, t.TempDir())
	exchange := func(send string) (string, error) {
		c, err := net.Dial("tcp", s.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, send); err != nil {
			return "", err
		}
		return bufio.NewReader(c).ReadString('\n')
	}
	for _, send := range []string{"*1\r\n$-5\r\n", "*1\r\n$3\r\nPINGX\r\n", "*99999999999\r\n", "*2\r\n*1\r\n", "*1\r\n$4294967296\r\n"} {
		if got, err := exchange(send); !errors.Is(err, io.EOF) {
			t.Errorf("%q: %q %v, want the connection closed", send, got, err)
		}
	}
	for _, c := range []struct{ send, want string }{
		{"\r\nPING\r\n", "+PONG\r\n"}, // an empty line gets no reply
		{"XADD s 1-1 a b\r\n", "$3\r\n"},
		{"XRANGE s - + COUNT 99999999999999999999\r\n", "-ERR value is not an integer or out of range\r\n"},
		{"XRANGE s - + COUNT 9223372036854775807\r\n", "*1\r\n"},
		{"XREAD COUNT 9223372036854775807 BLOCK 9223372036854775807 STREAMS s 0\r\n", "*1\r\n"},
		{"XREAD BLOCK -1 STREAMS s 0\r\n", "-ERR value is not an integer or out of range\r\n"},
		{"XADD s 18446744073709551616-0 a b\r\n", "-ERR Invalid stream ID specified as stream command argument\r\n"},
		{"XADD s\r\n \r\n", "-ERR wrong number of arguments for 'xadd' command\r\n"},
	} {
		if got, err := exchange(c.send); got != c.want || err != nil {
			t.Errorf("%q: %q %v, want %q", c.send, got, err, c.want)
		}
	}
}

func TestTopicOf(t *testing.T) {
	for key, want := range map[string]string{"s": "s", "orders-eu_1": "orders-eu_1", "orders:eu": "x.6f72646572733a6575", "a.b": "x.612e62", "": "x."} {
		if got := topicOf([]byte(key)).Topic; got != want {
			t.Errorf("topicOf(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestBlockedReadEndsWithItsClient: an XREAD BLOCK 0 whose client goes
// away stops waiting (it watches the connection's Done): nothing is left
// in flight.
func TestBlockedReadEndsWithItsClient(t *testing.T) {
	s := serve(t, t.TempDir())
	c, err := net.Dial("tcp", s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "XREAD BLOCK 0 STREAMS s $\r\n"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the XREAD to block", func() bool { return s.blocked.Load() == 1 })
	c.Close()
	// The wait ends. (The window's slot is freed at once either way, and
	// counting goroutines was not a measure: gnet starts goroutines of
	// its own after Listen returns.)
	testkit.WaitFor(t, 10*time.Second, "the XREAD's wait to end", func() bool { return s.blocked.Load() == 0 })
}
