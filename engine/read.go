package engine

import (
	"errors"
	"fmt"

	"ringlog/segment"
)

// PartitionState is a partition's offsets as a fetch reports them.
type PartitionState struct {
	HW             int64 // high watermark: consumers read below it
	LSO            int64 // last stable offset (= HW: no transactions yet)
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
	return PartitionState{HW: hw, LSO: hw, LEO: p.log.LEO(), LogStartOffset: p.log.LogStartOffset(),
		LeaderEpoch: p.leaderEpoch.Load(), Role: Role(p.role.Load())}
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
}

// Read returns the regions holding the batches from the one containing
// offset, up to maxBytes (the first batch whole with minOne), below the
// high watermark. An offset below the log start or above the high
// watermark is segment.ErrOutOfRange. Any goroutine may call it; it never
// waits for the shard.
func (e *Core) Read(tp TP, offset, maxBytes int64, minOne bool) (ReadResult, error) {
	p, err := e.partition(tp)
	if err != nil {
		return ReadResult{}, err
	}
	st := p.state()
	if offset > st.HW && offset <= st.LEO {
		// Written but not committed: nothing to read yet, not an error
		// (Kafka answers an empty fetch).
		return ReadResult{ReadResult: &segment.ReadResult{}, State: st}, nil
	}
	res, err := p.log.Read(offset, maxBytes, st.HW, minOne)
	if errors.Is(err, segment.ErrClosed) {
		err = ErrClosed // Close came between the check and the read
	}
	if err != nil {
		return ReadResult{State: st}, err
	}
	return ReadResult{ReadResult: res, State: st}, nil
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
// timestamp, -1 for the special queries) for timestamp. When no record is
// at or after timestamp the offset is -1. leaderEpoch is the epoch of the
// batch holding the offset.
func (e *Core) ListOffset(tp TP, timestamp int64) (offset, ts int64, leaderEpoch int32, err error) {
	p, err := e.partition(tp)
	if err != nil {
		return 0, 0, 0, err
	}
	st := p.state()
	ts = -1
	switch timestamp {
	case LatestTimestamp:
		offset = st.HW
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
			maxTs, _ = p.log.MaxTimestamp()
			return nil
		})
		if err != nil {
			return 0, 0, 0, err
		}
		if maxTs < 0 {
			return -1, -1, -1, nil
		}
		// The first record carrying the largest timestamp.
		offset, ts, err = p.log.OffsetForTimestamp(maxTs, st.HW)
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
		offset, ts, err = p.log.OffsetForTimestamp(timestamp, st.HW)
		if errors.Is(err, segment.ErrNotFound) {
			return -1, -1, -1, nil
		}
		if err != nil {
			return 0, 0, 0, storageError(err)
		}
	}
	return offset, ts, p.log.EpochForOffset(offset), nil
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch (KIP-101/KIP-279): the
// largest epoch at most epoch and where it ends.
func (e *Core) EndOffsetForEpoch(tp TP, epoch int32) (int32, int64, error) {
	p, err := e.partition(tp)
	if err != nil {
		return 0, 0, err
	}
	ep, off := p.log.EndOffsetForEpoch(epoch)
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
		low, err = p.log.DeleteRecordsBefore(offset)
		p.shard.checkDisk(p, err)
		return storageError(err)
	})
	return low, err
}

// PartitionSize is one partition's size on disk (DescribeLogDirs).
type PartitionSize struct {
	TP   TP
	Size int64
}

// Sizes lists every partition's size on disk.
func (e *Core) Sizes() []PartitionSize {
	var out []PartitionSize
	for tp, p := range *e.parts.Load() {
		if p.log == nil {
			continue // offline since the start: no log to measure
		}
		out = append(out, PartitionSize{TP: tp, Size: p.log.Size()})
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
