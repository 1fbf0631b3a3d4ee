package segment

import (
	"fmt"
	"math"
	"time"
)

// FlushPolicy says when appended data is made durable with fsync.
type FlushPolicy uint8

const (
	// FlushNever leaves durability to replication and the kernel's
	// writeback, as Kafka does by default. Rolled segments are still synced
	// so that recovery only scans the active segment.
	FlushNever FlushPolicy = iota
	// FlushInterval syncs after FlushMessages records or FlushMs.
	FlushInterval
	// FlushAlways syncs every append before it completes (group commit:
	// one fdatasync per append round, linked to its write).
	FlushAlways
)

func (p FlushPolicy) String() string {
	switch p {
	case FlushNever:
		return "never"
	case FlushInterval:
		return "interval"
	case FlushAlways:
		return "always"
	}
	return fmt.Sprintf("flush(%d)", uint8(p))
}

// ParseFlushPolicy accepts "never", "interval" and "always".
func ParseFlushPolicy(s string) (FlushPolicy, error) {
	switch s {
	case "never":
		return FlushNever, nil
	case "interval":
		return FlushInterval, nil
	case "always":
		return FlushAlways, nil
	}
	return 0, fmt.Errorf("segment: unknown flush policy %q (want always, interval or never)", s)
}

// CleanupPolicy is cleanup.policy: what removes old data from a log.
type CleanupPolicy uint8

const (
	// CleanupDelete deletes whole segments by retention.ms and
	// retention.bytes (Kafka's default). The zero value.
	CleanupDelete CleanupPolicy = iota
	// CleanupCompact keeps the latest record of each key (log compaction);
	// retention.ms and retention.bytes are ignored, as in Kafka.
	CleanupCompact
	// CleanupCompactDelete does both: the cleaner compacts, and retention
	// still deletes the oldest segments.
	CleanupCompactDelete
)

// Compacts reports whether the cleaner works on the log.
func (p CleanupPolicy) Compacts() bool { return p == CleanupCompact || p == CleanupCompactDelete }

// Deletes reports whether retention deletes old segments.
func (p CleanupPolicy) Deletes() bool { return p == CleanupDelete || p == CleanupCompactDelete }

func (p CleanupPolicy) String() string {
	switch p {
	case CleanupDelete:
		return "delete"
	case CleanupCompact:
		return "compact"
	case CleanupCompactDelete:
		return "compact,delete"
	}
	return fmt.Sprintf("cleanup(%d)", uint8(p))
}

// Config holds one log's settings, named after Kafka's topic configs.
type Config struct {
	// SegmentBytes is segment.bytes: a segment rolls before it would exceed
	// this size (a single larger batch still gets a segment of its own).
	SegmentBytes int64
	// SegmentMs is segment.ms: a segment rolls once its first batch is
	// this old. 0 disables time-based rolling.
	SegmentMs int64
	// SegmentIndexBytes is segment.index.bytes: the largest size of each
	// index file, which bounds the entries per segment (the files grow as
	// entries arrive).
	SegmentIndexBytes int64
	// IndexIntervalBytes is index.interval.bytes: bytes of batches between
	// two offset index entries.
	IndexIntervalBytes int64
	// RetentionMs is retention.ms; negative means keep forever.
	RetentionMs int64
	// RetentionBytes is retention.bytes; negative means no size limit.
	RetentionBytes int64
	// MaxMessageBytes is max.message.bytes: the largest batch accepted.
	MaxMessageBytes int64
	// Flush is the flush policy; FlushMs and FlushMessages drive
	// FlushInterval (flush.ms and flush.messages).
	Flush         FlushPolicy
	FlushMs       int64
	FlushMessages int64

	// Cleanup is cleanup.policy.
	Cleanup CleanupPolicy
	// DeleteRetentionMs is delete.retention.ms: a tombstone (a record with
	// a null value) is kept at least this long after the cleaner first
	// rewrote its batch (KIP-534's delete horizon), so that consumers
	// reading the log from the start see the delete.
	DeleteRetentionMs int64
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: the cleaner
	// picks a log once the bytes written since its last clean make up this
	// share of its cleanable bytes.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs is min.compaction.lag.ms: a segment whose newest
	// batch is younger than this is not cleaned yet.
	MinCompactionLagMs int64
	// MaxCompactionLagMs is max.compaction.lag.ms: once the oldest
	// uncleaned batch is this old, the log is cleaned whatever its dirty
	// ratio, and the active segment rolls by then (it is never cleaned).
	MaxCompactionLagMs int64
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * int64(time.Hour/time.Millisecond),
		SegmentIndexBytes:  10 << 20,
		IndexIntervalBytes: 4096,
		RetentionMs:        7 * 24 * int64(time.Hour/time.Millisecond),
		RetentionBytes:     -1,
		MaxMessageBytes:    1048588,
		Flush:              FlushNever,
		FlushMs:            math.MaxInt64,
		FlushMessages:      math.MaxInt64,

		Cleanup:                CleanupDelete,
		DeleteRetentionMs:      24 * int64(time.Hour/time.Millisecond),
		MinCleanableDirtyRatio: 0.5,
		MinCompactionLagMs:     0,
		MaxCompactionLagMs:     math.MaxInt64,
	}
}

// rollMs is the age at which the active segment rolls: segment.ms, or
// max.compaction.lag.ms when the log is compacted and that is shorter,
// since the cleaner never touches the active segment (Kafka does the same).
func (c Config) rollMs() int64 {
	if c.Cleanup.Compacts() && c.MaxCompactionLagMs > 0 && (c.SegmentMs == 0 || c.MaxCompactionLagMs < c.SegmentMs) {
		return c.MaxCompactionLagMs
	}
	return c.SegmentMs
}

// Validate rejects settings the log cannot honour.
func (c Config) Validate() error {
	switch {
	case c.SegmentBytes < 14 || c.SegmentBytes > math.MaxInt32:
		// Positions in the offset index are 32-bit, as in Kafka.
		return fmt.Errorf("%w: segment.bytes %d not in [14, %d]", ErrConfig, c.SegmentBytes, math.MaxInt32)
	case c.SegmentMs < 0:
		return fmt.Errorf("%w: segment.ms %d is negative", ErrConfig, c.SegmentMs)
	case c.SegmentIndexBytes < 4 || c.SegmentIndexBytes > math.MaxInt32:
		// Kafka's minimum: below one entry an index is full from the start,
		// and every append rolls a segment, which works.
		return fmt.Errorf("%w: segment.index.bytes %d not in [4, %d]", ErrConfig, c.SegmentIndexBytes, math.MaxInt32)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("%w: index.interval.bytes %d is negative", ErrConfig, c.IndexIntervalBytes)
	case c.MaxMessageBytes < 0 || c.MaxMessageBytes > math.MaxInt32:
		return fmt.Errorf("%w: max.message.bytes %d not in [0, %d]", ErrConfig, c.MaxMessageBytes, math.MaxInt32)
	case c.Flush > FlushAlways:
		return fmt.Errorf("%w: unknown flush policy %d", ErrConfig, c.Flush)
	case c.FlushMs < 0 || c.FlushMessages < 1:
		return fmt.Errorf("%w: flush.ms %d / flush.messages %d", ErrConfig, c.FlushMs, c.FlushMessages)
	case c.Cleanup > CleanupCompactDelete:
		return fmt.Errorf("%w: unknown cleanup policy %d", ErrConfig, c.Cleanup)
	case c.DeleteRetentionMs < 0:
		return fmt.Errorf("%w: delete.retention.ms %d is negative", ErrConfig, c.DeleteRetentionMs)
	case !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1):
		return fmt.Errorf("%w: min.cleanable.dirty.ratio %v not in [0, 1]", ErrConfig, c.MinCleanableDirtyRatio)
	case c.MinCompactionLagMs < 0 || c.MaxCompactionLagMs < 0:
		return fmt.Errorf("%w: min.compaction.lag.ms %d / max.compaction.lag.ms %d", ErrConfig, c.MinCompactionLagMs, c.MaxCompactionLagMs)
	case c.Cleanup.Compacts() && c.MaxCompactionLagMs < c.MinCompactionLagMs:
		// Kafka refuses this pair: the log could never be both old enough
		// and young enough.
		return fmt.Errorf("%w: max.compaction.lag.ms %d below min.compaction.lag.ms %d", ErrConfig, c.MaxCompactionLagMs, c.MinCompactionLagMs)
	}
	return nil
}
