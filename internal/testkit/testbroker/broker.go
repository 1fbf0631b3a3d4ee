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
)

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
	b := &Broker{t: t, Dir: cfg.DataDir, cfg: cfg}
	b.start()
	t.Cleanup(b.Stop)
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
