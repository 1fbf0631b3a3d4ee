// Command redis-streams serves Redis streams (XADD, XRANGE, XREAD, XLEN)
// over RESP2 from ringlog's engine (engine.Engine) behind netpoll's RESP
// splitter. A stream is a topic of one partition; an entry is a record whose
// key is the entry ID, "<ms>-<seq>", and whose headers are its field-value
// pairs. README.md says more.
package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/maphash"
	"log"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"ringlog/engine"
	"ringlog/netpoll"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:6380", "TCP address to serve RESP on")
	dir := flag.String("data-dir", "redis-streams-data", "the engine's data directory")
	flag.Parse()
	s, err := start(*listen, *dir)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("serving Redis streams on %s, data in %s", s.ln.Addr(), *dir)
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	<-ctx.Done()
	if err := s.close(); err != nil {
		log.Fatal(err)
	}
}

type server struct {
	e     *engine.Engine
	ln    *netpoll.Server
	adds  [64]sync.Mutex // one XADD at a time per stream (by hash of its topic)
	seed  maphash.Seed
	mu    sync.Mutex
	added chan struct{} // closed and replaced by every XADD: blocked XREADs look again
}

func start(addr, dir string) (*server, error) {
	e, err := engine.Open(dir, nil)
	if err != nil {
		return nil, err
	}
	s := &server{e: e, seed: maphash.MakeSeed(), added: make(chan struct{})}
	// One command in flight per connection: Redis runs a client's commands in
	// order, and netpoll hands over the next once this one is answered.
	cfg := netpoll.Config{Addr: addr, Splitter: netpoll.RESP{}, MaxInFlight: 1}
	if s.ln, err = netpoll.Listen(cfg, s); err != nil {
		return nil, errors.Join(err, e.Close())
	}
	return s, nil
}

// close stops serving, leaving commands in flight a moment to answer.
func (s *server) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return errors.Join(s.ln.Close(ctx), s.e.Close())
}

// Serve runs the command on a goroutine: a blocked XREAD holds up its own
// connection only, never netpoll's event loop. The connection's context is a
// channel that Closed closes, to end a blocked XREAD.
func (s *server) Serve(c *netpoll.Conn, seq uint64, frame []byte) {
	closed, _ := c.Context().(chan struct{})
	if closed == nil {
		closed = make(chan struct{})
		c.SetContext(closed)
	}
	go func() {
		var r *netpoll.Response // nil: no reply, to an empty command as Redis ignores it
		if args := parseCommand(frame); len(args) > 0 {
			r = &netpoll.Response{}
			r.AppendBytes(s.exec(closed, args))
		}
		c.Reply(seq, r)
	}()
}

func (s *server) Closed(c *netpoll.Conn) {
	if closed, _ := c.Context().(chan struct{}); closed != nil {
		close(closed)
	}
}

// arity is each command's least and most argument count, name included.
var arity = map[string][2]int{"PING": {1, 2}, "HELLO": {1, math.MaxInt}, "XLEN": {2, 2}, "XRANGE": {4, 6},
	"XADD": {5, math.MaxInt}, "XREAD": {4, math.MaxInt}}

func (s *server) exec(closed chan struct{}, args [][]byte) []byte {
	name := strings.ToUpper(string(args[0]))
	n, ok := arity[name]
	switch {
	case !ok: // COMMAND (redis-cli asks it) and CLIENT (go-redis): both go on without
		msg := fmt.Sprintf("ERR unknown command '%.128s', with args beginning with: ", args[0])
		for _, a := range args[1:min(len(args), 8)] {
			msg += fmt.Sprintf("'%.128s' ", a)
		}
		return errorf("%s", msg)
	case len(args) < n[0] || len(args) > n[1]:
		return errorf("ERR wrong number of arguments for '%s' command", strings.ToLower(name))
	case name == "PING" && len(args) == 2:
		return fmt.Appendf(nil, "$%d\r\n%s\r\n", len(args[1]), args[1])
	case name == "PING":
		return []byte("+PONG\r\n")
	case name == "HELLO": // go-redis sends HELLO 3, then speaks RESP2
		return errorf("NOPROTO this server speaks RESP2 only, and HELLO is RESP3's")
	case name == "XADD":
		return s.xadd(args)
	case name == "XREAD":
		return s.xread(closed, args)
	case name == "XRANGE":
		return s.xrange(args)
	}
	_, end, err := s.e.Offsets(topicOf(args[1])) // XLEN: none is deleted, offsets start at 0
	if err != nil && !errors.Is(err, engine.ErrUnknownTopicOrPartition) {
		return errorf("ERR %v", err)
	}
	return fmt.Appendf(nil, ":%d\r\n", end)
}

// XADD key <* | ms-seq | ms> field value [field value ...]
func (s *server) xadd(args [][]byte) []byte {
	x, ok := parseID(string(args[2]), 0)
	auto := string(args[2]) == "*"
	switch {
	case len(args)%2 == 0:
		return errorf("ERR wrong number of arguments for 'xadd' command")
	case !ok && !auto:
		return errInvalidID
	case x == id{} && !auto:
		return errorf("ERR The ID specified in XADD must be greater than 0-0")
	}
	tp := topicOf(args[1])
	mu := &s.adds[maphash.String(s.seed, tp.Topic)%uint64(len(s.adds))]
	mu.Lock()
	defer mu.Unlock()
	top, err := s.idAt(tp, -1) // 0-0 for a stream yet to be created
	missing := errors.Is(err, engine.ErrUnknownTopicOrPartition)
	if now := uint64(time.Now().UnixMilli()); auto && top.less(id{now, 0}) {
		x = id{now, 0}
	} else if auto { // the clock is behind the top: the top's next seq, as Redis does
		x = id{top.ms, top.seq + 1}
	}
	if err != nil && !missing {
		return errorf("ERR %v", err)
	} else if !top.less(x) {
		return errorf("ERR The ID specified in XADD is equal or smaller than the target stream top item")
	} else if err := s.e.CreateTopic(tp.Topic, engine.TopicOptions{}); missing && err != nil {
		return errorf("ERR %v", err)
	}
	rec := engine.Record{Key: fmt.Appendf(nil, "%d-%d", x.ms, x.seq)} // timestamped now
	for i := 3; i < len(args); i += 2 {
		rec.Headers = append(rec.Headers, engine.Header{Key: string(args[i]), Value: args[i+1]})
	}
	// Not the connection's context: a Produce given up on could still be
	// written, after the next XADD read the top.
	if _, err := s.e.Produce(context.Background(), tp, rec); err != nil {
		return errorf("ERR %v", err)
	}
	s.mu.Lock()
	close(s.added)
	s.added = make(chan struct{})
	s.mu.Unlock()
	return fmt.Appendf(nil, "$%d\r\n%s\r\n", len(rec.Key), rec.Key)
}

// XRANGE key start end [COUNT count]; start and end are IDs, "-" or "+".
func (s *server) xrange(args [][]byte) []byte {
	bounds := map[string]string{"-": "0-0", "+": fmt.Sprintf("%d-%[1]d", uint64(math.MaxUint64))}
	start, ok1 := parseID(cmp.Or(bounds[string(args[2])], string(args[2])), 0)
	end, ok2 := parseID(cmp.Or(bounds[string(args[3])], string(args[3])), math.MaxUint64)
	count, err := int64(0), error(nil) // 0: all
	if len(args) == 5 || len(args) == 6 && !strings.EqualFold(string(args[4]), "COUNT") {
		return errSyntax
	} else if len(args) == 6 {
		count, err = strconv.ParseInt(string(args[5]), 10, 64)
	}
	if !ok1 || !ok2 {
		return errInvalidID
	} else if err != nil {
		return errNotInteger
	}
	entries, n, err := s.rangeOf(args[1], start, false, end, max(count, 0), maxReplyBytes)
	switch {
	case errors.Is(err, engine.ErrUnknownTopicOrPartition):
		return []byte("*0\r\n")
	case err != nil:
		return errorf("ERR %v", err)
	case len(args) == 6 && count <= 0: // as Redis answers, once the stream exists
		return []byte("*-1\r\n")
	}
	return append(fmt.Appendf(nil, "*%d\r\n", n), entries...)
}

// XREAD [COUNT count] [BLOCK ms] STREAMS key [key ...] id [id ...]; "$" is
// the stream's top ID when XREAD is called.
func (s *server) xread(closed chan struct{}, args [][]byte) []byte {
	count, wait, i := int64(0), time.Duration(-1), 1 // no BLOCK: no wait
	for ; i+2 < len(args) && !strings.EqualFold(string(args[i]), "STREAMS"); i += 2 {
		n, err := strconv.ParseInt(string(args[i+1]), 10, 64)
		switch o := strings.ToUpper(string(args[i])); {
		case o != "COUNT" && o != "BLOCK":
			return errSyntax
		case err != nil || o == "BLOCK" && n < 0:
			return errNotInteger
		case o == "COUNT":
			count = max(n, 0) // 0: all
		default: // BLOCK 0 waits for ever
			wait = cmp.Or(time.Duration(min(n, int64(math.MaxInt64/time.Millisecond)))*time.Millisecond, math.MaxInt64)
		}
	}
	streams := args[i+1:]
	if !strings.EqualFold(string(args[i]), "STREAMS") || len(streams) == 0 {
		return errSyntax
	} else if len(streams)%2 != 0 {
		return errorf("ERR Unbalanced 'xread' list of streams: for each stream key an ID or '$' must be specified.")
	}
	keys, after := streams[:len(streams)/2], make([]id, len(streams)/2)
	for j, arg := range streams[len(keys):] {
		var ok bool
		if string(arg) == "$" {
			after[j], _ = s.idAt(topicOf(keys[j]), -1) // 0-0 for a stream yet to be created
		} else if after[j], ok = parseID(string(arg), 0); !ok {
			return errInvalidID
		}
	}
	timeout := time.After(wait)
	for {
		s.mu.Lock()
		added := s.added // before the reads, so that a later XADD wakes the wait
		s.mu.Unlock()
		var reply []byte
		streams := 0
		for j, key := range keys {
			entries, n, err := s.rangeOf(key, after[j], true, idMax, count, maxReplyBytes-len(reply))
			if err != nil && !errors.Is(err, engine.ErrUnknownTopicOrPartition) {
				return errorf("ERR %v", err)
			} else if n > 0 {
				reply = append(fmt.Appendf(reply, "*2\r\n$%d\r\n%s\r\n*%d\r\n", len(key), key, n), entries...)
				streams++
			}
		}
		if streams > 0 {
			return append(fmt.Appendf(nil, "*%d\r\n", streams), reply...)
		}
		select {
		case <-timeout:
			return []byte("*-1\r\n") // nothing came in time
		case <-closed:
			return nil // for no one
		case <-added:
		}
	}
}

// maxReplyBytes bounds a reply of entries (Redis has no such bound).
const maxReplyBytes = 64 << 20

// rangeOf returns the entries of a stream whose IDs are above from (or at
// least from, unless strict) and at most end, at most count of them (0:
// all) in about room bytes at most, each as [ID, [field, value, ...]].
func (s *server) rangeOf(key []byte, from id, strict bool, end id, count int64, room int) (b []byte, n int, err error) {
	tp := topicOf(key)
	lo, hi, err := s.e.Offsets(tp)
	// The first entry after from: gallop back from the end (XREAD asks for
	// recent entries), then bisect. IDs grow with offsets.
	for step, bisect := int64(1), false; err == nil && lo < hi && from != (id{}); step *= 2 {
		mid := max(lo, hi-step)
		if bisect {
			mid = lo + (hi-lo)/2
		}
		var x id
		if x, err = s.idAt(tp, mid); from.less(x) || !strict && x == from {
			hi = mid
		} else {
			lo, bisect = mid+1, true
		}
	}
	for err == nil && len(b) <= room {
		res, err := s.e.Fetch(context.Background(), tp, lo, int(min(count-int64(n), math.MaxInt32)))
		if err != nil || len(res.Records) == 0 {
			return b, n, err
		}
		for _, r := range res.Records {
			if x, ok := parseID(string(r.Key), 0); !ok || end.less(x) {
				return b, n, nil
			}
			b = fmt.Appendf(b, "*2\r\n$%d\r\n%s\r\n*%d\r\n", len(r.Key), r.Key, 2*len(r.Headers))
			for _, h := range r.Headers {
				b = fmt.Appendf(b, "$%d\r\n%s\r\n$%d\r\n%s\r\n", len(h.Key), h.Key, len(h.Value), h.Value)
			}
			if n++; int64(n) == count {
				return b, n, nil
			}
		}
		lo = res.Next
	}
	return b, n, cmp.Or(err, errors.New("the reply would pass 64 MiB: ask for fewer entries with COUNT"))
}

// idAt returns the ID of the entry at offset, or of the last entry at -1
// (0-0 when there is none).
func (s *server) idAt(tp engine.TP, offset int64) (id, error) {
	_, end, err := s.e.Offsets(tp)
	if offset < 0 {
		offset = end - 1
	}
	if err != nil || offset < 0 {
		return id{}, err
	}
	res, err := s.e.Fetch(context.Background(), tp, offset, 1)
	if err != nil || len(res.Records) == 0 {
		return id{}, cmp.Or(err, fmt.Errorf("no entry at offset %d of %s", offset, tp.Topic))
	} else if x, ok := parseID(string(res.Records[0].Key), 0); ok {
		return x, nil
	}
	return id{}, fmt.Errorf("the record at offset %d of %s is no stream entry", offset, tp.Topic)
}

// id is a stream entry ID, <ms>-<seq>.
type id struct{ ms, seq uint64 }

var idMax = id{math.MaxUint64, math.MaxUint64}

func (a id) less(b id) bool { return a.ms < b.ms || a.ms == b.ms && a.seq < b.seq }

// parseID reads "<ms>-<seq>", or "<ms>" meaning <ms>-<seq>.
func parseID(s string, seq uint64) (id, bool) {
	ms, seqText, hasSeq := strings.Cut(s, "-")
	x, err := strconv.ParseUint(ms, 10, 64)
	if hasSeq && err == nil {
		seq, err = strconv.ParseUint(seqText, 10, 64)
	}
	return id{x, seq}, err == nil
}

// topicOf names a stream's topic: its key when that is a topic name without
// '.', else "x." and the key in hex (a name with a '.' is no key's own).
func topicOf(key []byte) engine.TP {
	if engine.ValidateTopicName(string(key)) == nil && !bytes.ContainsRune(key, '.') {
		return engine.TP{Topic: string(key)}
	}
	return engine.TP{Topic: fmt.Sprintf("x.%x", key)}
}

// parseCommand splits a frame that netpoll.RESP cut into its arguments: an
// array of bulk strings ("$<size>\r\n<bytes>\r\n" after "*<count>\r\n"),
// or an inline command's words.
func parseCommand(f []byte) (args [][]byte) {
	if len(f) == 0 || f[0] != '*' {
		return bytes.Fields(f)
	}
	for f = f[bytes.IndexByte(f, '\n')+1:]; len(f) > 0; { // no count off the wire preallocates
		i := bytes.IndexByte(f, '\n')
		size, err := strconv.Atoi(string(f[1:max(i-1, 1)]))
		if i < 2 || err != nil || size < 0 || size > len(f)-i-3 {
			return nil // not RESP, which the splitter lets through to no one
		}
		args, f = append(args, f[i+1:i+1+size]), f[i+size+3:]
	}
	return args
}

// errorf makes an error reply; a line break would end it early.
func errorf(format string, a ...any) []byte {
	return fmt.Appendf(nil, "-%s\r\n", strings.NewReplacer("\r", " ", "\n", " ").Replace(fmt.Sprintf(format, a...)))
}

var (
	errInvalidID  = errorf("ERR Invalid stream ID specified as stream command argument")
	errSyntax     = errorf("ERR syntax error")
	errNotInteger = errorf("ERR value is not an integer or out of range")
)
