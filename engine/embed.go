package engine

import (
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"ringlog/internal/fsutil"
	"ringlog/ioring"
	"ringlog/segment"
)

// Engine is ringlog's log store as a library: topics of partitions, each an
// append-only log of records with offsets, kept on disk in Kafka's layout,
// served by shards pinned to their threads. Open one on a directory,
// CreateTopic, Produce and Fetch records, or Subscribe to a partition to be
// handed each new record as it is written.
//
// Every method may be called from any goroutine. After Close, every method
// returns ErrClosed and every subscription ends.
//
// Core is the whole engine a Kafka broker drives (raw record batches,
// replication roles, offsets by time, configs); an embedder rarely needs it.
type Engine struct {
	core *Core

	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// Options configure Open; the zero value (or nil) is ready to use.
type Options struct {
	// Shards is the number of shards (goroutines locked to threads, each
	// owning its partitions); 0 means GOMAXPROCS without the Ps added for
	// loops (internal/procs).
	Shards int
	// IO chooses the disk path: IOAuto (default) probes io_uring and falls
	// back to the portable one.
	IO IOMode
	// Flush is the default flush policy of topics: FlushNever (default,
	// Kafka's: the page cache holds what is written, a process crash loses
	// nothing, a power loss may) or FlushAlways (every Produce returns
	// after an fdatasync: a power loss loses nothing that was returned).
	Flush FlushPolicy
	// Logger receives the engine's log; nil is silent.
	Logger *slog.Logger
}

// IOMode chooses the disk path.
type IOMode string

const (
	IOAuto     IOMode = "auto"     // io_uring when the kernel has it, else portable
	IOUring    IOMode = "uring"    // io_uring, or Open fails
	IOPortable IOMode = "portable" // pwrite and fdatasync
)

// FlushPolicy says when appended records are synced to disk.
type FlushPolicy int

const (
	FlushNever  FlushPolicy = iota // by the kernel's writeback, and at close
	FlushAlways                    // before each Produce returns (group commit)
)

// ErrDirLocked is returned by Open when another process has the directory
// open (errors.Is works on it).
var ErrDirLocked = fsutil.ErrDirLocked

// Open opens the log store in dir, creating the directory when absent,
// and recovers every partition (after a crash, each log's tail is checked
// and a torn write cut). The directory is locked until Close: a second
// Open of it, in any process, fails with ErrDirLocked.
func Open(dir string, opts *Options) (*Engine, error) {
	if opts == nil {
		opts = &Options{}
	}
	cfg := Config{Dir: dir, Shards: opts.Shards, Topic: DefaultTopicConfig(), Logger: opts.Logger}
	switch opts.IO {
	case IOAuto, "":
		cfg.IO = ioring.ModeAuto
	case IOUring:
		cfg.IO = ioring.ModeUring
	case IOPortable:
		cfg.IO = ioring.ModePortable
	default:
		return nil, fmt.Errorf("%w: IO mode %q", ErrInvalidConfig, opts.IO)
	}
	switch opts.Flush {
	case FlushNever:
	case FlushAlways:
		cfg.Topic.Log.Flush, cfg.Topic.Log.FlushMessages = segment.FlushAlways, 1
	default:
		return nil, fmt.Errorf("%w: flush policy %d", ErrInvalidConfig, opts.Flush)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	// No replication layer (OnAppended nil): every partition leads itself
	// and what is written is committed.
	core, err := OpenCore(cfg)
	if err != nil {
		return nil, err
	}
	return &Engine{core: core, subs: map[*Subscription]struct{}{}}, nil
}

// Close ends every subscription, syncs every log and marks it cleanly shut
// down (the next Open skips recovery), and releases the directory.
func (e *Engine) Close() error {
	e.mu.Lock()
	subs := e.subs
	e.subs = nil
	e.mu.Unlock()
	for s := range subs {
		s.Close()
	}
	return e.core.Close()
}

// Core is the engine's full surface, as a Kafka broker drives it.
func (e *Engine) Core() *Core { return e.core }

// Dir is the data directory.
func (e *Engine) Dir() string { return e.core.Dir() }

// TopicOptions configure a topic; the zero value is one partition, kept
// forever.
type TopicOptions struct {
	// Partitions is the number of partitions (0: 1).
	Partitions int32
	// Retention deletes whole segments older than it (0: keep forever);
	// RetentionBytes deletes the oldest segments while a partition is
	// larger (0: no limit).
	Retention      time.Duration
	RetentionBytes int64
	// SegmentBytes is the size at which a partition's log rolls to a new
	// segment file (0: 1 GiB; at least 1 MiB, Kafka's segment.bytes floor);
	// retention deletes whole segments.
	SegmentBytes int64
	// Compact keeps, once compacted, only the last record of each key
	// (Kafka's cleanup.policy=compact); a record with a nil value deletes
	// its key.
	Compact bool
	// Configs sets any of Kafka's topic configs by name (retention.ms,
	// max.message.bytes, ...), after the fields above; unknown names and
	// bad values are refused with ErrInvalidConfig.
	Configs map[string]string
}

// CreateTopic creates a topic; ErrTopicExists if it exists.
func (e *Engine) CreateTopic(name string, opts TopicOptions) error {
	partitions := opts.Partitions
	if partitions == 0 {
		partitions = 1
	}
	overrides := map[string]string{"retention.ms": "-1"}
	if opts.Retention > 0 {
		overrides["retention.ms"] = strconv.FormatInt(max(1, opts.Retention.Milliseconds()), 10)
	}
	if opts.RetentionBytes > 0 {
		overrides["retention.bytes"] = strconv.FormatInt(opts.RetentionBytes, 10)
	}
	if opts.SegmentBytes > 0 {
		overrides["segment.bytes"] = strconv.FormatInt(min(opts.SegmentBytes, math.MaxInt32), 10)
	}
	if opts.Compact {
		overrides["cleanup.policy"] = "compact"
	}
	for k, v := range opts.Configs {
		overrides[k] = v
	}
	_, err := e.core.CreateTopic(name, partitions, -1, overrides, false)
	return err
}

// DeleteTopic deletes a topic and its files; ErrUnknownTopicOrPartition if
// there is none.
func (e *Engine) DeleteTopic(name string) error { return e.core.DeleteTopic(name) }

// Topic names a topic and its partition count.
type Topic struct {
	Name       string
	Partitions int32
}

// Topics lists the topics, sorted by name.
func (e *Engine) Topics() ([]Topic, error) {
	if e.core.closed.Load() {
		return nil, ErrClosed
	}
	var out []Topic
	for _, t := range e.core.Topics() { // sorted already
		out = append(out, Topic{Name: t.Name, Partitions: t.Partitions})
	}
	return out, nil
}
