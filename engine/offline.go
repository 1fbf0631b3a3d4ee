package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"

	"ringlog/segment"
)

// Offline partitions: Kafka takes a log directory offline when its disk
// fails (KIP-112; KIP-858 in KRaft) and the controller moves the
// leadership of the replicas there. In ringlog the unit that goes offline
// is the partition whose log cannot be trusted: one that failed to open at
// start (corruption that recovery refuses to cut, an unreadable file, its
// log directory missing: logdirs.go) or whose disk failed under it at run
// time (a failed fsync, EIO or EROFS on a write). An offline partition
// stays hosted, so that its name, its high watermark in the checkpoint and
// its files are kept for an operator, but every call on it answers
// ErrStorage (Kafka's KAFKA_STORAGE_ERROR) until the broker restarts and
// its log opens cleanly. The rest of the broker serves on.

// OfflinePartition is a partition taken offline and why.
type OfflinePartition struct {
	TP  TP
	Err error
}

// offlineErr returns the error that took p offline (wrapping ErrStorage),
// or nil. Any goroutine.
func (p *partition) offlineErr() error {
	if e := p.offline.Load(); e != nil {
		return *e
	}
	return nil
}

// Offline returns the error that took tp offline (wrapping ErrStorage),
// nil when tp serves, and ErrUnknownTopicOrPartition or ErrClosed as the
// other calls do. It never waits.
func (e *Core) Offline(tp TP) error {
	p, err := e.hosted(tp)
	if err != nil {
		return err
	}
	return p.offlineErr()
}

// OfflinePartitions lists the partitions taken offline, sorted. It never
// waits.
func (e *Core) OfflinePartitions() []OfflinePartition {
	var out []OfflinePartition
	for tp, p := range *e.parts.Load() {
		if err := p.offlineErr(); err != nil && !p.deleted.Load() {
			out = append(out, OfflinePartition{TP: tp, Err: err})
		}
	}
	slices.SortFunc(out, func(a, b OfflinePartition) int {
		if c := strings.Compare(a.TP.Topic, b.TP.Topic); c != 0 {
			return c
		}
		return int(a.TP.Partition - b.TP.Partition)
	})
	return out
}

// offlineAtOpen reports whether err, a log's failure to open at start,
// takes only that partition offline. Everything about the partition's
// files does (corruption, EIO, an unreadable snapshot, permissions); a
// configuration the broker refuses and the process's own limits (no
// descriptors, no memory) fail the start as before: they are not the
// partition's, and would take every partition offline one by one.
func offlineAtOpen(err error) bool {
	switch {
	case errors.Is(err, segment.ErrConfig), errors.Is(err, ErrClosed), errors.Is(err, segment.ErrClosed),
		errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE), errors.Is(err, syscall.ENOMEM):
		return false
	}
	return true
}

// diskFailed reports whether err, from an operation on l, means that the
// disk under the log failed: the log stopped itself (a failed fsync, an
// undo that failed), or the kernel answered EIO, or EROFS (ext4's
// errors=remount-ro after an error). ENOSPC and EDQUOT do not: the log
// undid the write and takes appends again once there is room, which is
// where ringlog departs from Kafka (which takes the directory offline on
// any IOException).
func diskFailed(l *segment.Log, err error) bool {
	if l != nil && l.Failed() != nil {
		return true
	}
	return errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EROFS)
}

// keepOffline records that p's log failed to open at start: p is hosted
// without a log, its files untouched (shard only, before p is published).
func (s *shard) keepOffline(p *partition, cause error) {
	err := fmt.Errorf("%w: %s-%d is offline: %w", ErrStorage, p.tp.Topic, p.tp.Partition, cause)
	p.offline.Store(&err)
	p.role.Store(int32(RoleNone))
	if v, ok := s.e.hwAtOpen[p.tp]; ok {
		// Kept in the checkpoint until the log opens again.
		p.hw.Store(v)
	}
	s.e.opensOffline.Add(1)
	s.e.log.Error("partition offline: its log did not open; its files are left as they are", "partition", p.dir, "err", cause)
}

// takeOffline takes p offline after its disk failed at run time (shard
// only): the log is stopped (no more writes; no clean-shutdown marker, so
// the next start recovers it), queued appends and acks=all appends waiting
// for the high watermark fail with ErrStorage, waiters wake to find it,
// and Config.OnOffline is told.
func (s *shard) takeOffline(p *partition, cause error) {
	if p.offline.Load() != nil || p.deleted.Load() {
		return
	}
	err := fmt.Errorf("%w: %s-%d is offline: %w", ErrStorage, p.tp.Topic, p.tp.Partition, cause)
	p.offline.Store(&err)
	if p.log() != nil {
		p.log().Stop(cause)
	}
	p.role.Store(int32(RoleNone))
	if err := s.cancelMove(p); err != nil {
		s.e.log.Error("remove an offline partition's future log", "partition", p.dir, "err", err)
	}
	s.e.log.Error("partition offline: its disk failed", "partition", p.dir, "err", cause)
	if hook := s.e.cfg.OnOffline; hook != nil {
		hook(p.tp, err)
	}
	for _, r := range p.queue {
		r.fail(err)
	}
	p.queue = nil
	p.failAcks(-1, err)
	p.notify()
}

// checkDisk takes p offline when err (from an operation on its log; nil
// after one that returned nothing) says that its disk failed (shard only).
func (s *shard) checkDisk(p *partition, err error) {
	if p.log() == nil || !diskFailed(p.log(), err) {
		return
	}
	cause := p.log().Failed()
	if cause == nil {
		cause = err
	}
	s.takeOffline(p, cause)
}

// checkFailedLogs takes offline every partition of the shard whose log
// stopped itself (after a background sync failed; shard only).
func (s *shard) checkFailedLogs() {
	for p := range s.parts {
		if p.log() != nil && p.log().Failed() != nil {
			s.takeOffline(p, p.log().Failed())
		}
	}
}

// ringFailed takes every partition of the shard offline once its ring
// failed: the fate of the writes in flight is unknown, and no write will
// go through it again (shard only).
func (s *shard) ringFailed() {
	if s.broken == nil || s.brokenHandled {
		return
	}
	s.brokenHandled = true
	s.abandon()
	for p := range s.parts {
		s.takeOffline(p, fmt.Errorf("shard %d ring failed: %w", s.id, s.broken))
	}
}
