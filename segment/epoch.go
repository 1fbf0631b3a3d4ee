package segment

import (
	"fmt"
	"slices"
	"sync"

	"ringlog/internal/fsutil"
)

// EpochEntry says that leader epoch Epoch wrote its first batch at
// StartOffset.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// UndefinedEpoch and UndefinedOffset are Kafka's answers to
// OffsetForLeaderEpoch when nothing is known (-1).
const (
	UndefinedEpoch  int32 = -1
	UndefinedOffset int64 = -1
)

// epochCache is the leader-epoch checkpoint kept with a log (KIP-101):
// after a leader change a follower asks the new leader for the end offset
// of its own latest epoch and truncates its log there. The cache is
// persisted on every change; changes come at most once per leader
// election, so the cost is negligible. It is read from any goroutine
// (OffsetForLeaderEpoch), written by the log's owner.
type epochCache struct {
	dir     string
	mu      sync.RWMutex
	entries []EpochEntry
	// changedOnLoad is set when recovery assigned epochs from batches, so
	// that the file is rewritten once at the end of Open.
	changedOnLoad bool
}

func (c *epochCache) snapshot() []EpochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.entries)
}

func (c *epochCache) latest() (EpochEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return EpochEntry{UndefinedEpoch, UndefinedOffset}, false
	}
	return c.entries[len(c.entries)-1], true
}

// assign records that epoch starts at offset, with the rule of Kafka's
// LeaderEpochFileCache.assign: nothing changes when epoch is the latest
// and offset is not below its start (every batch of the current epoch
// comes here); otherwise every entry from the end whose epoch is at least
// epoch or whose start offset is at least offset is dropped before the new
// entry goes last. A follower copying its leader's batches thus ends with
// the leader's cache even when its own held an epoch the leader never saw
// (one it led without writing, at its LEO), and the entries stay strictly
// increasing in both epoch and start offset. It reports whether the cache
// changed.
func (c *epochCache) assign(epoch int32, offset int64) bool {
	if epoch < 0 || offset < 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.assignLocked(epoch, offset)
}

// assignIfNewer is assign for recovery, which meets every batch of the
// scanned segments again: only an epoch newer than the latest is recorded,
// as Kafka's LogSegment.recover does. The batches of a segment scanned
// after the checkpoint was loaded may belong to epochs that started in an
// earlier, unscanned segment; assign would move those epochs' start to the
// scanned batch and drop every later entry.
func (c *epochCache) assignIfNewer(epoch int32, offset int64) bool {
	if epoch < 0 || offset < 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 && epoch <= c.entries[n-1].Epoch {
		return false
	}
	return c.assignLocked(epoch, offset)
}

func (c *epochCache) assignLocked(epoch int32, offset int64) bool {
	n := len(c.entries)
	if n > 0 && c.entries[n-1].Epoch == epoch && c.entries[n-1].StartOffset <= offset {
		return false
	}
	for n > 0 && (c.entries[n-1].Epoch >= epoch || c.entries[n-1].StartOffset >= offset) {
		n--
	}
	c.entries = append(c.entries[:n], EpochEntry{epoch, offset})
	return true
}

// endOffsetFor answers OffsetForLeaderEpoch as Kafka does: the largest
// epoch at most requested, and the start offset of the first epoch after
// it (the log end offset when requested is the latest epoch).
func (c *epochCache) endOffsetFor(requested int32, leo int64) (int32, int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := len(c.entries)
	if requested == UndefinedEpoch || n == 0 {
		return UndefinedEpoch, UndefinedOffset
	}
	if c.entries[n-1].Epoch == requested {
		return requested, leo
	}
	// First entry with an epoch above requested.
	i, _ := slices.BinarySearchFunc(c.entries, requested+1, func(e EpochEntry, t int32) int {
		switch {
		case e.Epoch < t:
			return -1
		case e.Epoch > t:
			return 1
		}
		return 0
	})
	if i == n {
		// Requested is newer than anything this replica has seen.
		return UndefinedEpoch, UndefinedOffset
	}
	if i == 0 {
		// Requested is older than every known epoch.
		return requested, c.entries[0].StartOffset
	}
	return c.entries[i-1].Epoch, c.entries[i].StartOffset
}

// truncateFromEnd drops epochs that start at or after offset (the log was
// truncated to offset). It reports whether the cache changed.
func (c *epochCache) truncateFromEnd(offset int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.truncateFromEndLocked(offset)
}

func (c *epochCache) truncateFromEndLocked(offset int64) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= offset {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// truncateFromStart forgets epochs wholly before offset (the log start
// moved): the latest epoch starting at or before offset is kept, moved to
// start at offset.
func (c *epochCache) truncateFromStart(offset int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	for i+1 < len(c.entries) && c.entries[i+1].StartOffset <= offset {
		i++
	}
	if len(c.entries) == 0 || (i == 0 && c.entries[0].StartOffset >= offset) {
		return false
	}
	c.entries = c.entries[i:]
	c.entries[0].StartOffset = offset
	return true
}

// persist replaces the checkpoint file atomically (a crash leaves the old
// file or the new one, never a mix). A cache out of order is refused
// rather than written: parseEpochFile would reject the file and the log
// would not open again.
func (c *epochCache) persist() error {
	entries := c.snapshot()
	for i := 1; i < len(entries); i++ {
		if entries[i].Epoch <= entries[i-1].Epoch || entries[i].StartOffset < entries[i-1].StartOffset {
			return fmt.Errorf("segment: leader epoch cache out of order: %v then %v", entries[i-1], entries[i])
		}
	}
	return fsutil.WriteFileAtomic(c.dir, epochFile, encodeEpochFile(entries))
}

// truncateEpochsFromEnd drops the epochs that start at or after offset,
// the log's end, and persists the cache when it changed. TruncateTo calls
// it even when its target is at or above the LEO and no batch goes, as
// Kafka's UnifiedLog.truncateTo does: a broker that led an epoch without
// writing holds an entry at its LEO that the new leader's log does not
// have. A failed write fails the log, as any failed truncation does (owner
// only).
func (l *Log) truncateEpochsFromEnd(offset int64) error {
	if !l.epochs.truncateFromEnd(offset) {
		return nil
	}
	if err := l.epochs.persist(); err != nil {
		err = fmt.Errorf("segment: persist leader epochs: %w", err)
		l.fail(err)
		return err
	}
	return nil
}

// epochFor returns the epoch whose range holds offset, or UndefinedEpoch.
func (c *epochCache) epochFor(offset int64) int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e := UndefinedEpoch
	for _, en := range c.entries {
		if en.StartOffset > offset {
			break
		}
		e = en.Epoch
	}
	return e
}
