package netpoll

import "time"

// epoch is the origin of Now's clock.
var epoch = time.Now()

// Now is netpoll's clock for request timings: nanoseconds since the
// process loaded the package, on the monotonic clock, so a wall-clock step
// never shows as a request taking minutes or no time at all. It is cheaper
// than time.Now (time.Since of a monotonic reading reads only the monotonic
// clock), and never 0, which Timing keeps for "not yet".
func Now() int64 { return int64(time.Since(epoch)) + 1 }

// Timing is a response's life in netpoll, in Now's clock. A handler that
// wants it asks with Response.Observe; Kafka's RequestMetrics are built
// from it (kafka/metrics.go).
type Timing struct {
	// Received is when the request's frame was whole in netpoll: its
	// last byte read and the frame cut, just before Serve. Bytes waiting
	// in a buffer while the connection is paused (MaxInFlight, queued
	// bytes, the request budget) are not a frame yet: a paused connection
	// stops reading, as Kafka mutes one, and gnet's buffered bytes are cut
	// once the pause ends.
	Received int64
	// Replied is when Conn.Reply took the response: the answer was ready.
	Replied int64
	// WriteStart is when the connection's writer began the write that
	// carries the response's first byte (the writev or sendfile call; on
	// the uring path, the sendmsg prepared for the ring). From Replied to
	// WriteStart the response waited behind earlier responses of its
	// connection, or for the writer to run.
	WriteStart int64
	// Written is when its last byte was handed to the kernel (the write
	// or sendfile returned, or the sendmsg's completion was reaped). On
	// gnet, bytes the socket did not take at once are copied into gnet's
	// outbound buffer (at most one gather, 256 KiB) and count as handed
	// over; file regions always wait for the socket (the drain watcher).
	Written int64
}

// Observer is told a response's Timing once it is written.
type Observer interface {
	// Written is called once, on the connection's writer (an event loop or
	// the writer goroutine), after the response's last byte is written and
	// before its OnDone functions. It is not called for a response
	// dropped unwritten (its connection closed). It must not block.
	Written(r *Response, t Timing)
}
