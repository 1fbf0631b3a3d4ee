// Command redis-streams serves Redis streams (XADD, XRANGE, XREAD, XLEN)
// over RESP2 from ringlog's engine behind netpoll's RESP splitter: a stream
// is a topic, an entry a record (README.md).
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	if err == nil {
		log.Printf("serving Redis streams on %s, data in %s", s.ln.Addr(), *dir)
		ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		<-ctx.Done()
		err = s.close()
	}
	if err != nil {
		log.Fatal(err)
	}
}

type server struct {
	e     *engine.Engine
	ln    *netpoll.Server
	adds  sync.Mutex                    // one XADD at a time: it reads the top, then appends above it
	added atomic.Pointer[chan struct{}] // closed and replaced by every XADD: blocked XREADs look again
	// blocked counts the XREADs waiting now (for tests: a wait whose
	// client went away must end).
	blocked atomic.Int64
}

func start(addr, dir string) (s *server, err error) {
	s = &server{}
	if s.e, err = engine.Open(dir, nil); err != nil {
		return nil, err
	}
	s.added.Store(new(make(chan struct{})))
	// One command in flight per connection: Redis runs a client's commands in
	// order, and netpoll hands over the next once this one is answered.
	if s.ln, err = netpoll.Listen(netpoll.Config{Addr: addr, Splitter: netpoll.RESP{}, MaxInFlight: 1}, s); err != nil {
		return nil, errors.Join(err, s.e.Close())
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
// connection only, never netpoll's event loop.
func (s *server) Serve(c *netpoll.Conn, seq uint64, frame []byte) {
	go func() {
		var r *netpoll.Response                                     // nil: no reply, to an empty command as Redis ignores it
		if args, _ := (netpoll.RESP{}).Args(frame); len(args) > 0 { // RESP cut it whole: no error
			r = &netpoll.Response{}
			r.AppendBytes(s.exec(c.Done(), args))
		}
		c.Reply(seq, r)
	}()
}

func (s *server) Closed(*netpoll.Conn) {} // a blocked XREAD watches c.Done()

// arity is each command's least and most argument count, name included.
var arity = map[string][2]int{"PING": {1, 2}, "XLEN": {2, 2}, "XRANGE": {4, 6}, "XADD": {5, math.MaxInt}, "XREAD": {4, math.MaxInt}}

// exec runs a command; an error is the reply "-ERR <error>".
func (s *server) exec(closed <-chan struct{}, args [][]byte) []byte {
	name := strings.ToUpper(string(args[0]))
	reply, err := []byte(nil), error(nil)
	switch n, ok := arity[name]; {
	case !ok: // COMMAND (redis-cli), HELLO and CLIENT (go-redis): each goes on without
		msg := fmt.Sprintf("unknown command '%.128s', with args beginning with: ", args[0])
		for _, a := range args[1:min(len(args), 8)] {
			msg += fmt.Sprintf("'%.128s' ", a)
		}
		err = errors.New(msg)
	case len(args) < n[0] || len(args) > n[1] || name == "XADD" && len(args)%2 == 0:
		err = fmt.Errorf("wrong number of arguments for '%s' command", strings.ToLower(name))
	case name == "PING" && len(args) == 2:
		reply = bulk(nil, args[1])
	case name == "PING":
		reply = netpoll.AppendRESPSimple(nil, "PONG")
	case name == "XADD":
		reply, err = s.xadd(args)
	case name == "XREAD":
		reply, err = s.xread(closed, args)
	case name == "XRANGE":
		reply, err = s.xrange(args)
	default: // XLEN: none is deleted, offsets start at 0
		var end int64
		_, end, err = s.e.Offsets(topicOf(args[1]))
		reply, err = netpoll.AppendRESPInt(nil, end), unknownIsEmpty(err)
	}
	if err != nil {
		return netpoll.AppendRESPError(nil, "ERR "+err.Error())
	}
	return reply
}

// XADD key <* | ms-seq | ms> field value [field value ...]
func (s *server) xadd(args [][]byte) ([]byte, error) {
	x, ok := parseID(string(args[2]), 0)
	if auto := string(args[2]) == "*"; !ok && !auto {
		return nil, errInvalidID
	} else if x == (id{}) && !auto {
		return nil, errors.New("The ID specified in XADD must be greater than 0-0")
	}
	tp := topicOf(args[1])
	s.adds.Lock()
	defer s.adds.Unlock()
	if err := s.e.CreateTopic(tp.Topic, engine.TopicOptions{}); err != nil && !errors.Is(err, engine.ErrTopicExists) {
		return nil, err
	}
	top, err := s.idAt(tp, -1)  // 0-0 for a new stream
	if string(args[2]) == "*" { // the time, or the top's next seq when the clock is behind, as Redis does
		if x = (id{uint64(time.Now().UnixMilli()), 0}); !top.less(x) {
			x = id{top.ms, top.seq + 1}
		}
	}
	if err != nil || !top.less(x) {
		return nil, cmp.Or(err, errors.New("The ID specified in XADD is equal or smaller than the target stream top item"))
	}
	rec := engine.Record{Key: fmt.Appendf(nil, "%d-%d", x.ms, x.seq)} // timestamped now
	for i := 3; i < len(args); i += 2 {
		rec.Headers = append(rec.Headers, engine.Header{Key: string(args[i]), Value: args[i+1]})
	}
	// Not the connection's context: a Produce given up on could be written after the next XADD read the top.
	_, err = s.e.Produce(context.Background(), tp, rec)
	close(*s.added.Swap(new(make(chan struct{})))) // also after an error: a wait looks again for nothing
	return bulk(nil, rec.Key), err
}

// XRANGE key start end [COUNT count]; start and end are IDs, "-" or "+".
func (s *server) xrange(args [][]byte) ([]byte, error) {
	bounds := map[string]string{"-": "0-0", "+": fmt.Sprintf("%d-%[1]d", uint64(math.MaxUint64))}
	start, ok1 := parseID(cmp.Or(bounds[string(args[2])], string(args[2])), 0)
	end, ok2 := parseID(cmp.Or(bounds[string(args[3])], string(args[3])), math.MaxUint64)
	count, err := int64(0), error(nil) // 0: all
	if len(args) == 5 || len(args) == 6 && !strings.EqualFold(string(args[4]), "COUNT") {
		return nil, errSyntax
	} else if len(args) == 6 {
		count, err = strconv.ParseInt(string(args[5]), 10, 64)
	}
	if !ok1 || !ok2 {
		return nil, errInvalidID
	} else if err != nil {
		return nil, errNotInteger
	} else if len(args) == 6 && count <= 0 { // as Redis answers
		return array(nil, -1), nil
	}
	entries, n, err := s.rangeOf(args[1], start, false, end, count, maxReplyBytes)
	return append(array(nil, n), entries...), err
}

// XREAD [COUNT count] [BLOCK ms] STREAMS key [key ...] id [id ...]; "$" is
// the stream's top ID when XREAD is called.
func (s *server) xread(closed <-chan struct{}, args [][]byte) ([]byte, error) {
	count, wait, i := int64(0), time.Duration(-1), 1 // no BLOCK: no wait
	for ; i+2 < len(args) && !strings.EqualFold(string(args[i]), "STREAMS"); i += 2 {
		n, err := strconv.ParseInt(string(args[i+1]), 10, 64)
		switch o := strings.ToUpper(string(args[i])); {
		case o != "COUNT" && o != "BLOCK":
			return nil, errSyntax
		case err != nil || o == "BLOCK" && n < 0:
			return nil, errNotInteger
		case o == "COUNT":
			count = max(n, 0) // 0: all
		default: // BLOCK 0 waits for ever
			wait = cmp.Or(time.Duration(min(n, int64(math.MaxInt64/time.Millisecond)))*time.Millisecond, math.MaxInt64)
		}
	}
	streams := args[i+1:]
	if !strings.EqualFold(string(args[i]), "STREAMS") || len(streams) == 0 {
		return nil, errSyntax
	} else if len(streams)%2 != 0 {
		return nil, errors.New("Unbalanced 'xread' list of streams: for each stream key an ID or '$' must be specified.")
	}
	keys, after := streams[:len(streams)/2], make([]id, len(streams)/2)
	for j, arg := range streams[len(keys):] {
		var ok bool
		if string(arg) == "$" {
			after[j], _ = s.idAt(topicOf(keys[j]), -1) // 0-0 for a stream yet to be created
		} else if after[j], ok = parseID(string(arg), 0); !ok {
			return nil, errInvalidID
		}
	}
	for timeout := time.After(wait); ; {
		added := *s.added.Load() // before the reads, so that a later XADD wakes the wait
		reply, streams := []byte(nil), 0
		for j, key := range keys {
			entries, n, err := s.rangeOf(key, after[j], true, id{math.MaxUint64, math.MaxUint64}, count, maxReplyBytes-len(reply))
			if err != nil {
				return nil, err
			} else if n > 0 {
				reply, streams = append(array(bulk(array(reply, 2), key), n), entries...), streams+1
			}
		}
		if streams > 0 {
			return append(array(nil, streams), reply...), nil
		}
		if r, done := s.block(timeout, closed, added); done {
			return r, nil
		}
	}
}

// block waits for an XADD, the timeout or the client's going; done says
// the XREAD is over, with reply r.
func (s *server) block(timeout <-chan time.Time, closed, added <-chan struct{}) (r []byte, done bool) {
	s.blocked.Add(1)
	defer s.blocked.Add(-1)
	select {
	case <-timeout:
		return array(nil, -1), true // nothing came in time
	case <-closed:
		return nil, true // for no one
	case <-added:
		return nil, false
	}
}

const maxReplyBytes = 64 << 20 // bounds a reply of entries (Redis has no such bound)

// rangeOf returns the entries of a stream whose IDs are above from (or at
// least from, unless strict) and at most end, at most count of them (0:
// all) in about room bytes at most, each as [ID, [field, value, ...]].
func (s *server) rangeOf(key []byte, from id, strict bool, end id, count int64, room int) (b []byte, n int, err error) {
	tp := topicOf(key)
	lo, hi, err := s.e.Offsets(tp)
	if err != nil {
		return nil, 0, unknownIsEmpty(err)
	}
	// The first entry after from, by bisection: IDs grow with offsets.
	lo += int64(sort.Search(int(hi-lo), func(i int) bool {
		x, e := s.idAt(tp, lo+int64(i))
		err = cmp.Or(err, e)
		return from.less(x) || !strict && x == from
	}))
	for err == nil && len(b) <= room {
		res, err := s.e.Fetch(context.Background(), tp, lo, int(min(count-int64(n), math.MaxInt32)))
		if err != nil || len(res.Records) == 0 {
			return b, n, err
		}
		for _, r := range res.Records {
			if x, ok := parseID(string(r.Key), 0); !ok || end.less(x) {
				return b, n, nil
			}
			b = array(bulk(array(b, 2), r.Key), 2*len(r.Headers))
			for _, h := range r.Headers {
				b = bulk(bulk(b, []byte(h.Key)), h.Value)
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
	if _, end, err := s.e.Offsets(tp); err != nil || offset < 0 && end == 0 {
		return id{}, err
	} else if offset < 0 {
		offset = end - 1
	}
	res, err := s.e.Fetch(context.Background(), tp, offset, 1)
	if err == nil && len(res.Records) == 1 {
		if x, ok := parseID(string(res.Records[0].Key), 0); ok {
			return x, nil
		}
	}
	return id{}, cmp.Or(err, fmt.Errorf("the record at offset %d of %s is no stream entry", offset, tp.Topic))
}

// id is a stream entry ID, <ms>-<seq>.
type id struct{ ms, seq uint64 }

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
	if engine.ValidateTopicName(string(key)) == nil && !strings.Contains(string(key), ".") {
		return engine.TP{Topic: string(key)}
	}
	return engine.TP{Topic: fmt.Sprintf("x.%x", key)}
}

// Replies are built with netpoll's RESP helpers.
var bulk, array = netpoll.AppendRESPBulk, netpoll.AppendRESPArray

// unknownIsEmpty reads a stream yet to be created as one with no entries.
func unknownIsEmpty(err error) error {
	if errors.Is(err, engine.ErrUnknownTopicOrPartition) {
		return nil
	}
	return err
}

var (
	errInvalidID  = errors.New("Invalid stream ID specified as stream command argument")
	errSyntax     = errors.New("syntax error")
	errNotInteger = errors.New("value is not an integer or out of range")
)
