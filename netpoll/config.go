package netpoll

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"ringlog/internal/procs"
	"ringlog/ioring"
)

// Defaults for the zero values of Config. MaxFrameBytes is Kafka's
// socket.request.max.bytes default.
const (
	DefaultMaxFrameBytes  = 100 << 20
	DefaultMaxInFlight    = 64
	DefaultMaxQueuedBytes = 16 << 20
	DefaultMaxConns       = 10000

	// DefaultIdleTimeout is Kafka's connections.max.idle.ms default.
	DefaultIdleTimeout      = 10 * time.Minute
	DefaultWriteTimeout     = 2 * time.Minute
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultKeepAlive is Go's net.Listen default: the first probe after
	// 15 s of silence, then every 15 s, 9 probes.
	DefaultKeepAlive = 15 * time.Second
)

// Config configures a Server. The zero value of every limit means its
// default.
type Config struct {
	// Addr is the TCP listen address, "host:port"; port 0 picks a free port
	// (Server.Addr reports it).
	Addr string
	// Portable serves with the standard net package (a reader and a writer
	// goroutine per connection) instead of event loops, when IO is empty
	// (IO, when set, wins). It is forced on systems gnet does not
	// support here (anything but Linux, FreeBSD and macOS).
	Portable bool
	// IO chooses the implementation: IOGnet (epoll event loops), IOUring
	// (io_uring: on the rings of Owners when given, else on io_uring
	// event loops of netpoll's own; Linux 6.1 or newer), IOUringShards
	// (IOUring that expects Owners and warns without them), IOUringLoops
	// (netpoll's own io_uring loops, Owners or not) or IOPortable (the
	// standard net package). "" means IOPortable when Portable is set, else
	// IOUring. The io_uring values are probed at Listen: a kernel without
	// what they need falls back to gnet, with the reason logged (a warning
	// when io_uring was asked for, information when it was the default's
	// choice). TLS always serves on the portable path.
	IO string
	// Owners are the ring owners that IOUring and IOUringShards serve
	// connections on, one loop of connections per owner (the broker
	// passes the engine's shards: engine.Core.RingOwners). Without
	// owners both serve on loops of netpoll's own.
	Owners []*ioring.Owner
	// Loops is the number of event loops (gnet or uring); 0 means
	// GOMAXPROCS without the Ps added for uring loops and ring-owning
	// shards (internal/procs).
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
	// MaxConnsPerIP bounds the open connections from one IP address
	// (max.connections.per.ip); 0 means unlimited, Kafka's default. Like
	// MaxConns it is checked at accept, and a refused connection is
	// closed at once and counted in Stats.Rejected.
	MaxConnsPerIP int
	// MaxConnsPerIPOverrides gives some IP addresses their own bound
	// instead of MaxConnsPerIP (max.connections.per.ip.overrides; a key is
	// an IP address such as "10.0.0.7" or "::1", not a host name). 0
	// refuses every connection from that address.
	MaxConnsPerIPOverrides map[string]int
	// ConnLimiter, when set, paces the connections accepted (a
	// connection creation rate, Kafka's KIP-612): it is asked about each,
	// on the accept goroutine, before MaxConns and MaxConnsPerIP.
	ConnLimiter ConnLimiter

	// InitialMaxFrameBytes bounds the request frames of a new connection,
	// until the handler changes it with Conn.SetMaxFrameBytes; 0 means
	// MaxFrameBytes, and it may not exceed MaxFrameBytes. Kafka keeps an
	// unauthenticated SASL connection to sasl.server.max.receive.size
	// (524288) and lifts it once the client has authenticated. A frame
	// above the connection's bound closes it exactly as MaxFrameBytes
	// does: with LengthPrefixed, before any of its body is allocated.
	InitialMaxFrameBytes int32
	// MaxQueuedRequestBytes is a budget shared by all connections for the
	// request frames handed to the handler and not yet answered
	// (queued.max.request.bytes). Once the bytes in flight reach it,
	// connections that already have a request of their own in flight stop
	// taking new ones (the MaxInFlight pause) until answers free bytes; a
	// connection with none in flight is always served one, so a frame
	// larger than the budget still goes through and no handler waiting on
	// another connection's request can deadlock the server. Total request
	// memory is therefore bounded by the budget plus one frame per
	// connection. 0 or negative means unbounded, Kafka's default (-1).
	MaxQueuedRequestBytes int64

	// IdleTimeout closes a connection that has had no request in flight,
	// no response waiting, and no byte read or written for this long
	// (connections.max.idle.ms). A request in flight, a long poll among
	// them, keeps its connection alive whatever the time. 0 means
	// DefaultIdleTimeout (10 minutes, Kafka's default); negative disables.
	// One sweeper per server checks every connection a few times per
	// timeout, so a connection lives up to about an eighth longer.
	IdleTimeout time.Duration
	// WriteTimeout closes a connection whose responses wait to be written
	// and whose socket has taken none of their bytes for this long: a
	// client that stopped reading must not pin its responses (and the
	// segment files their regions hold open) forever. Its responses are
	// released (OnDone) and its unanswered requests dropped. Kafka has no
	// equivalent setting. 0 means DefaultWriteTimeout (2 minutes);
	// negative disables.
	WriteTimeout time.Duration
	// KeepAlive is the TCP keepalive idle time and probe interval of
	// accepted connections, so that a peer that vanished without a FIN
	// (a crashed host, a dropped NAT entry) is noticed. 0 means
	// DefaultKeepAlive (15 s); negative disables keepalive.
	KeepAlive time.Duration

	// TLS, when set, makes every connection a TLS server connection
	// (listeners with the SSL or SASL_SSL security protocol).
	// gnet's event loops cannot terminate TLS, so a TLS server always
	// serves on the portable path, whatever Portable says, and file
	// regions are read and written through the TLS connection (no
	// sendfile: the kernel cannot encrypt them). The handshake runs on
	// the connection's reader goroutine, never in the accept loop.
	TLS *tls.Config
	// HandshakeTimeout bounds a TLS handshake, from accept to its end; a
	// client that connects and says nothing is closed after it. 0 means
	// DefaultHandshakeTimeout (10 s).
	HandshakeTimeout time.Duration

	// Logger receives connection errors (debug) and server events (info);
	// nil means slog.Default().
	Logger *slog.Logger

	// copyRemainder switches the gnet path to the simple scheme kept for
	// comparison in tests and benchmarks: what a sendfile could not send at
	// once is copied into gnet's outbound buffer instead of waiting for the
	// socket to drain. See doc.go, "sendfile on gnet".
	copyRemainder bool
	// uring holds the uring path's test knobs; nil in production.
	uring *uringKnobs
	// autoIO: IO was empty and withDefaults chose.
	autoIO bool
}

// ConnLimiter paces new connections. Its methods are called on the
// accept goroutine, one connection at a time, Pace then (after its wait)
// Throttle.
type ConnLimiter interface {
	// Pace returns how long the acceptor waits before it goes on with
	// the connection just accepted (0: not at all). Meanwhile the
	// connections behind it wait in the kernel's backlog: a rate for the
	// whole server. The wait ends early when the server closes.
	Pace() time.Duration
	// Throttle returns 0 to let the connection from ip go on, or how
	// long to hold it before closing it unserved: the client of a rate
	// per address learns of it late, so that it does not reconnect at
	// once. The acceptor does not wait for it. Throttle is not asked
	// about a connection refused by the server closing.
	Throttle(ip netip.Addr) time.Duration
}

// Values of Config.IO.
const (
	IOGnet  = "gnet"
	IOUring = "uring"
	// IOUringShards is the uring path with its connections on the rings
	// of Config.Owners (the engine's shards) instead of loops of its own:
	// what IOUring does with owners, asked for by name (a warning says
	// so when there are none).
	IOUringShards = "uring-shards"
	// IOUringLoops is the uring path on io_uring loops of netpoll's own,
	// whatever Config.Owners holds (Server.IO reports it as IOUring).
	IOUringLoops = "uring-loops"
	IOPortable   = "portable"
)

// uringKnobs change the uring path for tests.
type uringKnobs struct {
	// probe replaces ioring.ProbeNet: a test simulates a kernel without
	// the features by returning a reason.
	probe func() string
	// bufBytes and bufCount size each loop's provided buffers (0: the
	// defaults); tiny buffers cut every frame across many of them.
	bufBytes, bufCount int
	// poison overwrites a provided buffer as it goes back to the ring, so
	// that a frame still aliasing it, or bytes not yet framed, show it.
	poison bool
	// recycleEarly hands a buffer back to the ring before its bytes are
	// framed: the bug the poison must expose.
	recycleEarly bool
	// onePlace puts every connection on the shards' first loop, for the
	// balancer to move; balanceEvery, balanceMinGap, balanceSettle and
	// balanceGiveUp replace the balancer's constants (balanceEvery < 0: no
	// balancer).
	onePlace      bool
	balanceEvery  time.Duration
	balanceMinGap int64
	balanceSettle time.Duration
	balanceGiveUp time.Duration
}

// withDefaults returns cfg with zero limits replaced by defaults, or an
// ErrConfig error for a negative one.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Addr == "" {
		return cfg, fmt.Errorf("%w: no listen address", ErrConfig)
	}
	if cfg.Loops < 0 || cfg.MaxFrameBytes < 0 || cfg.MaxInFlight < 0 || cfg.MaxQueuedBytes < 0 || cfg.MaxConns < 0 ||
		cfg.MaxConnsPerIP < 0 || cfg.InitialMaxFrameBytes < 0 || cfg.HandshakeTimeout < 0 {
		return cfg, fmt.Errorf("%w: negative limit in %+v", ErrConfig, cfg)
	}
	switch cfg.IO {
	case "":
		cfg.IO, cfg.autoIO = IOUring, true
		if cfg.Portable {
			cfg.IO = IOPortable
		}
	case IOGnet, IOUring, IOUringShards, IOUringLoops, IOPortable:
	default:
		return cfg, fmt.Errorf("%w: IO %q (want %s, %s, %s, %s or %s)", ErrConfig, cfg.IO, IOGnet, IOUring, IOUringShards, IOUringLoops, IOPortable)
	}
	if cfg.Splitter == nil {
		cfg.Splitter = LengthPrefixed{}
	}
	if cfg.Loops == 0 {
		cfg.Loops = procs.Base()
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
	if cfg.InitialMaxFrameBytes == 0 {
		cfg.InitialMaxFrameBytes = cfg.MaxFrameBytes
	}
	if cfg.InitialMaxFrameBytes > cfg.MaxFrameBytes {
		return cfg, fmt.Errorf("%w: InitialMaxFrameBytes %d above MaxFrameBytes %d", ErrConfig, cfg.InitialMaxFrameBytes, cfg.MaxFrameBytes)
	}
	if cfg.MaxQueuedRequestBytes < 0 {
		cfg.MaxQueuedRequestBytes = 0 // unbounded, however it was said
	}
	for ip, n := range cfg.MaxConnsPerIPOverrides {
		if _, err := netip.ParseAddr(ip); err != nil || n < 0 {
			return cfg, fmt.Errorf("%w: MaxConnsPerIPOverrides[%q] = %d: want an IP address and a bound >= 0", ErrConfig, ip, n)
		}
	}
	cfg.IdleTimeout = orDefault(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.WriteTimeout = orDefault(cfg.WriteTimeout, DefaultWriteTimeout)
	cfg.KeepAlive = orDefault(cfg.KeepAlive, DefaultKeepAlive)
	cfg.HandshakeTimeout = orDefault(cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}

// orDefault returns def for a zero duration, and d otherwise (a negative
// one disables what it times).
func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
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
