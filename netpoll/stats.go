package netpoll

import "sync/atomic"

// Stats is a snapshot of a Server's counters. Gauges (Conns, QueuedBytes,
// InFlight) are current values; the rest count since Listen.
type Stats struct {
	Conns    int64 // open connections
	Accepted int64 // connections accepted and served
	Rejected int64 // connections closed at accept (MaxConns or MaxConnsPerIP reached, or the server closing)
	Frames   int64 // request frames handed to the handler
	BytesIn  int64 // request bytes read, size prefixes included
	BytesOut int64 // response bytes written to sockets (or handed to gnet), size prefixes included

	// SendfileBytes counts file-region bytes sent by sendfile, CopiedBytes
	// file-region bytes that had to be read into memory and written instead.
	SendfileBytes int64
	CopiedBytes   int64

	QueuedBytes int64 // response bytes replied and not yet written (gauge)
	InFlight    int64 // requests handed to the handler whose answer is not yet written or skipped (gauge)
	Pauses      int64 // times a connection stopped reading because MaxInFlight, MaxQueuedBytes or MaxQueuedRequestBytes was reached
	Mutes       int64 // times a handler muted a connection (Conn.Mute: a throttled client)

	// QueuedRequestBytes is the request bytes handed to the handler and
	// not yet answered (gauge), kept only when MaxQueuedRequestBytes is set.
	QueuedRequestBytes int64

	IdleClosed        int64 // connections closed by IdleTimeout
	WriteTimeouts     int64 // connections closed by WriteTimeout
	HandshakeFailures int64 // TLS handshakes that failed or timed out (the connection was closed)

	// UringNoBuffers counts multishot receives of the uring path that
	// ended because their loop's provided buffers were all in use
	// (ENOBUFS); each is re-armed once buffers are back. Many mean the
	// buffer ring is too small for the load.
	UringNoBuffers int64

	// UringDirectBytes counts the bytes the uring path read straight
	// into the bodies of large frames, skipping the provided buffers and
	// the copy out of them.
	UringDirectBytes int64

	// UringMoves counts connections moved from one shard's loop to
	// another's by the balancer (uring-shards: a client whose load grew
	// after it connected).
	UringMoves int64
}

// counters are the atomics behind Stats, updated from every goroutine of the
// server without locks.
type counters struct {
	conns, accepted, rejected, frames atomic.Int64
	bytesIn, bytesOut                 atomic.Int64
	sendfileBytes, copiedBytes        atomic.Int64
	queuedBytes, inFlight, pauses     atomic.Int64
	idleClosed, writeTimeouts         atomic.Int64
	handshakeFailures                 atomic.Int64
	uringNoBufs, uringDirectBytes     atomic.Int64
	uringMoves                        atomic.Int64
	mutes                             atomic.Int64
}

func (c *counters) snapshot(s *Server) Stats {
	return Stats{
		QueuedRequestBytes: s.reqBytes.Load(),
		IdleClosed:         c.idleClosed.Load(),
		Mutes:              c.mutes.Load(),
		WriteTimeouts:      c.writeTimeouts.Load(),
		HandshakeFailures:  c.handshakeFailures.Load(),
		Conns:              c.conns.Load(),
		Accepted:           c.accepted.Load(),
		Rejected:           c.rejected.Load(),
		Frames:             c.frames.Load(),
		BytesIn:            c.bytesIn.Load(),
		BytesOut:           c.bytesOut.Load(),
		SendfileBytes:      c.sendfileBytes.Load(),
		CopiedBytes:        c.copiedBytes.Load(),
		QueuedBytes:        c.queuedBytes.Load(),
		InFlight:           c.inFlight.Load(),
		Pauses:             c.pauses.Load(),
		UringNoBuffers:     c.uringNoBufs.Load(),
		UringDirectBytes:   c.uringDirectBytes.Load(),
		UringMoves:         c.uringMoves.Load(),
	}
}
