package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"ringlog/internal/fsutil"
	"ringlog/segment"
	"ringlog/segment/batch"
)

// A follower's side of replication: copying the leader's batches as they
// are, truncating to where the leader's log and its own agree, and the
// leader's side of a follower's fetch (ReadReplica).

// AppendReplica appends batches copied from tp's leader (the records of a
// fetch response) to this follower's log. They keep the offsets and leader
// epochs the leader gave them, and the leader-epoch checkpoint learns each
// new epoch from them. The first batch must start at the LEO (after the
// replica appends queued before this one) and each batch where the
// previous one ends; otherwise nothing is written and the error is
// ErrUnexpectedOffset. On a compacted topic (cleanup.policy with compact)
// a batch may start above that offset, never below: compaction removes
// whole batches, so the leader's log has gaps. A partial batch at the end
// (a fetch cut by its byte limit) is left out, as consumers leave it.
//
// The batches are validated (CRC, lengths) on the caller's goroutine, then
// written by the partition's shard with the producer appends of the round
// and under the same flush policy. The producer state learns each
// idempotent producer's epoch and sequences from them, so that this broker
// deduplicates a retry if it becomes the leader. done is called exactly
// once, on the shard goroutine once written, or on the caller's when
// refused before reaching it, with the LEO after the append (or at the
// time of the error). The partition must be a follower (ErrNotFollower).
func (e *Core) AppendReplica(tp TP, records []byte, done func(leo int64, err error)) {
	p, err := e.replicated(tp)
	if err != nil {
		done(0, err)
		return
	}
	r, err := newReplicaAppend(p, records, done)
	switch {
	case err != nil:
		done(p.log().LEO(), err)
	case r == nil:
		// Nothing whole to write (an empty fetch): no trip to the shard.
		done(p.log().LEO(), nil)
	default:
		p.shard.send(shardMsg{append: r})
	}
}

// newReplicaAppend cuts a follower's batches: whole batches, offsets in
// order. It returns nil when records holds no whole batch. That they are
// intact (batch.Stored: a leader's batches may have been compacted) is
// checked on the shard, as they are staged (appendReq.stage).
func newReplicaAppend(p *partition, records []byte, done func(int64, error)) (*appendReq, error) {
	r := &appendReq{p: p, replica: done}
	gaps := p.topic.config.Log.Cleanup.Compacts()
	it := batch.Split(records)
	for it.Next() {
		b := it.Batch()
		h, err := batch.ParseHeader(b)
		if err != nil {
			return nil, fmt.Errorf("%w: replica batch %d: %w", segment.ErrInvalidBatch, len(r.batches), err)
		}
		if n := len(r.hdrs); n > 0 {
			if next := r.hdrs[n-1].NextOffset(); h.BaseOffset < next || (h.BaseOffset > next && !gaps) {
				return nil, fmt.Errorf("%w: %s-%d: replica batch at offset %d follows one ending at %d", ErrUnexpectedOffset, p.tp.Topic, p.tp.Partition, h.BaseOffset, next)
			}
		}
		// The leader's markers end transactions here too; a control
		// batch that holds none changes nothing. Read before the CRC is
		// checked: a batch whose CRC then fails takes the whole append
		// down, its marker with it.
		var m *batch.Marker
		if h.Control() && h.ProducerID >= 0 {
			if mk, err := batch.ParseMarker(h, b); err == nil {
				m = &mk
			}
		}
		if m != nil && r.markers == nil {
			r.markers = make([]*batch.Marker, len(r.hdrs))
		}
		if r.markers != nil {
			r.markers = append(r.markers, m)
		}
		r.batches = append(r.batches, b)
		r.hdrs = append(r.hdrs, h)
	}
	if err := it.Err(); err != nil && !errors.Is(err, batch.ErrShort) {
		return nil, fmt.Errorf("%w: %w", segment.ErrInvalidBatch, err)
	}
	if len(r.batches) == 0 {
		return nil, nil
	}
	return r, nil
}

// prepareReplica prepares one log append for a follower's requests that
// start where the log (with the requests before them) ends. The producer
// state is updated without checks: the leader made them.
func (s *shard) prepareReplica(p *partition, reqs []*appendReq) *segment.Task {
	next := p.log().LEO()
	gaps := p.topic.config.Log.Cleanup.Compacts()
	st, err := p.log().Stage(reqsSize(reqs))
	if err != nil {
		s.checkDisk(p, err)
		for _, r := range reqs {
			r.fail(storageError(err))
		}
		return nil
	}
	accepted := reqs[:0:0]
	for _, r := range reqs {
		first := r.hdrs[0].BaseOffset
		if first < next || (first > next && !gaps) {
			r.fail(fmt.Errorf("%w: %s-%d: replica batches start at offset %d, expected %d", ErrUnexpectedOffset, p.tp.Topic, p.tp.Partition, first, next))
			continue
		}
		if err := r.stage(st, 0); err != nil {
			r.fail(err)
			continue
		}
		for i, h := range r.hdrs {
			if a := p.producers.update(h, h.BaseOffset, r.marker(i), true); a != nil {
				r.aborted = append(r.aborted, *a)
			}
		}
		r.base, r.end = first, r.hdrs[len(r.hdrs)-1].NextOffset()
		next = r.end
		accepted = append(accepted, r)
	}
	if len(accepted) == 0 {
		st.Release()
		return nil
	}
	// As on a leader: known before the write can be covered by the high
	// watermark the leader sends.
	p.publishTxns()
	t, err := p.log().PrepareStaged(st, segment.AppendOptions{Replica: true})
	if err != nil {
		p.producers.rollback()
		p.publishTxns()
		s.checkDisk(p, err)
		for _, r := range accepted {
			r.fail(storageError(err))
		}
		return nil
	}
	t.Ctx = accepted
	p.task = t
	return t
}

// Truncate removes tp's batches at and above offset, as a follower does
// before fetching from a new leader (KIP-101: to the end offset of its
// latest epoch as the leader knows it). A batch holding offset goes whole,
// so the LEO may end below offset. At or above the LEO no batch goes, but
// the leader-epoch entries starting at the LEO do (an epoch this broker
// led without writing), as Kafka's truncateTo does. The high watermark is lowered to the
// new LEO if it was above (waiters are not woken: nothing new is
// readable), acks=all appends waiting above the new LEO fail with
// ErrNotLeader, and the producer state is rebuilt for the shorter log. The
// truncation is synced before Truncate returns. It runs on tp's shard and
// waits for it (not from a shard goroutine).
func (e *Core) Truncate(tp TP, offset int64) error {
	p, err := e.replicated(tp)
	if err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: truncate to %d", ErrInvalidRequest, offset)
	}
	return p.callSync(func() error {
		return p.truncate(func() error { return p.log().TruncateTo(offset) }, false)
	})
}

// TruncateFullyAndStartAt empties tp's log and restarts it at offset (log
// start, LEO and high watermark), as a follower does whose LEO is below
// its leader's log start offset. The leader-epoch checkpoint and the
// producer state are emptied too. Same rules as Truncate otherwise.
func (e *Core) TruncateFullyAndStartAt(tp TP, offset int64) error {
	p, err := e.replicated(tp)
	if err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: start at %d", ErrInvalidRequest, offset)
	}
	return p.callSync(func() error {
		return p.truncate(func() error { return p.log().TruncateFullyAndStartAt(offset) }, true)
	})
}

// truncate runs cut (a truncation of the log) and brings the partition's
// state in line with the log it leaves (shard only).
func (p *partition) truncate(cut func() error, fully bool) error {
	// hwMu is held across the cut: SetHW must not read the LEO before it
	// and store a high watermark after it.
	p.hwMu.Lock()
	if m := p.move.Load(); m != nil {
		// The bytes a move copied may be cut and written again.
		m.truncated.Store(true)
	}
	before := p.log().LEO()
	err := cut()
	leo, start := p.log().LEO(), p.log().LogStartOffset()
	p.hw.Store(min(max(p.hw.Load(), start), leo))
	p.hwMu.Unlock()
	p.failAcks(leo, fmt.Errorf("%w: %s-%d truncated to %d", ErrNotLeader, p.tp.Topic, p.tp.Partition, leo))
	if err != nil {
		return storageError(err)
	}
	if leo == before && !fully {
		// A truncation at or above the LEO (the replication layer makes
		// one after every leader change) keeps every batch; the log only
		// dropped the epochs that start at its end.
		return nil
	}
	// The snapshot on disk describes the log below its offset; it still
	// holds after a truncation above that offset, and is ignored below
	// (the state is then rebuilt from the log start). An emptied log has
	// no producers. The state is saved as of the new LEO either way, so
	// that no snapshot of batches that are gone can be loaded after a
	// restart once the log grows past its offset again.
	if fully {
		if err := os.Remove(filepath.Join(p.dir, snapshotFile)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
		// Durably gone before anything is appended to the emptied log: a
		// power loss must not bring back a snapshot of the old one.
		if err := fsutil.SyncDir(p.dir); err != nil {
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
	}
	if err := p.loadProducers(); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	p.publishTxns()
	p.snapshotBase = p.log().ActiveBase()
	if err := p.writeSnapshot(); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}

// ReadReplica is Read for a follower fetching from this leader: bounded by
// the LEO instead of the high watermark, so that the follower can copy
// what is not committed yet. It does not check the role; the caller
// answers a fetch for a partition it does not lead.
func (e *Core) ReadReplica(tp TP, offset, maxBytes int64, minOne bool) (ReadResult, error) {
	p, err := e.partition(tp)
	if err != nil {
		return ReadResult{}, err
	}
	st := p.state()
	res, err := p.log().Read(offset, maxBytes, st.LEO, minOne)
	if err != nil {
		return ReadResult{State: st}, err
	}
	return ReadResult{ReadResult: res, State: st}, nil
}
