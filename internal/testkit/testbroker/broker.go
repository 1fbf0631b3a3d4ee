package testbroker

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"ringlog/broker"
	"ringlog/engine"
	"ringlog/ioring"
	"ringlog/netpoll"
)

// EnvNet names the environment variable that picks the network path of
// every test broker: gnet, uring or portable (netpoll.Config.IO); unset,
// the broker's default (gnet, or portable with ioring.ModePortable).
// Config applies it to the brokers started in the test's process,
// NetArgs to the binaries tests spawn; scripts/test.sh runs the kafka
// package once per path with it.
const EnvNet = "RINGLOG_TEST_NET"

// envNet is EnvNet's value, checked by Net.
func envNet() string { return os.Getenv(EnvNet) }

// Net returns the network path EnvNet asks for, "" when it is unset, and
// fails the test on any other value than the three paths.
func Net(t testing.TB) string {
	t.Helper()
	switch n := envNet(); n {
	case "", netpoll.IOGnet, netpoll.IOUring, netpoll.IOUringShards, netpoll.IOUringLoops, netpoll.IOPortable:
		return n
	default:
		t.Fatalf("%s=%q: want %s, %s, %s, %s or %s (or unset)", EnvNet, n, netpoll.IOGnet, netpoll.IOUring, netpoll.IOUringShards, netpoll.IOUringLoops, netpoll.IOPortable)
		return ""
	}
}

// EnvWrites names the environment variable that picks how the test
// brokers' appends reach the disk: auto, buffered or direct (-writes);
// unset, the broker's default (auto: direct on the io_uring disk path).
const EnvWrites = "RINGLOG_TEST_WRITES"

// Writes returns what EnvWrites asks for ("" when unset), and fails the
// test on a value the broker would refuse.
func Writes(t testing.TB) engine.Writes {
	t.Helper()
	w := envWrites()
	if w == "" {
		return ""
	}
	ws, err := engine.ParseWrites(w)
	if err != nil {
		t.Fatalf("%s: %v", EnvWrites, err)
	}
	return ws
}

// envWrites is EnvWrites's value, checked by Writes.
func envWrites() string { return os.Getenv(EnvWrites) }

// NetArgs returns the binary's flags for the paths EnvNet and EnvWrites
// ask for (-net and -writes with their values), none when they are unset.
// Put them first: a test's own flags come later and win.
func NetArgs(t testing.TB) []string {
	t.Helper()
	var args []string
	if n := Net(t); n != "" {
		args = append(args, "-net", n)
	}
	if w := Writes(t); w != "" {
		args = append(args, "-writes", string(w))
	}
	return args
}

// CheckNetLog fails the test when a spawned broker's log shows that a
// listener asked for io_uring serves on gnet instead (the kernel lacks
// what the uring path needs): a run of the tests on uring that silently
// ran gnet would prove nothing about uring.
func CheckNetLog(t testing.TB, log string) {
	t.Helper()
	if strings.Contains(log, "io_uring network path unavailable") ||
		strings.Contains(log, "connections cannot go on the shards' rings") {
		t.Fatalf("%s=%s: the broker fell back to gnet:\n%s", EnvNet, envNet(), log)
	}
}

// Broker is a broker started in the test's process with broker.Start, the
// wiring the binary runs (engine, local one-voter quorum, replication,
// groups, Kafka protocol, network), stopped at the end of the test.
type Broker struct {
	t    testing.TB
	Addr string
	Dir  string
	cfg  broker.Config
	B    *broker.Broker
}

// Config is the configuration of a test broker: the binary's defaults with
// a few changes for speed, on dir, on a free port of 127.0.0.1.
func Config(dir string) broker.Config {
	cfg := broker.DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.Shards, cfg.IO = "127.0.0.1:0", dir, 2, ioring.ModeAuto
	cfg.Logger = Logger()
	// The network path RINGLOG_TEST_NET asks for (StartBroker checks the
	// value, and that the broker serves on that path).
	cfg.Network = envNet()
	// How RINGLOG_TEST_WRITES asks appends to reach the disk (StartBroker
	// checks the value).
	if w := envWrites(); w != "" {
		cfg.Writes = engine.Writes(w)
	}
	// Kafka's group defaults but for the initial rebalance delay, which
	// would add 3 s to every test's first rebalance.
	cfg.Groups.InitialRebalanceDelay = 0
	// 4 partitions of __consumer_offsets rather than 50: a broker starts
	// in a tenth of the time, and the tests start hundreds.
	cfg.Groups.OffsetsTopicPartitions = 4
	cfg.Txns.Partitions = 4
	return cfg
}

// Logger keeps a test broker's log out of the test output but for warnings
// and errors; RINGLOG_TEST_LOG=1 shows everything.
func Logger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("RINGLOG_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// StartBroker starts a broker with cfg (Config's, adjusted) and stops it
// at the end of the test.
func StartBroker(t testing.TB, cfg broker.Config) *Broker {
	t.Helper()
	Net(t)
	Writes(t)
	b := &Broker{t: t, Dir: cfg.DataDir, cfg: cfg}
	t.Cleanup(b.Stop) // first: start may fail the test with a broker running
	b.start()
	return b
}

func (b *Broker) start() {
	t := b.t
	t.Helper()
	cfg := b.cfg
	if b.Addr != "" {
		cfg.Listen = b.Addr // a restart keeps the port
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	br, err := broker.Start(ctx, cfg)
	for attempt := 0; err != nil && b.Addr == "" && attempt < 3 && strings.Contains(err.Error(), "address already in use"); attempt++ {
		// The free port the broker picked was taken before it bound it
		// (another package's test): pick again.
		br, err = broker.Start(ctx, cfg)
	}
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	b.B, b.Addr = br, br.Addr()
	// No silent fallback: a broker asked for a path serves on it (a TLS
	// inter-broker listener serves on the portable path whatever is asked:
	// the event loops cannot terminate TLS).
	if want, got := cfg.Network, br.Network().IO(); want != "" && cfg.InterBroker.TLS == nil && !servesAs(want, got) {
		t.Fatalf("the broker was asked for the %s network path and serves on %s (%s=%q)", want, got, EnvNet, envNet())
	}
}

// servesAs reports whether a listener serving on got (netpoll's
// Server.IO) serves the network path asked for: uring puts the
// connections on the shards' rings (uring-shards) where the shards own
// rings, and netpoll reports its own io_uring loops (uring-loops) as
// uring.
func servesAs(asked, got string) bool {
	switch asked {
	case netpoll.IOUring:
		return got == netpoll.IOUring || got == netpoll.IOUringShards
	case netpoll.IOUringLoops:
		return got == netpoll.IOUring
	}
	return got == asked
}

// Engine is the running broker's engine.
func (b *Broker) Engine() *engine.Core { return b.B.Engine() }

// Stop closes the broker as the binary does on SIGTERM.
func (b *Broker) Stop() {
	if b.B == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.B.Close(ctx); err != nil {
		b.t.Errorf("close broker: %v", err)
	}
	b.B = nil
}

// Restart stops and starts the broker on the same port and data; tweak,
// when given, changes its configuration for this start and the next.
func (b *Broker) Restart(tweak ...func(*broker.Config)) {
	b.t.Helper()
	b.Stop()
	for _, f := range tweak {
		f(&b.cfg)
	}
	b.start()
}
