package engine_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"ringlog/engine"
	"ringlog/segment/batch"
)

// A protocol of our own, with no Kafka in it: one command per line.
//
//	PUT <topic> <partition> <value>   -> OK <offset>
//	GET <topic> <partition> <offset>  -> VAL <offset> <value> | NONE | ERR <text>
//
// The engine is used as a library: batches are built with package batch,
// appended through a shard, and read back as file regions.
func serveLines(e *engine.Engine, ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				fmt.Fprintln(c, handleLine(e, sc.Text()))
			}
		}()
	}
}

func handleLine(e *engine.Engine, line string) string {
	f := strings.SplitN(line, " ", 4)
	if len(f) != 4 {
		return "ERR want: PUT|GET topic partition arg"
	}
	p, err := strconv.Atoi(f[2])
	if err != nil {
		return "ERR bad partition"
	}
	tp := engine.TP{Topic: f[1], Partition: int32(p)}
	switch f[0] {
	case "PUT":
		now := time.Now().UnixMilli()
		b, err := batch.Build(nil, batch.Header{BaseTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			batch.None, []batch.Record{{Value: []byte(f[3])}})
		if err != nil {
			return "ERR " + err.Error()
		}
		done := make(chan string, 1)
		e.Append(tp, b, engine.AppendOptions{}, func(r engine.AppendResult, err error) {
			if err != nil {
				done <- "ERR " + err.Error()
				return
			}
			done <- fmt.Sprintf("OK %d", r.BaseOffset)
		})
		return <-done
	case "GET":
		off, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return "ERR bad offset"
		}
		res, err := e.Read(tp, off, 1<<20, true)
		if err != nil {
			return "ERR " + err.Error()
		}
		defer res.Release()
		if res.Bytes == 0 {
			return "NONE"
		}
		// The regions are what a server would sendfile; here they are read.
		buf := make([]byte, res.Regions[0].Len)
		if _, err := res.Regions[0].File.ReadAt(buf, res.Regions[0].Pos); err != nil {
			return "ERR " + err.Error()
		}
		h, err := batch.Validate(buf[:min(len(buf), int(batchSize(buf)))], batch.Stored)
		if err != nil {
			return "ERR " + err.Error()
		}
		out := "NONE"
		batch.Records(h, buf, 1<<20, func(r *batch.Record) error {
			if o := h.BaseOffset + int64(r.OffsetDelta); o == off {
				out = fmt.Sprintf("VAL %d %s", o, r.Value)
			}
			return nil
		})
		return out
	}
	return "ERR unknown command"
}

func batchSize(b []byte) int64 {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return int64(len(b))
	}
	return int64(h.Size())
}

// Example embeds the engine behind the line protocol above, on a real
// socket.
func Example() {
	dir, _ := os.MkdirTemp("", "ringlog-example")
	defer os.RemoveAll(dir)
	e, err := engine.Open(engine.Config{Dir: dir, Shards: 2})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	if _, err := e.CreateTopic("notes", 2, -1, nil, false); err != nil {
		panic(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go serveLines(e, ln)

	c, _ := net.Dial("tcp", ln.Addr().String())
	defer c.Close()
	r := bufio.NewReader(c)
	for _, cmd := range []string{"PUT notes 1 hello", "PUT notes 1 world", "GET notes 1 1", "GET notes 1 2", "PUT nope 0 x"} {
		fmt.Fprintln(c, cmd)
		line, _ := r.ReadString('\n')
		fmt.Print(line)
	}
	// Output:
	// OK 0
	// OK 1
	// VAL 1 world
	// NONE
	// ERR engine: unknown topic or partition: nope-0
}

// TestLineProtocolSurvivesRestart: what the custom protocol stored is there
// after the engine is reopened.
func TestLineProtocolSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e, err := engine.Open(engine.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	e.CreateTopic("k", 1, -1, nil, false)
	for i := range 100 {
		if got := handleLine(e, fmt.Sprintf("PUT k 0 v%d", i)); got != fmt.Sprintf("OK %d", i) {
			t.Fatalf("PUT %d: %s", i, got)
		}
	}
	e.Close()
	e, err = engine.Open(engine.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, i := range []int{0, 57, 99} {
		if got := handleLine(e, fmt.Sprintf("GET k 0 %d", i)); got != fmt.Sprintf("VAL %d v%d", i, i) {
			t.Fatalf("GET %d: %s", i, got)
		}
	}
	if got := handleLine(e, "GET k 0 100"); got != "NONE" {
		t.Fatalf("GET past the end: %s", got)
	}
}
