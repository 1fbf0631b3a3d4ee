package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"

	"ringlog/internal/fsutil"
	"ringlog/segment"
	"ringlog/segment/batch"
)

// Idempotent producers (KIP-98): each partition remembers, per producer id,
// the producer's epoch and the sequence numbers and offsets of its last
// five batches, so that a retried batch is answered with its original
// offset instead of being written twice, a gap in sequence numbers is
// refused, and a fenced (older) epoch is refused. The rules follow Kafka's
// ProducerAppendInfo.
//
// Transactions (KIP-98) add two things per producer: the first offset of
// its open transaction on this partition (Kafka's currentTxnFirstOffset),
// set by its first transactional batch and cleared by the marker (a control
// batch the broker writes for the transaction coordinator) that ends it,
// and the epoch of the coordinator that wrote its last marker, below which
// markers are refused. The open transactions bound the last stable offset
// (txn.go).

const batchesToRetain = 5

type batchMeta struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
	timestamp               int64
}

type producerEntry struct {
	epoch   int16
	batches []batchMeta // oldest first, at most batchesToRetain
	// txnFirst is the first offset of the producer's open transaction on
	// this partition, -1 when none is open.
	txnFirst int64
	// coordinatorEpoch is the epoch of the transaction coordinator that
	// wrote the producer's last marker, -1 before any.
	coordinatorEpoch int32
	// lastTimestamp is the max timestamp of the producer's last batch,
	// data or marker (Kafka's ProducerStateEntry.lastTimestamp, which
	// DescribeProducers reports), -1 before any. It is not in the
	// snapshot: a loaded entry takes its last data batch's, and the
	// markers replayed after the snapshot move it on.
	lastTimestamp int64
}

func newProducerEntry(epoch int16) *producerEntry {
	return &producerEntry{epoch: epoch, txnFirst: -1, coordinatorEpoch: -1, lastTimestamp: -1}
}

func (e *producerEntry) clone() *producerEntry {
	c := *e
	c.batches = append([]batchMeta(nil), e.batches...)
	return &c
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
	// that a failed write can be rolled back; undoEnded is how many ended
	// transactions there were then.
	undo      map[int64]*producerEntry
	undoEnded int
	// ended are the transactions ended by a marker whose marker may not
	// be below the high watermark yet: until it is, the marker could
	// still be truncated, and the last stable offset stays below the
	// transaction's first offset (Kafka's unreplicatedTxns).
	ended []txnSpan
	// open maps the producers with a transaction open to its first
	// offset: the entries' txnFirst, kept apart so that the shard's
	// per-round look at open transactions costs nothing when there are
	// none, whatever the number of idempotent producers.
	open map[int64]int64
}

func newProducerState() *producerState {
	return &producerState{entries: map[int64]*producerEntry{}, open: map[int64]int64{}}
}

// setTxnFirst opens (first >= 0) or closes (-1) pid's transaction.
func (ps *producerState) setTxnFirst(pid int64, e *producerEntry, first int64) {
	e.txnFirst = first
	if first >= 0 {
		ps.open[pid] = first
	} else {
		delete(ps.open, pid)
	}
}

// ongoing reports whether pid has a transaction open here at epoch.
func (ps *producerState) ongoing(pid int64, epoch int16) bool {
	e := ps.entries[pid]
	return e != nil && e.txnFirst >= 0 && e.epoch == epoch
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
		return nil, e.checkTxn(h)
	}
	last := lastSequence(h)
	for i := range e.batches {
		if b := &e.batches[i]; b.firstSeq == h.BaseSequence && b.lastSeq == last {
			d := *b
			return &d, nil
		}
	}
	// An entry without batches (a marker bumped its epoch, KIP-890's
	// end of a transaction, or made it) has last sequence -1: the
	// epoch's first batch must be sequence 0, as in Kafka. Taking any
	// sequence there let a producer's second pipelined request land
	// when its first was refused (CONCURRENT_TRANSACTIONS while the
	// previous transaction's markers were being written); the retry of
	// the first was then OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to the
	// producer (franz-go's TestTxnEtl on three brokers).
	if !inSequence(e.lastSeq(), h.BaseSequence) {
		return nil, fmt.Errorf("%w: producer %d epoch %d: sequence %d after %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence, e.lastSeq())
	}
	return nil, e.checkTxn(h)
}

// checkEpoch is check for a coordinator's own write (AppendOptions.
// Coordinator): a fenced epoch is refused; sequences are not checked.
func (ps *producerState) checkEpoch(h batch.Header) error {
	if h.ProducerID < 0 {
		return nil
	}
	if e := ps.entries[h.ProducerID]; e != nil && h.ProducerEpoch < e.epoch {
		return fmt.Errorf("%w: producer %d epoch %d, current %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	}
	return nil
}

// checkTxn refuses a batch outside a transaction from a producer whose
// transaction on this partition is open, as Kafka's ProducerAppendInfo
// does (INVALID_TXN_STATE): the records would be neither committed nor
// aborted with it, and would hold the last stable offset for nothing.
// Duplicates are found before it, as in Kafka.
func (e *producerEntry) checkTxn(h batch.Header) error {
	if e.txnFirst >= 0 && !h.Transactional() {
		return fmt.Errorf("%w: producer %d has a transaction open at offset %d and sent a batch outside it", ErrInvalidTxnState, h.ProducerID, e.txnFirst)
	}
	return nil
}

// checkMarker decides whether a marker may end producer pid's transaction
// (a leader's check; a follower takes its leader's markers as they are):
// an older producer epoch is fenced (Kafka: INVALID_PRODUCER_EPOCH), and so
// is an older coordinator epoch (TRANSACTION_COORDINATOR_FENCED: a
// coordinator that lost its partition of __transaction_state to another
// is still sending).
//
// A marker of transactions v2 (transaction version tv 2 or more,
// KIP-1228) comes at the epoch EndTxn bumped to, so it must be above the
// producer's epoch here: one at the same epoch is a stale marker that
// would end the producer's next transaction, and is fenced too, unless
// nothing is open (a coordinator sending a written marker again) or the
// epoch is the last one (exhausted, it cannot be bumped), which Kafka's
// ProducerAppendInfo lets through as a retry.
func (ps *producerState) checkMarker(pid int64, epoch int16, coordinatorEpoch int32, tv int16) error {
	e := ps.entries[pid]
	if e == nil {
		return nil
	}
	if epoch < e.epoch {
		return fmt.Errorf("%w: marker for producer %d at epoch %d, current %d", ErrInvalidProducerEpoch, pid, epoch, e.epoch)
	}
	if tv >= 2 && epoch == e.epoch && e.txnFirst >= 0 && epoch != math.MaxInt16 {
		return fmt.Errorf("%w: transactions v2 marker for producer %d at its current epoch %d, transaction open at offset %d",
			ErrInvalidProducerEpoch, pid, epoch, e.txnFirst)
	}
	if coordinatorEpoch < e.coordinatorEpoch {
		return fmt.Errorf("%w: marker for producer %d from coordinator epoch %d, last %d", ErrTransactionCoordinatorFenced, pid, coordinatorEpoch, e.coordinatorEpoch)
	}
	return nil
}

// update records a batch written at baseOffset; m is the marker of a
// control batch (nil for data batches, and for a control batch that holds
// no transaction marker, which changes nothing). With undo set, the
// entry's previous value is kept for rollback. An ABORT marker returns
// the entry of the aborted-transactions index it makes.
func (ps *producerState) update(h batch.Header, baseOffset int64, m *batch.Marker, keepUndo bool) *segment.AbortedTxn {
	if h.ProducerID < 0 || (h.Control() && m == nil) {
		return nil
	}
	e := ps.entries[h.ProducerID]
	if keepUndo {
		if ps.undo == nil {
			ps.undo = map[int64]*producerEntry{}
			ps.undoEnded = len(ps.ended)
		}
		if _, saved := ps.undo[h.ProducerID]; !saved {
			var cp *producerEntry
			if e != nil {
				cp = e.clone()
			}
			ps.undo[h.ProducerID] = cp
		}
	}
	if e == nil {
		e = newProducerEntry(h.ProducerEpoch)
		ps.entries[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.epoch {
		e.epoch = h.ProducerEpoch
		e.batches = e.batches[:0]
	}
	e.lastTimestamp = h.MaxTimestamp
	if m != nil {
		return ps.endTxn(h.ProducerID, e, baseOffset, m, keepUndo)
	}
	if h.Transactional() && e.txnFirst < 0 {
		ps.setTxnFirst(h.ProducerID, e, baseOffset)
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
	return nil
}

// endTxn applies the marker at offset to producer pid's entry e: the
// open transaction (if any) ends, the coordinator epoch is remembered,
// and the transaction is kept among the ended ones until its marker is
// below the high watermark. A marker carries no sequence: the producer's
// batches are not touched. Kafka writes an index entry for an aborted
// transaction that has no data here too (first offset = the marker's).
func (ps *producerState) endTxn(pid int64, e *producerEntry, offset int64, m *batch.Marker, keepUndo bool) *segment.AbortedTxn {
	first := e.txnFirst
	ps.setTxnFirst(pid, e, -1)
	e.coordinatorEpoch = m.CoordinatorEpoch
	if first >= 0 {
		ps.ended = append(ps.ended, txnSpan{first: first, last: offset, pending: keepUndo})
	}
	if m.Commit {
		return nil
	}
	if first < 0 {
		first = offset
	}
	// Kafka's lastStableOffset(completedTxn): the first offset of the
	// earliest transaction still open, or just after this marker.
	lso := offset + 1
	for opid, f := range ps.open {
		if opid != pid {
			lso = min(lso, f)
		}
	}
	return &segment.AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: offset, LastStableOffset: lso}
}

// commit forgets the undo information of a successful round; the
// transactions it ended are no longer pending (their index entries are
// written by then).
func (ps *producerState) commit() {
	ps.undo = nil
	for i := range ps.ended {
		ps.ended[i].pending = false
	}
}

// rollback restores the entries a failed round changed.
func (ps *producerState) rollback() {
	if ps.undo != nil {
		ps.ended = ps.ended[:ps.undoEnded]
	}
	for pid, e := range ps.undo {
		delete(ps.open, pid)
		if e == nil {
			delete(ps.entries, pid)
			continue
		}
		ps.entries[pid] = e
		if e.txnFirst >= 0 {
			ps.open[pid] = e.txnFirst
		}
	}
	ps.undo = nil
}

// expire drops producers whose newest batch is older than cutoff (ms),
// except those with a transaction open: Kafka never expires those (the
// coordinator aborts a transaction that times out, with a marker).
func (ps *producerState) expire(cutoff int64) {
	for pid, e := range ps.entries {
		if e.txnFirst >= 0 {
			continue
		}
		if n := len(e.batches); n == 0 || e.batches[n-1].timestamp < cutoff {
			delete(ps.entries, pid)
		}
	}
}

// beforeRound is the state as it was before the round's updates: the
// entries overlaid with their undo copies (shard only, before commit).
func (ps *producerState) beforeRound() map[int64]*producerEntry {
	if ps.undo == nil {
		return ps.entries
	}
	out := make(map[int64]*producerEntry, len(ps.entries))
	for pid, e := range ps.entries {
		out[pid] = e
	}
	for pid, e := range ps.undo {
		if e == nil {
			delete(out, pid)
		} else {
			out[pid] = e
		}
	}
	return out
}

// Snapshot file: the state as of an offset, so that a restart only
// replays the batches after it.
//
//	"RLPS" | version u16 | offset i64 | count u32 |
//	count x (pid i64 | epoch i16 | [v2: coordinatorEpoch i32 | txnFirst i64] | n u8 |
//	         n x (firstSeq i32 | lastSeq i32 | firstOffset i64 | lastOffset i64 | timestamp i64)) |
//	crc32c u32 of everything before it
//
// Version 2 adds each producer's open transaction (first offset, -1 when
// none) and coordinator epoch, so that a restart knows the transactions
// open at the snapshot's offset without replaying the log from its start.
// Version 1 (written before transactions) is still read: it had none open.
const (
	snapshotFile      = "producer-state"
	snapshotMagic     = "RLPS"
	snapshotVersion   = 2
	snapshotVersionV1 = 1
	snapshotBatch     = 4 + 4 + 8 + 8 + 8
	snapshotEntryV1   = 8 + 2 + 1
	snapshotEntry     = 8 + 2 + 4 + 8 + 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadSnapshot is a producer-state snapshot that cannot be trusted; the
// state is then rebuilt from the log.
var ErrBadSnapshot = errors.New("engine: bad producer-state snapshot")

func encodeSnapshot(entries map[int64]*producerEntry, offset int64) []byte {
	b := append([]byte(snapshotMagic), 0, 0)
	binary.BigEndian.PutUint16(b[4:], snapshotVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	b = binary.BigEndian.AppendUint32(b, uint32(len(entries)))
	for pid, e := range entries {
		b = binary.BigEndian.AppendUint64(b, uint64(pid))
		b = binary.BigEndian.AppendUint16(b, uint16(e.epoch))
		b = binary.BigEndian.AppendUint32(b, uint32(e.coordinatorEpoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.txnFirst))
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

// decodeSnapshot parses a snapshot file of version 1 or 2. Counts come
// from the file, so nothing is preallocated from them: every entry must
// be backed by bytes.
func decodeSnapshot(b []byte) (*producerState, int64, error) {
	const head = 4 + 2 + 8 + 4
	if len(b) < head+4 || string(b[:4]) != snapshotMagic {
		return nil, 0, fmt.Errorf("%w: no header", ErrBadSnapshot)
	}
	version := binary.BigEndian.Uint16(b[4:])
	entrySize := snapshotEntry
	switch version {
	case snapshotVersion:
	case snapshotVersionV1:
		entrySize = snapshotEntryV1
	default:
		return nil, 0, fmt.Errorf("%w: version %d", ErrBadSnapshot, version)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, 0, fmt.Errorf("%w: checksum", ErrBadSnapshot)
	}
	offset := int64(binary.BigEndian.Uint64(b[6:]))
	count := binary.BigEndian.Uint32(b[14:])
	rest := body[head:]
	if offset < 0 || uint64(count) > uint64(len(rest)/entrySize) {
		return nil, 0, fmt.Errorf("%w: offset %d, %d entries in %d bytes", ErrBadSnapshot, offset, count, len(rest))
	}
	ps := newProducerState()
	for range count {
		if len(rest) < entrySize {
			return nil, 0, fmt.Errorf("%w: truncated entry", ErrBadSnapshot)
		}
		pid := int64(binary.BigEndian.Uint64(rest))
		e := newProducerEntry(int16(binary.BigEndian.Uint16(rest[8:])))
		if version == snapshotVersion {
			e.coordinatorEpoch = int32(binary.BigEndian.Uint32(rest[10:]))
			e.txnFirst = int64(binary.BigEndian.Uint64(rest[14:]))
			if e.txnFirst >= 0 {
				ps.open[pid] = e.txnFirst
			}
		}
		n := int(rest[entrySize-1])
		rest = rest[entrySize:]
		if n > batchesToRetain || len(rest) < n*snapshotBatch || pid < 0 || e.txnFirst < -1 || e.txnFirst >= offset {
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
		if n > 0 {
			e.lastTimestamp = e.batches[n-1].timestamp
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
	return fsutil.WriteFileAtomic(p.dir, snapshotFile, encodeSnapshot(p.producers.entries, p.log().LEO()))
}

// loadProducers restores p's producer state: the snapshot, then the batches
// written after it (shard only). When the log found aborted-transaction
// indexes it cannot trust (a crash, a file lost or torn), the replay
// starts no later than the first of them, from the log start if the
// snapshot is later, and rebuilds them on the way: only this state knows
// where each aborted transaction began.
func (p *partition) loadProducers() error {
	leo := p.log().LEO()
	ps, from := newProducerState(), p.log().LogStartOffset()
	stale := p.log().TxnIndexStale()
	b, err := os.ReadFile(filepath.Join(p.dir, snapshotFile))
	switch {
	case err == nil:
		if s, off, derr := decodeSnapshot(b); derr == nil && off <= leo && (stale < 0 || off <= stale) {
			ps, from = s, max(off, from)
		}
	case !os.IsNotExist(err):
		return err
	}
	var aborted []segment.AbortedTxn
	err = p.log().ScanMarkers(from, leo, func(h batch.Header, m *batch.Marker) error {
		if h.ProducerID >= 0 {
			if e := ps.update(h, h.BaseOffset, m, false); e != nil && stale >= 0 {
				aborted = append(aborted, *e)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("rebuild producer state of %s: %w", p.dir, err)
	}
	if stale >= 0 {
		if err := p.log().RebuildTxnIndexes(aborted); err != nil {
			return fmt.Errorf("rebuild transaction indexes of %s: %w", p.dir, err)
		}
	}
	p.producers = ps
	return nil
}
