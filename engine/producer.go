package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"ringlog/internal/fsutil"
	"ringlog/segment/batch"
)

// Idempotent producers (KIP-98): each partition remembers, per producer id,
// the producer's epoch and the sequence numbers and offsets of its last
// five batches, so that a retried batch is answered with its original
// offset instead of being written twice, a gap in sequence numbers is
// refused, and a fenced (older) epoch is refused. The rules follow Kafka's
// ProducerAppendInfo.

const batchesToRetain = 5

type batchMeta struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
	timestamp               int64
}

type producerEntry struct {
	epoch   int16
	batches []batchMeta // oldest first, at most batchesToRetain
}

func (e *producerEntry) lastSeq() int32 {
	if len(e.batches) == 0 {
		return -1
	}
	return e.batches[len(e.batches)-1].lastSeq
}

type producerState struct {
	entries map[int64]*producerEntry
	// undo holds the entries as they were before the round's updates, so
	// that a failed write can be rolled back.
	undo map[int64]*producerEntry
}

func newProducerState() *producerState {
	return &producerState{entries: map[int64]*producerEntry{}}
}

// lastSequence is the sequence of the batch's last record, wrapping at
// MaxInt32 as Kafka's does.
func lastSequence(h batch.Header) int32 {
	return int32((int64(h.BaseSequence) + int64(h.LastOffsetDelta)) % (1 << 31))
}

func inSequence(last, next int32) bool {
	return next == last+1 || (next == 0 && last == 1<<31-1)
}

// check decides what a producer batch is: nil, nil to append it; a
// duplicate of a batch already written (answered with that batch's
// offsets); or an error (fenced epoch, sequence gap).
func (ps *producerState) check(h batch.Header) (*batchMeta, error) {
	if h.ProducerID < 0 {
		return nil, nil
	}
	e := ps.entries[h.ProducerID]
	if e == nil {
		// No state: a new producer, or one whose state expired or was
		// removed with the log's start. Kafka accepts any sequence then.
		return nil, nil
	}
	if h.ProducerEpoch < e.epoch {
		return nil, fmt.Errorf("%w: producer %d epoch %d, current %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	if h.ProducerEpoch > e.epoch {
		// A new epoch starts its sequences over.
		if h.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: producer %d new epoch %d starts at sequence %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return nil, nil
	}
	last := lastSequence(h)
	for i := range e.batches {
		if b := &e.batches[i]; b.firstSeq == h.BaseSequence && b.lastSeq == last {
			d := *b
			return &d, nil
		}
	}
	if len(e.batches) > 0 && !inSequence(e.lastSeq(), h.BaseSequence) {
		return nil, fmt.Errorf("%w: producer %d epoch %d: sequence %d after %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence, e.lastSeq())
	}
	return nil, nil
}

// update records a batch written at baseOffset. With undo set, the entry's
// previous value is kept for rollback.
func (ps *producerState) update(h batch.Header, baseOffset int64, keepUndo bool) {
	if h.ProducerID < 0 {
		return
	}
	e := ps.entries[h.ProducerID]
	if keepUndo {
		if ps.undo == nil {
			ps.undo = map[int64]*producerEntry{}
		}
		if _, saved := ps.undo[h.ProducerID]; !saved {
			var cp *producerEntry
			if e != nil {
				cp = &producerEntry{epoch: e.epoch, batches: append([]batchMeta(nil), e.batches...)}
			}
			ps.undo[h.ProducerID] = cp
		}
	}
	if e == nil {
		e = &producerEntry{epoch: h.ProducerEpoch}
		ps.entries[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.epoch {
		e.epoch = h.ProducerEpoch
		e.batches = e.batches[:0]
	}
	if len(e.batches) == batchesToRetain {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:batchesToRetain-1]
	}
	e.batches = append(e.batches, batchMeta{
		firstSeq: h.BaseSequence, lastSeq: lastSequence(h),
		firstOffset: baseOffset, lastOffset: baseOffset + int64(h.LastOffsetDelta),
		timestamp: h.MaxTimestamp,
	})
}

// commit forgets the undo information of a successful round.
func (ps *producerState) commit() { ps.undo = nil }

// rollback restores the entries a failed round changed.
func (ps *producerState) rollback() {
	for pid, e := range ps.undo {
		if e == nil {
			delete(ps.entries, pid)
		} else {
			ps.entries[pid] = e
		}
	}
	ps.undo = nil
}

// truncate drops what the state knows of batches at or above offset (the
// log was truncated); entries left without batches go.
func (ps *producerState) truncate(offset int64) {
	for pid, e := range ps.entries {
		n := len(e.batches)
		for n > 0 && e.batches[n-1].lastOffset >= offset {
			n--
		}
		e.batches = e.batches[:n]
		if n == 0 {
			delete(ps.entries, pid)
		}
	}
}

// expire drops producers whose newest batch is older than cutoff (ms).
func (ps *producerState) expire(cutoff int64) {
	for pid, e := range ps.entries {
		if n := len(e.batches); n == 0 || e.batches[n-1].timestamp < cutoff {
			delete(ps.entries, pid)
		}
	}
}

// Snapshot file: the state as of an offset, so that a restart only
// replays the batches after it.
//
//	"RLPS" | version u16 | offset i64 | count u32 |
//	count x (pid i64 | epoch i16 | n u8 | n x (firstSeq i32 | lastSeq i32 | firstOffset i64 | lastOffset i64 | timestamp i64)) |
//	crc32c u32 of everything before it
const (
	snapshotFile    = "producer-state"
	snapshotMagic   = "RLPS"
	snapshotVersion = 1
	snapshotBatch   = 4 + 4 + 8 + 8 + 8
	snapshotEntry   = 8 + 2 + 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadSnapshot is a producer-state snapshot that cannot be trusted; the
// state is then rebuilt from the log.
var ErrBadSnapshot = errors.New("engine: bad producer-state snapshot")

func encodeSnapshot(ps *producerState, offset int64) []byte {
	b := append([]byte(snapshotMagic), 0, 0)
	binary.BigEndian.PutUint16(b[4:], snapshotVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	b = binary.BigEndian.AppendUint32(b, uint32(len(ps.entries)))
	for pid, e := range ps.entries {
		b = binary.BigEndian.AppendUint64(b, uint64(pid))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = append(b, byte(len(e.batches)))
		for _, m := range e.batches {
			b = binary.BigEndian.AppendUint32(b, uint32(m.firstSeq))
			b = binary.BigEndian.AppendUint32(b, uint32(m.lastSeq))
			b = binary.BigEndian.AppendUint64(b, uint64(m.firstOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.lastOffset))
			b = binary.BigEndian.AppendUint64(b, uint64(m.timestamp))
		}
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeSnapshot parses a snapshot file. Counts come from the file, so
// nothing is preallocated from them: every entry must be backed by bytes.
func decodeSnapshot(b []byte) (*producerState, int64, error) {
	const head = 4 + 2 + 8 + 4
	if len(b) < head+4 || string(b[:4]) != snapshotMagic {
		return nil, 0, fmt.Errorf("%w: no header", ErrBadSnapshot)
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != snapshotVersion {
		return nil, 0, fmt.Errorf("%w: version %d", ErrBadSnapshot, v)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, 0, fmt.Errorf("%w: checksum", ErrBadSnapshot)
	}
	offset := int64(binary.BigEndian.Uint64(b[6:]))
	count := binary.BigEndian.Uint32(b[14:])
	rest := body[head:]
	if offset < 0 || uint64(count) > uint64(len(rest)/snapshotEntry) {
		return nil, 0, fmt.Errorf("%w: offset %d, %d entries in %d bytes", ErrBadSnapshot, offset, count, len(rest))
	}
	ps := newProducerState()
	for range count {
		if len(rest) < snapshotEntry {
			return nil, 0, fmt.Errorf("%w: truncated entry", ErrBadSnapshot)
		}
		pid := int64(binary.BigEndian.Uint64(rest))
		e := &producerEntry{epoch: int16(binary.BigEndian.Uint16(rest[8:]))}
		n := int(rest[10])
		rest = rest[snapshotEntry:]
		if n > batchesToRetain || len(rest) < n*snapshotBatch || pid < 0 {
			return nil, 0, fmt.Errorf("%w: entry of producer %d", ErrBadSnapshot, pid)
		}
		for range n {
			e.batches = append(e.batches, batchMeta{
				firstSeq:    int32(binary.BigEndian.Uint32(rest)),
				lastSeq:     int32(binary.BigEndian.Uint32(rest[4:])),
				firstOffset: int64(binary.BigEndian.Uint64(rest[8:])),
				lastOffset:  int64(binary.BigEndian.Uint64(rest[16:])),
				timestamp:   int64(binary.BigEndian.Uint64(rest[24:])),
			})
			rest = rest[snapshotBatch:]
		}
		ps.entries[pid] = e
	}
	if len(rest) != 0 {
		return nil, 0, fmt.Errorf("%w: %d trailing bytes", ErrBadSnapshot, len(rest))
	}
	return ps, offset, nil
}

// writeSnapshot saves p's producer state as of its LEO (shard only).
func (p *partition) writeSnapshot() error {
	return fsutil.WriteFileAtomic(p.dir, snapshotFile, encodeSnapshot(p.producers, p.log.LEO()))
}

// loadProducers restores p's producer state: the snapshot, then the batches
// written after it (shard only).
func (p *partition) loadProducers() error {
	leo := p.log.LEO()
	ps, from := newProducerState(), p.log.LogStartOffset()
	b, err := os.ReadFile(filepath.Join(p.dir, snapshotFile))
	switch {
	case err == nil:
		if s, off, derr := decodeSnapshot(b); derr == nil && off <= leo {
			ps, from = s, max(off, from)
		}
	case !os.IsNotExist(err):
		return err
	}
	err = p.log.ScanHeaders(from, leo, func(h batch.Header) error {
		if h.ProducerID >= 0 && !h.Control() {
			ps.update(h, h.BaseOffset, false)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rebuild producer state of %s: %w", p.dir, err)
	}
	p.producers = ps
	return nil
}
