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
// # Three implementations, one API
//
//   - gnet (Linux, FreeBSD, macOS): github.com/panjf2000/gnet/v2 event loops,
//     multicore, each loop on a locked OS thread owning its connections. A
//     connection's reading, Serve calls, writing and sendfile all happen on
//     its loop; other goroutines reach it through gnet's Wake and Close,
//     which queue a task on that loop.
//   - uring loops (Linux 6.1+, Config.IO = IOUring without Config.Owners,
//     or IOUringLoops): Config.Loops goroutines, each
//     locked to its OS thread with an io_uring of its own (ioring.NetRing,
//     SINGLE_ISSUER and DEFER_TASKRUN) owning its connections, as gnet's
//     loops do. A connection has a multishot receive in the ring, into the
//     loop's provided buffers (a ring of 256 x 16 KiB registered with
//     IORING_REGISTER_PBUF_RING); its bytes go to the framer (bufFeed) and
//     the buffer back to the kernel before the completion's handling ends.
//     Responses go by one sendmsg in the ring at a time per connection
//     (every ready response the cursor gathers), regions by sendfile on the
//     loop with a POLLOUT in the ring when the socket is full. Other
//     goroutines reach a connection through its loop's inbox; a loop that
//     sleeps is woken by an eventfd it always has a read of in its ring. A
//     turn of the loop is one io_uring_enter: the turn's sends and re-armed
//     receives submitted and the next completions waited for in one call.
//     ioring.ProbeNet runs at Listen; a kernel without what it needs serves
//     on gnet, with the reason in a warning. Each loop is a handler and a
//     hook on an ioring.Owner of netpoll's own, which runs its turns.
//   - uring-shards (Config.IO = IOUring or IOUringShards, with
//     Config.Owners): the same connections and code, registered on the
//     owners Config.Owners gives (the engine's shards) instead of owners
//     of netpoll's own, one loop per owner: frames are cut and Serve runs
//     on the shard's thread, between the shard's rounds. A connection goes
//     to the loop that received the fewest bytes since the last accept,
//     and a balancer moves a busy one from a loop that receives much more
//     than another (a client whose load grew after it connected): its
//     receive is cancelled, its requests in flight answered and written,
//     and the other loop adopts it with its bytes not yet framed
//     (Stats.UringMoves). Without owners it serves as the uring loops do.
//   - portable (every OS, and Config.Portable): the standard net package, a
//     reader goroutine and a writer goroutine per connection. Regions go by
//     sendfile on Linux (through the socket's RawConn, so waiting for room
//     parks the goroutine on Go's poller), by pread and write elsewhere.
//
// Listen picks one from Config (IO, or Portable when IO is empty);
// Server.IO reports which. A server with Config.TLS serves on the portable
// path whatever Config.IO says (the event loops cannot terminate TLS), and
// says so in its "listening" log line.
//
// # Accepting
//
// Every implementation accepts from one Go net.Listener, on one goroutine
// that checks MaxConns and MaxConnsPerIP (overrides by address) before
// anything else sees the connection, and waits out accept errors with a
// growing delay (5 ms to 1 s) instead of giving up: at EMFILE the kernel
// keeps the connections waiting in the backlog, and the server accepts
// them once descriptors free up. The listener sets Config.KeepAlive on
// every accepted socket (idle time and probe interval; 9 probes).
//
// gnet's own acceptor cannot do that: on any accept error but a reset it
// returns ErrAcceptSocket, which ends its main reactor; the reactor shuts
// the engine down, every loop closes its connections, and gnet.Run returns
// nil, so the process went on with nothing listening (gnet v2.9.7,
// acceptor_unix.go and reactor_default.go). So gnet accepts nothing: each
// admitted connection is handed over with gnet's Engine.Register, which
// duplicates the descriptor into a gnet connection on the next loop (round
// robin) and runs OnOpen there. Register refuses an engine without a
// listener, so gnet is given a Unix socket in a private temporary
// directory, unlinked in OnBoot: nothing can ever connect to it. The uring
// path takes connections the same way: the descriptor is duplicated on the
// accept goroutine, the net.Conn closed, and the duplicate queued on the
// next loop, which adopts it (Opened) at its next turn.
//
// # TLS
//
// With Config.TLS every connection is a crypto/tls server connection. The
// handshake runs on the connection's reader goroutine, bounded by
// HandshakeTimeout, so a client that connects and says nothing costs its
// two goroutines and nothing else; Serve is first called after it, and
// Conn.TLS then returns the session's state (the client's certificate for
// the handler's authorization). File regions are read and written through
// the TLS connection in 64 KiB chunks (Stats.CopiedBytes): sendfile would
// put the file's plaintext on the wire. Byte segments are gathered into one
// Write per 64 KiB, or every 4-byte size prefix would be a TLS record.
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
// # Request timings
//
// A handler that wants to know where a request's time went (the kafka
// package's RequestMetrics) asks a response for its Timing with
// Response.Observe. netpoll stamps it, in Now's monotonic clock, at four
// points common to the three implementations: Received when the frame is
// cut whole (Conn.begin, just before Serve; Conn.FrameTime tells Serve),
// Replied in Reply, WriteStart when the writer's gather reaches the
// response (right before the writev, sendfile, or the sendmsg put in the
// ring that carries its first byte), Written when the cursor finishes it
// (after the write returned, or the send's completion was reaped), where
// the Observer is called. A frame is stamped when it is cut, not when its
// bytes arrived: a paused connection stops reading (its bytes wait in the
// kernel, or in gnet's inbound buffer, uncut), as Kafka mutes a channel
// with a request in progress, so RequestQueueTime does not see that wait.
// The cost is one clock read per frame, and for an observed response one
// in Reply, one per write that starts responses, and one per response
// written; a response without an Observer pays none of the last three.
//
// # Concurrency contract
//
//   - Listen, Server.Addr, Server.IO, Server.Stats, Server.Close,
//     Server.Done, Server.Err: any goroutine. Close may be called more than
//     once; later calls wait for the first. Done is closed after Close, or
//     when gnet's engine stopped on its own (Err then says why): a broker
//     should exit then rather than look alive.
//   - Handler.Serve: on the connection's event loop (gnet, uring) or
//     reader goroutine (portable), once per frame, in arrival order, never
//     concurrently for one connection. It must not block: on an event loop
//     it holds up every connection of the loop.
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
//   - Conn.Close, Conn.RemoteAddr, Conn.SetContext, Conn.Context, Conn.TLS:
//     any goroutine.
//   - Conn.SetMaxFrameBytes: any goroutine; it bounds the frames whose
//     first bytes are looked at after it, so called from Serve it bounds
//     the very next frame.
//   - Conn.FrameTime: on Serve's goroutine, during Serve.
//   - Observer.Written (Response.Observe): on the connection's loop or
//     writer goroutine, once the response's last byte is written, before
//     its OnDone functions; never for a dropped response. It must not
//     block. Now: any goroutine.
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
// Every limit is a Config field; where Kafka has the setting its doc
// comment names it.
//
// A connection stops reading (does not call Serve) while MaxInFlight
// requests are unanswered or more than MaxQueuedBytes of responses wait to
// be written; it resumes when answers arrive and the client reads. The
// portable path then simply does not read (it checks before a frame's
// first byte), and TCP holds the client back; so does the uring path,
// which cancels the connection's receive when bytes arrive while it is
// paused (they wait in the connection's pending buffer, at most what was
// in flight at the cancellation) and arms it again once the pause ends.
// gnet cannot stop reading a
// socket (its poller is not exposed), so a paused gnet connection's
// requests wait unparsed in gnet's inbound buffer, and a client that sends
// more than max(MaxQueuedBytes, 1 MiB) without reading its responses is
// closed. MaxConns and MaxConnsPerIP are enforced at accept.
//
// MaxQueuedRequestBytes (queued.max.request.bytes) is the same pause,
// taken on a budget all connections share: the bytes of the request frames
// handed to the handler and not yet answered. At the budget, a connection
// that has a request of its own in flight stops taking new ones; one that
// has none is always served one. That exemption is a decision: without it
// a frame larger than the budget would never pass, and requests waiting on
// another connection's request (a produce waiting for a follower's fetch,
// over another connection) could hold the budget forever. The price is the
// bound: the budget plus one frame per connection, which is what paused
// connections hold anyway (a frame read and not yet served). The answer
// that brings the sum under the budget wakes every connection paused on
// it. Unbounded by default, as in Kafka.
//
// A connection's frames are bounded by InitialMaxFrameBytes until the
// handler calls Conn.SetMaxFrameBytes (Kafka keeps an unauthenticated SASL
// connection to sasl.server.max.receive.size), never above MaxFrameBytes.
//
// One sweeper goroutine per server, a few times per timeout, closes
// connections with nothing in flight, nothing to write and no byte moved
// for IdleTimeout (connections.max.idle.ms), and connections with
// responses waiting whose socket took none of their bytes for
// WriteTimeout (a client that stopped reading: its responses and the
// segment files their regions pin are released). Connections arm no
// timers: reading and writing raise a flag on the Conn (a load, and a
// store once per sweep), which the sweeper turns into times.
//
// Server.Close is graceful: the listener is closed (new connections are
// refused), no new request is served, requests in flight are answered and
// written until ctx is done, then every connection is closed.
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
//   - The listener sets SO_REUSEADDR (Go's net.Listen does; gnet's own
//     listener, when it had the port, did not until told to): without it,
//     a broker restarted on its port cannot bind while the connections it
//     closed sit in TIME_WAIT.
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
//   - gnet never accepts: any accept error of its own stops the whole
//     engine (see "Accepting"). Its listener is a Unix socket unlinked in
//     OnBoot, and Register is only called after the first OnTick (gnet's
//     ticker starts after its loops are registered: the only
//     happens-before edge gnet offers for them).
//   - A connection handed to Register is admitted (counted against
//     MaxConns and its IP) before gnet sees it; OnOpen claims the
//     admission, or, if OnOpen never runs (the duplicate failed at EMFILE,
//     the loop refused the socket), the goroutine waiting for Register's
//     result gives it back. A compare-and-swap decides, so it is given
//     back exactly once.
//   - A TLS connection is closed under its TLS layer, without close_notify:
//     tls.Conn.Close sends the alert with a 5 s write deadline, which
//     would block Conn.Close and the sweeper on a client that stopped
//     reading.
//   - A connection the sweeper closed stays in its list until the engine
//     has torn it down (on gnet, a turn of its loop later): the sweeper
//     marks it and skips it, or it closed and counted it again at every
//     sweep meanwhile (TestIdleTimeout saw IdleClosed reach 4 for 2).
//   - A connection paused on the request budget registers to be woken
//     before it looks at the budget a second time: an answer landing
//     between the two looks would otherwise wake nobody.
//   - gnet's outbound buffer holds response bytes netpoll counts written.
//     With WriteTimeout on, the loop publishes its size after every turn
//     (Conn.outBuffered) and keeps the drain watcher armed while it is not
//     empty, since gnet drains it without a word: the next room in the
//     socket brings the loop back to publish what is left, and a buffer
//     that shrank is write progress.
//   - uring: a provided buffer goes back to the ring as soon as the
//     framer has taken its bytes, within the handling of its completion:
//     frames are copied out (the handler owns a frame for as long as it
//     likes, and a pinned buffer would starve the loop's other
//     connections), and bytes a paused connection cannot take yet are
//     copied into its pending buffer. Tests poison every recycled buffer,
//     and the same test recycling early must fail.
//   - uring: a connection is freed (descriptor closed, Closed called)
//     only once every request it had in the ring has completed: Close
//     cancels them (ASYNC_CANCEL by descriptor) and counts their
//     completions down, since the kernel may be reading a response's
//     memory or writing a buffer until then. The sendmsg header and its
//     iovecs live in the connection, not on a stack.
//   - uring: the ring is SINGLE_ISSUER, so it is created and entered only
//     by its loop's goroutine, locked to its thread for the ring's whole
//     life; probes lock their thread too.
//   - uring: an owner sets "sleeping" before it asks its hooks (a loop's
//     inbox) a last time and waits; whoever queues work rings the doorbell
//     (MSG_RING from another owner of the group, else the eventfd) only if
//     it takes "sleeping" from true to false, so a burst of wake-ups costs
//     one and a busy owner none.
//   - uring-shards: a loop on a given owner detaches (handler, hook,
//     provided buffers) at Close once its last connection's requests have
//     completed; the owners must outlive the server (the broker closes its
//     network before its engine).
//   - uring-shards: an owner that closes under a loop (OnClose) ends it
//     as a ring failure ends a loop of netpoll's own: the server stops
//     (ErrEngineStopped) and the connections go. When the owner's ring
//     failed (Owner.Err), nothing more is submitted or reaped on it: the
//     connections are given up at once, with that error as their reason,
//     and their buffers are left to the ring.
//   - uring: a multishot receive that ends (no IORING_CQE_F_MORE: ENOBUFS
//     when the loop's buffers ran out, a cancellation, an error) is armed
//     again by the connection's next turn, unless the connection is
//     paused or closing; ENOBUFS is counted in Stats.UringNoBuffers.
//   - uring: a frame with 64 KiB or more of its body still to come is read
//     straight into its body (one READ at a time, no provided buffer),
//     after its multishot receive has ended: cancelled, and its last
//     completion taken, so that no byte the receive held can be overtaken.
//     The receive is armed again when the body is whole or less than that
//     is left. While the read is in the ring the framer's buffer is the
//     kernel's: nothing else feeds the framer (no receive is armed and
//     nothing is pending), and a closing connection waits for the read's
//     completion before it is freed.
//   - RESP refuses a count or length with a leading zero ("$03"), as
//     Redis does: a command then has one encoding, and RESP.Args's
//     arguments re-encode to the very frame (its fuzz target checks it).
//     RESP.Args walks an array with Split's own element reader (respBulk),
//     so the two cannot disagree on what a command is.
package netpoll
