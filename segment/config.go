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

// Config holds one log's settings, named after Kafka's topic configs.
type Config struct {
	// SegmentBytes is segment.bytes: a segment rolls before it would exceed
	// this size (a single larger batch still gets a segment of its own).
	SegmentBytes int64
	// SegmentMs is segment.ms: a segment rolls once its first batch is
	// this old. 0 disables time-based rolling.
	SegmentMs int64
	// SegmentIndexBytes is segment.index.bytes: the preallocated size of
	// each index file, which bounds the entries per segment.
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
	}
}

// Validate rejects settings the log cannot honour.
func (c Config) Validate() error {
	switch {
	case c.SegmentBytes < 14 || c.SegmentBytes > math.MaxInt32:
		// Positions in the offset index are 32-bit, as in Kafka.
		return fmt.Errorf("%w: segment.bytes %d not in [14, %d]", ErrConfig, c.SegmentBytes, math.MaxInt32)
	case c.SegmentMs < 0:
		return fmt.Errorf("%w: segment.ms %d is negative", ErrConfig, c.SegmentMs)
	case c.SegmentIndexBytes < 4*timeEntrySize || c.SegmentIndexBytes > math.MaxInt32:
		return fmt.Errorf("%w: segment.index.bytes %d not in [%d, %d]", ErrConfig, c.SegmentIndexBytes, 4*timeEntrySize, math.MaxInt32)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("%w: index.interval.bytes %d is negative", ErrConfig, c.IndexIntervalBytes)
	case c.MaxMessageBytes < 0 || c.MaxMessageBytes > math.MaxInt32:
		return fmt.Errorf("%w: max.message.bytes %d not in [0, %d]", ErrConfig, c.MaxMessageBytes, math.MaxInt32)
	case c.Flush > FlushAlways:
		return fmt.Errorf("%w: unknown flush policy %d", ErrConfig, c.Flush)
	case c.FlushMs < 0 || c.FlushMessages < 1:
		return fmt.Errorf("%w: flush.ms %d / flush.messages %d", ErrConfig, c.FlushMs, c.FlushMessages)
	}
	return nil
}
