// Package netpoll is ringlog's connection layer: it accepts TCP connections,
// cuts each byte stream into frames with a Splitter, hands every frame to a
// Handler, and writes the handler's responses back in request order. A
// response is a sequence of byte slices and file regions; file regions go
// out with sendfile, from the page cache to the socket without a copy
// through user space. netpoll knows no protocol: a Splitter says where a
// frame ends and what precedes a response, and the kafka package, which
// imports netpoll (never the reverse), uses the default, Kafka's framing.
//
// # Framing
//
// Config.Splitter cuts requests. The default, LengthPrefixed, is Kafka's
// framing, for requests and responses:
//
//	+------------------------+---------------------------------+
//	| length: int32, BE      | body: length bytes              |
//	+------------------------+---------------------------------+
//
// Lines (a line per request, "\n" or "\r\n") and RESP (Redis clients' arrays
// of bulk strings, and inline commands) are ready-made for other protocols;
// their responses get no prefix, the handler frames them itself; RESP.Args
// splits a RESP command into its arguments, with the code that cut it. A
// Splitter answers, for the bytes at the start of a frame: complete, with
// the frame's length and the framing bytes at its head and tail that the
// handler does not get; length known but not all here (a length prefix);
// more bytes needed, with a Resume so that it need not scan again what it
// saw; or an error, which closes the connection.
//
// A frame's body is bounded by Config.MaxFrameBytes (socket.request.max.bytes).
// With LengthPrefixed a length above it, or negative, closes the connection
// before any of the body is read; a body whose length is known grows with
// the bytes that arrive (64 KiB, then at most 4x what was received), so a
// client announcing 100 MiB and sending nothing costs 64 KiB, not 100 MiB.
// A frame whose end is not found yet is kept in a buffer that grows by
// powers of two from 512 bytes, to at most 4x what was received and never
// beyond MaxFrameBytes + MaxFramingBytes, whatever the Splitter says. A
// response's prefix is written by netpoll (LengthPrefixed: the sum of its
// parts).
//
//	response on the wire:  [prefix][bytes part][file region ...][bytes part] ...
//	                        ^ netpoll  ^ writev     ^ sendfile     ^ writev
//
// # Two implementations, one API
//
//   - gnet (Linux, FreeBSD, macOS): github.com/panjf2000/gnet/v2 event loops,
//     multicore, each loop on a locked OS thread owning its connections. A
//     connection's reading, Serve calls, writing and sendfile all happen on
//     its loop; other goroutines reach it through gnet's Wake and Close,
//     which queue a task on that loop.
//   - portable (every OS, and Config.Portable): the standard net package, a
//     reader goroutine and a writer goroutine per connection. Regions go by
//     sendfile on Linux (through the socket's RawConn, so waiting for room
//     parks the goroutine on Go's poller), by pread and write elsewhere.
//
// Listen picks one from Config; Server.IO reports which.
//
// # sendfile on gnet
//
// gnet has no sendfile and no "writable again" callback: its outbound buffer
// is flushed on EPOLLOUT inside gnet, and neither Wake nor AsyncWrite's
// callback says when that buffer drained (the callback runs as soon as the
// bytes are queued). Three schemes were considered:
//
//  1. sendfile on the loop while gnet's outbound buffer is empty; what the
//     socket does not take at once is copied (pread, then gnet's Write) into
//     gnet's buffer, and gnet's own EPOLLOUT handling sends it. Simple, but
//     a region larger than the free socket buffer is mostly copied.
//  2. sendfile until EAGAIN, then resume by polling (a ticker that wakes
//     stalled connections): added latency or wasted wake-ups, since nothing
//     says when the socket drained.
//  3. sendfile until EAGAIN, then resume from a drain watcher (chosen).
//     When sendfile returns EAGAIN, or gnet's buffer holds bytes that must
//     go first, the socket is registered for one EPOLLOUT (EPOLLONESHOT;
//     EVFILT_WRITE with EV_ONESHOT on the BSDs) in an epoll set of our own,
//     watched by one goroutine per server. When the socket has room it wakes the
//     connection's loop (gnet's Wake), and the loop resumes the sendfile
//     where it stopped. gnet is not bypassed: it keeps the socket and reads
//     it; the watcher only observes writability, and all writes still
//     happen on the loop.
//
// Measured on loopback on a 2-core machine (TestSendfileShare with 4 MiB
// regions, BenchmarkFileRegion with 1 and 16 MiB): scheme 3 sends 100% of
// region bytes by sendfile, to a client that reads promptly and to one that
// reads in slow sips alike; scheme 1 sent between 1% and 72% across runs
// (the rest copied; the faster the client drains, the more fits at once)
// and used 0.45-0.82 server CPU-seconds per GB against 0.26-0.40, for equal
// or lower throughput (about 2 GB/s either way). Scheme 1 stays available
// behind an unexported Config field for that comparison.
//
// Byte segments go through gnet's Writev, zero-copy when the socket takes
// them; what it does not take is copied into gnet's outbound buffer, bounded
// by one gather (256 KiB), after which the connection waits for the watcher
// rather than queue more.
//
// # Concurrency contract
//
//   - Listen, Server.Addr, Server.IO, Server.Stats, Server.Close: any
//     goroutine. Close may be called more than once; later calls wait for
//     the first.
//   - Handler.Serve: on the connection's event loop (gnet) or reader
//     goroutine (portable), once per frame, in arrival order, never
//     concurrently for one connection. It must not block: on gnet it holds
//     up every connection of its loop.
//   - Splitter.Split: on the same goroutine as Serve, before the frame is
//     served, and for every connection of the server at once, so one
//     Splitter value must be safe for concurrent use (the ready-made ones
//     are stateless). It must not block nor keep the bytes it is shown.
//   - Splitter.AppendResponsePrefix: inside Conn.Reply, on the handler's
//     goroutine.
//   - Handler.Closed: once per connection, on the same goroutine as Serve,
//     after the last Serve.
//   - Conn.Reply, Conn.NoReply: any goroutine, exactly one of them per
//     sequence number. They do not block and never write to the socket
//     themselves; the connection's writer (loop or writer goroutine) does.
//   - Conn.Close, Conn.RemoteAddr, Conn.SetContext, Conn.Context: any
//     goroutine.
//   - Response: built by one goroutine; owned by netpoll from Reply until
//     its OnDone functions run. They run on the connection's loop or writer
//     goroutine once the response is written, on the goroutine that closed
//     the connection when it is dropped, and inside Reply itself when the
//     connection was already gone. They must not block.
//   - Stats counters are atomics, readable at any time; a snapshot is not a
//     consistent cut across counters.
//
// # Limits and back-pressure
//
// A connection stops reading (does not call Serve) while MaxInFlight
// requests are unanswered or more than MaxQueuedBytes of responses wait to
// be written; it resumes when answers arrive and the client reads. The
// portable path then simply does not read, and TCP holds the client back.
// gnet cannot stop reading a socket (its poller is not exposed), so a
// paused gnet connection's requests wait unparsed in gnet's inbound buffer,
// and a client that sends more than max(MaxQueuedBytes, 1 MiB) without
// reading its responses is closed. MaxConns is enforced at accept.
//
// Server.Close is graceful: new connections are refused (gnet accepts and
// closes them at once: it cannot stop accepting without stopping), no new
// request is served, requests in flight are answered and written until ctx
// is done, then every connection is closed.
//
// # Non-obvious invariants
//
//   - A file region is sent by sendfile only while gnet's outbound buffer is
//     empty: the buffer holds earlier bytes of the stream, and sendfile
//     writes to the socket directly, past it.
//   - A region that yields fewer bytes than promised (the file truncated
//     underneath) closes the connection: its size prefix is already out,
//     and any other byte would be read as the rest of the frame.
//   - After gnet's OnClose no Wake or Close may be queued for the
//     connection: once gnet stops, its poller's eventfd is closed, and a
//     late Wake writes 8 bytes to whatever file reused that descriptor
//     number. A mutex-guarded "dead" flag orders every Wake and Close
//     against OnClose.
//   - gnet's Writev and Write close the connection themselves on error and
//     run OnClose inside the call, which drops the write cursor; the caller
//     must return at once without accounting for the write.
//   - The drain watcher registers a socket only on its loop while gnet holds
//     it open, and unregisters it in OnClose, before gnet closes it, so it
//     never watches a reused descriptor. A stale wake-up (a reused number
//     seen between the two) only makes a loop look at a connection with
//     nothing to do.
//   - A wake-up from the drain watcher or from a yield bypasses the
//     "scheduled" coalescing of reply wake-ups: the loop may be inside
//     OnTraffic with scheduled set and would never look at the socket
//     again.
//   - sendfile's source descriptor is used inside (*os.File).SyscallConn's
//     Control: a concurrent Close of the segment file cannot hand the
//     number to another file while sendfile reads it.
//   - Linux's sendfile advances the offset it is given, the BSDs' do not
//     and may return EAGAIN with a partial count: the wrapper takes a
//     position and returns a count on every platform.
//   - A request is counted in flight before the closing flag is checked,
//     and Close sets the flag before it reads the count: either Close waits
//     for that request or the request is not served.
//   - Answers arriving after a connection closed release their response
//     (OnDone) and change no counter: teardown already counted their
//     sequence numbers as finished.
//   - The gnet listener sets SO_REUSEADDR, as Go's net.Listen does: without
//     it, a broker restarted on its port cannot bind while the connections
//     it closed sit in TIME_WAIT.
//   - A frame body of 64 KiB or more sits in a pooled buffer rounded up to
//     a power of two: the framer never offers the room past the frame's
//     end (those bytes are the next frame's), and hands the frame out cut
//     to its exact length and capacity.
//   - Bytes are taken from the inbound buffer (gnet's, bufio's) only as
//     far as the frame under way goes: the Splitter is shown them with a
//     peek, and only what it says the frame used is discarded, so the
//     start of the next frame stays where the next look finds it. gnet's
//     Discard(0) discards everything, so it is never called with 0.
//   - The framer checks every Splitter answer (lengths, framing within
//     MaxFramingBytes, a frame's end never inside bytes it said were not
//     enough): a broken Splitter closes the connection with ErrSplitter,
//     logged as an error, instead of misframing, looping or growing.
//   - A response may be no bytes at all (no prefix, no parts): the writers
//     move past empty segments (cursor.advance(0)) so that it still
//     finishes, in order. The buffer goes back to the pool
//     only on the handler's Recycle for that very sequence number; teardown
//     recycles nothing, since the handler (a shard writing the records) may
//     still be reading a closed connection's frames.
//   - The gnet path reads a frame body straight from the socket only when
//     its length is known (announced by the Splitter), only while gnet's
//     inbound buffer is empty (its bytes come first), and asks for no more
//     than the frame still lacks: the next frame's bytes stay in the
//     socket for gnet. End of stream there is a frame cut short.
//   - gnet's Accept errors other than a reset (EMFILE included) stop the
//     whole engine (a gnet behaviour); keep the process's descriptor limit
//     above MaxConns plus the open segment files.
//   - RESP refuses a count or length with a leading zero ("$03"), as
//     Redis does: a command then has one encoding, and RESP.Args's
//     arguments re-encode to the very frame (its fuzz target checks it).
//     RESP.Args walks an array with Split's own element reader (respBulk),
//     so the two cannot disagree on what a command is.
package netpoll
