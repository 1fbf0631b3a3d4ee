package engine_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"ringlog/engine"
)

// A protocol of our own, with no Kafka in it: one command per line.
//
//	PUT <topic> <partition> <value>   -> OK <offset>
//	GET <topic> <partition> <offset>  -> VAL <offset> <value> | NONE | ERR <text>
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
		off, err := e.Produce(context.Background(), tp, engine.Record{Value: []byte(f[3])})
		if err != nil {
			return "ERR " + err.Error()
		}
		return fmt.Sprintf("OK %d", off)
	case "GET":
		off, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return "ERR bad offset"
		}
		res, err := e.Fetch(context.Background(), tp, off, 1)
		switch {
		case errors.Is(err, engine.ErrOffsetOutOfRange):
			return "NONE"
		case err != nil:
			return "ERR " + err.Error()
		case len(res.Records) == 0:
			return "NONE"
		}
		return fmt.Sprintf("VAL %d %s", res.Records[0].Offset, res.Records[0].Value)
	}
	return "ERR unknown command"
}

// Example embeds the engine behind the line protocol above, on a real
// socket.
func Example() {
	dir, _ := os.MkdirTemp("", "ringlog-example")
	defer os.RemoveAll(dir)
	e, err := engine.Open(dir, nil)
	if err != nil {
		panic(err)
	}
	defer e.Close()
	if err := e.CreateTopic("notes", engine.TopicOptions{Partitions: 2}); err != nil {
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

// ExampleOpen opens a store, creates a topic, and writes and reads a record.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "ringlog-example")
	defer os.RemoveAll(dir)
	e, err := engine.Open(dir, &engine.Options{Flush: engine.FlushAlways})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	if err := e.CreateTopic("events", engine.TopicOptions{Partitions: 4}); err != nil {
		panic(err)
	}
	ctx := context.Background()
	tp := engine.TP{Topic: "events", Partition: 3}
	if _, err := e.Produce(ctx, tp, engine.Record{Key: []byte("user-7"), Value: []byte("signed in")}); err != nil {
		panic(err)
	}
	res, err := e.Fetch(ctx, tp, 0, 10)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d record(s), next offset %d: %s %s\n", len(res.Records), res.Next, res.Records[0].Key, res.Records[0].Value)
	// Output: 1 record(s), next offset 1: user-7 signed in
}

// ExampleEngine_Produce writes records as one batch: they get consecutive
// offsets, the first returned.
func ExampleEngine_Produce() {
	dir, _ := os.MkdirTemp("", "ringlog-example")
	defer os.RemoveAll(dir)
	e, _ := engine.Open(dir, nil)
	defer e.Close()
	e.CreateTopic("log", engine.TopicOptions{})
	tp := engine.TP{Topic: "log"}
	first, err := e.Produce(context.Background(), tp,
		engine.Record{Value: []byte("a")}, engine.Record{Value: []byte("b")}, engine.Record{Value: []byte("c")})
	fmt.Println(first, err)
	next, err := e.Produce(context.Background(), tp, engine.Record{Value: []byte("d")})
	fmt.Println(next, err)
	// Output:
	// 0 <nil>
	// 3 <nil>
}

// ExampleEngine_Fetch reads a partition from the start, a page at a time.
func ExampleEngine_Fetch() {
	dir, _ := os.MkdirTemp("", "ringlog-example")
	defer os.RemoveAll(dir)
	e, _ := engine.Open(dir, nil)
	defer e.Close()
	e.CreateTopic("log", engine.TopicOptions{})
	tp := engine.TP{Topic: "log"}
	for i := range 5 {
		e.Produce(context.Background(), tp, engine.Record{Value: []byte(strconv.Itoa(i))})
	}
	for offset := int64(0); ; {
		res, err := e.Fetch(context.Background(), tp, offset, 2)
		if err != nil || len(res.Records) == 0 {
			break
		}
		for _, r := range res.Records {
			fmt.Print(r.Offset, "=", string(r.Value), " ")
		}
		offset = res.Next
	}
	fmt.Println()
	// Output: 0=0 1=1 2=2 3=3 4=4
}

// ExampleEngine_Subscribe receives records as they are produced.
func ExampleEngine_Subscribe() {
	dir, _ := os.MkdirTemp("", "ringlog-example")
	defer os.RemoveAll(dir)
	e, _ := engine.Open(dir, nil)
	defer e.Close()
	e.CreateTopic("chat", engine.TopicOptions{})
	tp := engine.TP{Topic: "chat"}
	_, end, _ := e.Offsets(tp)
	sub, err := e.Subscribe(tp, end) // only what comes from now on
	if err != nil {
		panic(err)
	}
	defer sub.Close()
	go e.Produce(context.Background(), tp, engine.Record{Value: []byte("hello")})
	r, err := sub.Next(context.Background()) // waits for it
	fmt.Println(r.Offset, string(r.Value), err)
	// Output: 0 hello <nil>
}

// TestLineProtocolSurvivesRestart: what the custom protocol stored is there
// after the engine is reopened.
func TestLineProtocolSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e := openStore(t, dir, nil)
	e.CreateTopic("k", engine.TopicOptions{})
	for i := range 100 {
		if got := handleLine(e, fmt.Sprintf("PUT k 0 v%d", i)); got != fmt.Sprintf("OK %d", i) {
			t.Fatalf("PUT %d: %s", i, got)
		}
	}
	e.Close()
	e = openStore(t, dir, nil)
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
