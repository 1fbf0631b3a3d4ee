package engine

import (
	"fmt"
	"math"
	"slices"

	"ringlog/engine/acks"
)

// The engine's side of replication. The engine leaves three decisions to
// the replication layer above it (Config.OnAppended; without one, every
// partition leads itself alone in its ISR and its high watermark follows
// its LEO): which role each
// partition has (BecomeLeader, BecomeFollower), where its high watermark is
// (SetHW: min LEO over the ISR on a leader, the leader's HW capped by the
// local LEO on a follower), and how many replicas are in sync (SetISR, for
// acks=all). The engine keeps the log consistent with those decisions: only
// a leader takes producer appends and stamps them with its epoch, only a
// follower takes its leader's batches (AppendReplica, replica.go), and an
// acks=all append is answered once the high watermark covers it.

// Role is a partition's part in replication.
type Role int32

const (
	// RoleNone is a partition that the replication layer has not given a
	// role yet (after a start or its creation): it takes no appends of
	// either kind.
	RoleNone Role = iota
	// RoleLeader takes producer appends. Every partition of an engine
	// without a replication layer is a leader.
	RoleLeader
	// RoleFollower takes its leader's batches (AppendReplica).
	RoleFollower
)

func (r Role) String() string {
	switch r {
	case RoleNone:
		return "none"
	case RoleLeader:
		return "leader"
	case RoleFollower:
		return "follower"
	}
	return fmt.Sprintf("Role(%d)", int32(r))
}

// pendingAck is an acks=all append that a leader wrote and that waits in
// its partition's acks.Queue for the high watermark: what to answer, and
// to whom.
type pendingAck struct {
	res  AppendResult
	done func(AppendResult, error)
}

// replicated returns tp's partition for a call of the replication layer.
func (e *Core) replicated(tp TP) (*partition, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	return e.partition(tp)
}

// callSync runs fn on p's shard, between two rounds, and returns its
// error, or ErrClosed when the engine stopped (fn then did not run), or
// ErrUnknownTopicOrPartition when p was deleted. It waits for the shard,
// so it must not be called from a shard goroutine.
func (p *partition) callSync(fn func() error) error {
	return p.shard.do(func() error {
		if p.deleted.Load() {
			return unknownPartition(p.tp)
		}
		if err := p.offlineErr(); err != nil {
			return err
		}
		err := fn()
		p.shard.checkDisk(p, err)
		return err
	})
}

// BecomeLeader makes this broker tp's leader at leaderEpoch: the epoch is
// recorded in the leader-epoch checkpoint as starting at the current LEO
// (KIP-101), later producer batches are stamped with it, and producer
// appends are accepted from now on. An epoch below the partition's (the
// epoch of its current role, or the latest in its log) is ErrStaleEpoch;
// the same epoch again is accepted. The in-sync replica count starts at 1
// when the partition was not a leader: call SetISR after. It runs on tp's
// shard and waits for it, so it must not be called from a shard goroutine
// (a done callback, OnAppended, an OnShard function).
func (e *Core) BecomeLeader(tp TP, leaderEpoch int32) error {
	p, err := e.replicated(tp)
	if err != nil {
		return err
	}
	return p.callSync(func() error {
		if err := p.checkEpoch(leaderEpoch); err != nil {
			return err
		}
		if err := p.log().AssignEpoch(leaderEpoch, p.log().LEO()); err != nil {
			return storageError(err)
		}
		p.leaderEpoch.Store(leaderEpoch)
		if Role(p.role.Load()) != RoleLeader {
			e.resetISR(p)
		}
		p.role.Store(int32(RoleLeader))
		return nil
	})
}

// BecomeFollower makes this broker a follower of tp at leaderEpoch:
// producer appends fail with ErrNotLeader from now on (those queued too),
// acks=all appends still waiting for the high watermark fail with
// ErrNotLeader (their records may yet be committed or truncated: the
// producer retries against the new leader, which deduplicates an
// idempotent retry), and AppendReplica is accepted. An epoch below the
// partition's is ErrStaleEpoch. Same goroutine rules as BecomeLeader.
func (e *Core) BecomeFollower(tp TP, leaderEpoch int32) error {
	p, err := e.replicated(tp)
	if err != nil {
		return err
	}
	return p.callSync(func() error {
		if err := p.checkEpoch(leaderEpoch); err != nil {
			return err
		}
		p.leaderEpoch.Store(leaderEpoch)
		p.role.Store(int32(RoleFollower))
		p.failAcks(-1, fmt.Errorf("%w: %s-%d became a follower at epoch %d", ErrNotLeader, p.tp.Topic, p.tp.Partition, leaderEpoch))
		return nil
	})
}

// checkEpoch refuses an epoch older than the partition's role epoch or
// than the latest epoch its log holds: a leader must never stamp batches
// with an epoch below ones already in its log (shard only).
func (p *partition) checkEpoch(epoch int32) error {
	if epoch < 0 {
		return fmt.Errorf("%w: leader epoch %d", ErrInvalidRequest, epoch)
	}
	cur := p.leaderEpoch.Load()
	if eps := p.log().Epochs(); len(eps) > 0 {
		cur = max(cur, eps[len(eps)-1].Epoch)
	}
	if epoch < cur {
		return fmt.Errorf("%w: %s-%d epoch %d, current %d", ErrStaleEpoch, p.tp.Topic, p.tp.Partition, epoch, cur)
	}
	return nil
}

// SetHW moves tp's high watermark to hw, capped at the LEO; a value at or
// below the current high watermark changes nothing (only a truncation
// lowers it). Waiters are woken and acks=all appends that hw covers are
// answered (on the shard). It does not wait for the shard: any goroutine
// may call it, OnAppended included.
func (e *Core) SetHW(tp TP, hw int64) error {
	p, err := e.replicated(tp)
	if err != nil {
		return err
	}
	p.setHW(hw)
	return nil
}

func (p *partition) setHW(hw int64) {
	p.hwMu.Lock()
	// The LEO only goes down by a truncation, which holds hwMu: read
	// here, it bounds the LEO until the store below.
	hw = min(hw, p.log().LEO())
	moved := hw > p.hw.Load()
	if moved {
		p.hw.Store(hw)
	}
	p.hwMu.Unlock()
	if !moved {
		return
	}
	p.notify()
	// Either this load sees an ack the shard just parked, or the shard,
	// which parks before it loads hw, sees the new hw (parkAck).
	if acks.Covered(p.acksMin.Load(), hw) && p.acksDue.CompareAndSwap(false, true) {
		p.shard.acksDue(p)
	}
}

// SetISR sets the number of in-sync replicas of tp, the leader included,
// and of its replicas: an acks=all append needs the in-sync ones to be at
// least the topic's min.insync.replicas capped at the replica count
// (ErrNotEnoughReplicas otherwise, as Kafka answers; engine/acks.Enough).
// Any goroutine may call it.
func (e *Core) SetISR(tp TP, inSync, replicas int32) error {
	p, err := e.replicated(tp)
	if err != nil {
		return err
	}
	if inSync < 1 || replicas < inSync {
		return fmt.Errorf("%w: %d in-sync replicas of %d", ErrInvalidRequest, inSync, replicas)
	}
	// Two stores, not one: an append between them sees the ISR of one
	// assignment and the replica count of the other, both values the
	// controller committed; the replica count changes only with a
	// reassignment (KIP-455), and either pair is a state the controller
	// went through.
	p.replicas.Store(replicas)
	p.isr.Store(inSync)
	return nil
}

// resetISR sets p's in-sync replicas to the leader alone. Without a
// replication layer the leader is the only replica; with one, the replica
// count is unknown until SetISR tells it, and an unknown count caps
// nothing: min.insync.replicas then holds in full, so that a new leader
// refuses an acks=all produce it cannot yet vouch for rather than take it.
func (e *Core) resetISR(p *partition) {
	p.isr.Store(1)
	if e.cfg.OnAppended == nil {
		p.replicas.Store(1)
	} else {
		p.replicas.Store(math.MaxInt32)
	}
}

// parkAck keeps an acks=all answer until the high watermark covers end,
// the offset after the append's last record (shard only). The rule (when
// an append is covered, which ones a truncation fails) is engine/acks's,
// which the simulation of replication runs too; this is its wiring to the
// shard and to SetHW on other goroutines.
func (p *partition) parkAck(end int64, a pendingAck) {
	if acks.Covered(end, p.hw.Load()) {
		a.done(a.res, nil)
		return
	}
	p.acks.Park(end, a)
	p.acksMin.Store(p.acks.Min())
	if acks.Covered(end, p.hw.Load()) {
		// SetHW moved past end between the two loads and may have missed
		// the ack; answering now is safe, a later due mark finds nothing.
		p.answerAcks()
	}
}

// answerAcks answers the pending acks the high watermark covers (shard
// only).
func (p *partition) answerAcks() {
	due := p.acks.Due(p.hw.Load())
	p.acksMin.Store(p.acks.Min())
	// Callbacks last: one may append again (AppendOnShard), which must
	// find the queue consistent.
	for _, a := range due {
		a.done(a.res, nil)
	}
}

// failAcks fails the pending acks whose end is above from (-1: all) with
// err (shard only).
func (p *partition) failAcks(from int64, err error) {
	failed := p.acks.Fail(from)
	p.acksMin.Store(p.acks.Min())
	for _, a := range failed {
		a.done(AppendResult{}, err)
	}
}

// acksDue puts p on the list of partitions whose pending acks the high
// watermark reached, and wakes the shard without blocking: a full inbox
// means the shard has requests to take, after which it looks at the list
// anyway.
func (s *shard) acksDue(p *partition) {
	s.dueMu.Lock()
	s.due = append(s.due, p)
	s.dueMu.Unlock()
	select {
	case s.inbox <- shardMsg{}:
		s.wake()
	default:
	}
}

// answerDue answers the pending acks of the partitions on the due list
// (shard only).
func (s *shard) answerDue() {
	s.dueMu.Lock()
	due := slices.Clone(s.due)
	clear(s.due)
	s.due = s.due[:0]
	s.dueMu.Unlock()
	for _, p := range due {
		p.acksDue.Store(false)
		p.answerAcks()
	}
}
