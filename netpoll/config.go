package netpoll

import (
	"fmt"
	"log/slog"
	"runtime"
)

// Defaults for the zero values of Config. MaxFrameBytes is Kafka's
// socket.request.max.bytes default.
const (
	DefaultMaxFrameBytes  = 100 << 20
	DefaultMaxInFlight    = 64
	DefaultMaxQueuedBytes = 16 << 20
	DefaultMaxConns       = 10000
)

// Config configures a Server. The zero value of every limit means its
// default.
type Config struct {
	// Addr is the TCP listen address, "host:port"; port 0 picks a free port
	// (Server.Addr reports it).
	Addr string
	// Portable serves with the standard net package (a reader and a writer
	// goroutine per connection) instead of gnet event loops. It is forced on
	// systems gnet does not support here (anything but Linux, FreeBSD and
	// macOS).
	Portable bool
	// Loops is the number of gnet event loops; 0 means GOMAXPROCS.
	Loops int
	// Splitter cuts request frames out of each connection's stream and
	// says what goes before each response; nil means LengthPrefixed,
	// Kafka's framing. Lines and RESP are ready-made for other protocols.
	Splitter Splitter
	// MaxFrameBytes bounds a request frame's body, the bytes the handler
	// gets (socket.request.max.bytes). A frame the Splitter finds above it
	// closes the connection: with LengthPrefixed, a length prefix above
	// it, or negative, does so before any of the body is read or
	// allocated.
	MaxFrameBytes int32
	// MaxInFlight bounds the requests of one connection handed to the handler
	// and not yet answered (or, when answered out of order, not yet
	// released in order). At the limit the connection stops reading.
	MaxInFlight int
	// MaxQueuedBytes bounds the response bytes of one connection replied and
	// not yet written to the socket. Above it the connection stops reading
	// requests until the client has read enough: a client that does not
	// read its responses must not grow the broker's memory.
	MaxQueuedBytes int64
	// MaxConns bounds open connections; beyond it new connections are closed
	// as soon as they are accepted.
	MaxConns int
	// Logger receives connection errors (debug) and server events (info);
	// nil means slog.Default().
	Logger *slog.Logger

	// copyRemainder switches the gnet path to the simple scheme kept for
	// comparison in tests and benchmarks: what a sendfile could not send at
	// once is copied into gnet's outbound buffer instead of waiting for the
	// socket to drain. See doc.go, "sendfile on gnet".
	copyRemainder bool
}

// withDefaults returns cfg with zero limits replaced by defaults, or an
// ErrConfig error for a negative one.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Addr == "" {
		return cfg, fmt.Errorf("%w: no listen address", ErrConfig)
	}
	if cfg.Loops < 0 || cfg.MaxFrameBytes < 0 || cfg.MaxInFlight < 0 || cfg.MaxQueuedBytes < 0 || cfg.MaxConns < 0 {
		return cfg, fmt.Errorf("%w: negative limit in %+v", ErrConfig, cfg)
	}
	if cfg.Splitter == nil {
		cfg.Splitter = LengthPrefixed{}
	}
	if cfg.Loops == 0 {
		cfg.Loops = runtime.GOMAXPROCS(0)
	}
	if cfg.MaxFrameBytes == 0 {
		cfg.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxQueuedBytes == 0 {
		cfg.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}

// pausedInboundMax is how many unread request bytes a paused gnet connection
// may accumulate. gnet cannot stop reading a socket, so a paused connection's
// requests pile up in gnet's inbound buffer instead of the kernel's; a client
// that sends this much without reading its responses is closed. At least
// 1 MiB (Kafka's max.request.size default), so that a legitimate client's
// next request always fits.
func (cfg *Config) pausedInboundMax() int {
	return int(max(cfg.MaxQueuedBytes, 1<<20))
}
