package engine

import (
	"errors"
	"fmt"
	"os"

	"ringlog/segment"
)

// PartitionState is a partition's offsets as a fetch reports them.
type PartitionState struct {
	HW int64 // high watermark: read_uncommitted consumers read below it
	// LSO is the last stable offset: the high watermark held below the
	// first offset of every transaction not settled yet (txn.go);
	// read_committed consumers read below it.
	LSO            int64
	LEO            int64
	LogStartOffset int64
	// LeaderEpoch is the epoch of the partition's current role (0 on an
	// engine that is not replicated).
	LeaderEpoch int32
	// Role is RoleLeader on an engine that is not replicated.
	Role Role
}

func (p *partition) state() PartitionState {
	hw := p.hw.Load()
	start := p.log().LogStartOffset()
	return PartitionState{HW: hw, LSO: p.lso(hw, start), LEO: p.log().LEO(), LogStartOffset: start,
		LeaderEpoch: p.leaderEpoch.Load(), Role: Role(p.role.Load())}
}

// upper is where a read at isolation level iso stops.
func (st PartitionState) upper(iso Isolation) int64 {
	if iso == ReadCommitted {
		return st.LSO
	}
	return st.HW
}

// State returns tp's offsets.
func (e *Core) State(tp TP) (PartitionState, error) {
	p, err := e.partition(tp)
	if err != nil {
		return PartitionState{}, err
	}
	return p.state(), nil
}

// ReadResult is the answer to Read: file regions to send (zero-copy), and
// the partition's offsets at the time of the read. Release it once the
// regions are sent.
type ReadResult struct {
	*segment.ReadResult
	State PartitionState
	// Aborted are the aborted transactions overlapping the offsets read
	// (read_committed only; nil otherwise): Fetch's aborted_transactions,
	// with which the consumer drops each producer's records from the
	// first offset up to its ABORT marker.
	Aborted []segment.AbortedTxn
}

// Read returns the regions holding the batches from the one containing
// offset, up to maxBytes (the first batch whole with minOne), below the
// high watermark (ReadUncommitted) or the last stable offset
// (ReadCommitted, which also gets the aborted transactions it reads). An
// offset below the log start or above the high watermark is
// segment.ErrOutOfRange. Any goroutine may call it; it never waits for the
// shard.
func (e *Core) Read(tp TP, offset, maxBytes int64, minOne bool, iso Isolation) (ReadResult, error) {
	p, err := e.partition(tp)
	if err != nil {
		return ReadResult{}, err
	}
	st := p.state()
	upper := st.upper(iso)
	if offset > upper && offset <= st.LEO {
		// Written but not committed (or not stable): nothing to read
		// yet, not an error (Kafka answers an empty fetch).
		return ReadResult{ReadResult: &segment.ReadResult{}, State: st}, nil
	}
	res, err := p.log().Read(offset, maxBytes, upper, minOne)
	if errors.Is(err, segment.ErrClosed) {
		err = ErrClosed // Close came between the check and the read
	}
	if err != nil {
		return ReadResult{State: st}, err
	}
	out := ReadResult{ReadResult: res, State: st}
	if iso == ReadCommitted && res.Bytes > 0 {
		// Bounded by the LSO rather than by the last batch returned
		// (which would need the headers walked): the consumer ignores
		// an entry past what it got.
		out.Aborted = p.log().AbortedTxns(offset, upper)
	}
	return out, nil
}

// Special timestamps of ListOffsets.
const (
	LatestTimestamp        int64 = -1
	EarliestTimestamp      int64 = -2
	MaxTimestamp           int64 = -3 // KIP-734
	EarliestLocalTimestamp int64 = -4 // KIP-405: no tiered storage, so the log start
	LatestTieredTimestamp  int64 = -5 // KIP-1005: nothing is tiered
)

// ListOffset answers ListOffsets for one partition: the offset (and
// timestamp, -1 for the special queries) for timestamp, among the offsets
// a consumer at isolation level iso may read (below the high watermark,
// or the last stable offset: LatestTimestamp answers that bound, as
// Kafka's fetchOffsetForTimestamp does). When no record is at or after
// timestamp the offset is -1. leaderEpoch is the epoch of the batch
// holding the offset.
func (e *Core) ListOffset(tp TP, timestamp int64, iso Isolation) (offset, ts int64, leaderEpoch int32, err error) {
	p, err := e.partition(tp)
	if err != nil {
		return 0, 0, 0, err
	}
	st := p.state()
	upper := st.upper(iso)
	ts = -1
	switch timestamp {
	case LatestTimestamp:
		offset = upper
	case EarliestTimestamp, EarliestLocalTimestamp:
		offset = st.LogStartOffset
	case LatestTieredTimestamp:
		return -1, -1, -1, nil
	case MaxTimestamp:
		var maxTs int64 = -1
		err := p.shard.do(func() error {
			if err := p.offlineErr(); err != nil {
				return err
			}
			maxTs, _ = p.log().MaxTimestamp()
			return nil
		})
		if err != nil {
			return 0, 0, 0, err
		}
		if maxTs < 0 {
			return -1, -1, -1, nil
		}
		// The first record carrying the largest timestamp.
		offset, ts, err = p.log().OffsetForTimestamp(maxTs, upper)
		if errors.Is(err, segment.ErrNotFound) {
			return -1, -1, -1, nil
		}
		if err != nil {
			return 0, 0, 0, storageError(err)
		}
	default:
		if timestamp < 0 {
			return 0, 0, 0, fmt.Errorf("%w: timestamp %d", ErrInvalidRequest, timestamp)
		}
		offset, ts, err = p.log().OffsetForTimestamp(timestamp, upper)
		if errors.Is(err, segment.ErrNotFound) {
			return -1, -1, -1, nil
		}
		if err != nil {
			return 0, 0, 0, storageError(err)
		}
	}
	return offset, ts, p.log().EpochForOffset(offset), nil
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch (KIP-101/KIP-279): the
// largest epoch at most epoch and where it ends.
func (e *Core) EndOffsetForEpoch(tp TP, epoch int32) (int32, int64, error) {
	p, err := e.partition(tp)
	if err != nil {
		return 0, 0, err
	}
	ep, off := p.log().EndOffsetForEpoch(epoch)
	return ep, off, nil
}

// DeleteRecords moves tp's log start offset to offset (-1: the high
// watermark) and returns the new low watermark. offset above the high
// watermark is segment.ErrOutOfRange.
func (e *Core) DeleteRecords(tp TP, offset int64) (int64, error) {
	p, err := e.partition(tp)
	if err != nil {
		return 0, err
	}
	var low int64
	err = p.shard.do(func() error {
		hw := p.hw.Load()
		if offset == -1 {
			offset = hw
		}
		if offset < 0 || offset > hw {
			return fmt.Errorf("%w: delete before %d, high watermark %d", segment.ErrOutOfRange, offset, hw)
		}
		if err := p.offlineErr(); err != nil {
			return err
		}
		var err error
		low, err = p.log().DeleteRecordsBefore(offset)
		p.shard.checkDisk(p, err)
		return storageError(err)
	})
	return low, err
}

// PartitionSize is one partition's size on disk (DescribeLogDirs).
type PartitionSize struct {
	TP   TP
	Size int64
	// Dir is the log directory holding the log, as LogDirs names it.
	Dir string
	// Future marks the copy of a replica moving to Dir (AlterReplicaLogDirs),
	// Lag how far its copy is behind the current log's LEO.
	Future bool
	Lag    int64
}

// Sizes lists every partition's size on disk, with its directory.
func (e *Core) Sizes() []PartitionSize {
	paths := make(map[*logDir]string, len(e.dirs))
	for i, d := range e.LogDirs() {
		paths[e.dirs[i]] = d.Path
	}
	var out []PartitionSize
	for tp, p := range *e.parts.Load() {
		l := p.log()
		if l == nil {
			continue // offline since the start: no log to measure
		}
		out = append(out, PartitionSize{TP: tp, Size: l.Size(), Dir: paths[p.ldir.Load()]})
		if m := p.move.Load(); m != nil {
			out = append(out, PartitionSize{TP: tp, Size: folderSize(m.future), Dir: paths[m.dst], Future: true,
				Lag: max(l.LEO()-m.copiedEnd.Load(), 0)})
		}
	}
	return out
}

// Partitions lists the partitions this broker holds.
func (e *Core) Partitions() []TP {
	var out []TP
	for tp := range *e.parts.Load() {
		out = append(out, tp)
	}
	return out
}

// folderSize sums the sizes of the files in dir (a future log, being
// filled: a file removed meanwhile counts as nothing).
func folderSize(dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, ent := range ents {
		if st, err := ent.Info(); err == nil && st.Mode().IsRegular() {
			n += st.Size()
		}
	}
	return n
}
