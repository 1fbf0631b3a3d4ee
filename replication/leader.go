package replication

import (
	"fmt"
	"slices"
	"time"
)

// maxReplicas bounds the assignment a Leader accepts. Kafka has no such
// limit, but a replication factor is bounded by the brokers of a cluster,
// and a list this long is a sign of a bad record rather than a real one.
const maxReplicas = 128

// Config is the part of a topic's configuration that the leader's
// decisions read.
type Config struct {
	// LagTimeMax is replica.lag.time.max.ms: a follower that has not
	// caught up with the leader's LEO for longer than this leaves the ISR.
	LagTimeMax time.Duration
	// MinISR is min.insync.replicas, below which the HW does not move.
	// The effective value is capped at the replication factor, as Kafka
	// does since 3.7 (KAFKA-15583). (Whether an acks=all produce may be
	// appended is the engine's check, engine/acks, against the same
	// setting, uncapped.)
	MinISR int
}

// DefaultConfig is Kafka's default: replica.lag.time.max.ms 30 s (since
// 2.5, KIP-537) and min.insync.replicas 1.
func DefaultConfig() Config { return Config{LagTimeMax: 30 * time.Second, MinISR: 1} }

// LeaderState is what the controller tells a broker that becomes the
// partition's leader, and what the broker knows of its own log then.
type LeaderState struct {
	// ID is this broker, the leader.
	ID int32
	// LeaderEpoch and PartitionEpoch are the controller's: the first
	// changes with every election, the second with every change of the
	// partition (ISR changes included).
	LeaderEpoch    int32
	PartitionEpoch int32
	// Replicas is the assignment, preferred leader first; ISR is the
	// committed ISR and holds ID.
	Replicas []int32
	ISR      []int32
	// LEO is the leader's log end offset when it takes over; it becomes the
	// start offset of its leader epoch (the caller records the epoch in
	// the log's leader-epoch cache at this offset before appending).
	LEO int64
	// HW is the high watermark this broker had (as a follower, or from its
	// checkpoint). A new leader starts from it and never moves it back.
	HW int64
}

// follower is the leader's view of one other replica.
type follower struct {
	id int32
	// leo is the follower's log end offset, learnt from its fetch offset;
	// -1 until it fetches from this leader.
	leo int64
	// lastFetchLeaderLEO is the leader's LEO when the follower's previous
	// fetch arrived, and lastFetch that fetch's time.
	lastFetchLeaderLEO int64
	lastFetch          time.Time
	// lastCaughtUp is the latest time t such that a fetch of the follower
	// reached the leader's LEO as of t.
	lastCaughtUp time.Time
	// fenced replicas (fenced or shutting down brokers) may not join the
	// ISR and do not hold the HW back unless they are already in it.
	fenced bool
	// brokerEpoch is the registration epoch of the incarnation the state
	// above was learnt from (its fetches carry it, KIP-903); -1 unknown.
	brokerEpoch int64
}

// Leader is one partition's leader-side replication state: the followers'
// LEOs, the ISR (committed and pending) and the HW. The acks=all requests
// waiting for the HW are the engine's (engine/acks).
// It makes every decision Kafka's Partition makes as leader, and performs
// none of them: it reads no clock (time comes in as arguments), sends no
// request and starts no goroutine. The caller serialises all calls.
type Leader struct {
	id             int32
	epoch          int32
	partitionEpoch int32
	// epochStart is the leader epoch start offset: the LEO when this
	// leader took over.
	epochStart int64
	replicas   []int32
	followers  []follower // replicas other than id, in replicas order
	isr        []int32    // committed, in replicas order
	// pending is the ISR change sent to the controller and not yet
	// answered; maximal is the union of isr and pending.ISR, the set the HW
	// is computed over (KIP-497).
	pending *ISRChange
	maximal []int32
	leo, hw int64
	cfg     Config
}

// NewLeader builds the state of a broker that has just become leader at
// time now. Followers' LEOs are unknown until they fetch, so the HW moves
// only once every ISR member has fetched from this leader; followers in
// the ISR are taken as caught up at now, the others as never caught up
// (Kafka's resetReplicaState for a new leader).
func NewLeader(s LeaderState, cfg Config, now time.Time) (*Leader, error) {
	if err := checkAssignment(s.ID, s.Replicas, s.ISR); err != nil {
		return nil, err
	}
	if s.LEO < 0 || s.HW < 0 || s.HW > s.LEO {
		return nil, fmt.Errorf("%w: LEO %d, HW %d", ErrInvalidOffsets, s.LEO, s.HW)
	}
	l := &Leader{
		id:             s.ID,
		epoch:          s.LeaderEpoch,
		partitionEpoch: s.PartitionEpoch,
		epochStart:     s.LEO,
		replicas:       slices.Clone(s.Replicas),
		leo:            s.LEO,
		hw:             s.HW,
		cfg:            cfg,
	}
	l.setISR(s.ISR)
	for _, id := range s.Replicas {
		if id == s.ID {
			continue
		}
		f := follower{id: id, leo: -1, lastFetchLeaderLEO: -1, brokerEpoch: -1}
		if slices.Contains(s.ISR, id) {
			f.lastCaughtUp = now
		}
		l.followers = append(l.followers, f)
	}
	// With an ISR of the leader alone the HW may move at once.
	l.maybeIncrementHW(now)
	return l, nil
}

// checkAssignment validates replicas and an ISR for leader.
func checkAssignment(leader int32, replicas, isr []int32) error {
	if len(replicas) == 0 || len(replicas) > maxReplicas {
		return fmt.Errorf("%w: %d replicas", ErrInvalidAssignment, len(replicas))
	}
	for i, id := range replicas {
		if id < 0 || slices.Contains(replicas[:i], id) {
			return fmt.Errorf("%w: replicas %v", ErrInvalidAssignment, replicas)
		}
	}
	for i, id := range isr {
		if !slices.Contains(replicas, id) || slices.Contains(isr[:i], id) {
			return fmt.Errorf("%w: ISR %v for replicas %v", ErrInvalidAssignment, isr, replicas)
		}
	}
	if !slices.Contains(isr, leader) {
		return fmt.Errorf("%w: ISR %v without the leader %d", ErrInvalidAssignment, isr, leader)
	}
	return nil
}

// inReplicaOrder returns the members of set in the order of replicas, so
// that ISRs compare and print the same whatever order they came in.
func inReplicaOrder(replicas, set []int32) []int32 {
	out := make([]int32, 0, len(set))
	for _, id := range replicas {
		if slices.Contains(set, id) {
			out = append(out, id)
		}
	}
	return out
}

// setISR commits isr and recomputes the maximal ISR.
func (l *Leader) setISR(isr []int32) {
	l.isr = inReplicaOrder(l.replicas, isr)
	l.updateMaximal()
}

func (l *Leader) updateMaximal() {
	if l.pending == nil {
		l.maximal = l.isr
		return
	}
	// The union covers both kinds of change: an expansion counts the new
	// member at once (a stricter HW is always safe), a shrink keeps the
	// leaving member until the controller agrees (a looser HW is not).
	l.maximal = inReplicaOrder(l.replicas, append(slices.Clone(l.isr), l.pending.ISR...))
}

func (l *Leader) follower(id int32) *follower {
	for i := range l.followers {
		if l.followers[i].id == id {
			return &l.followers[i]
		}
	}
	return nil
}

// caughtUp is Kafka's ReplicaState.isCaughtUp: the follower has the
// leader's LEO, or reached the leader's LEO at most LagTimeMax ago.
func (l *Leader) caughtUp(f *follower, now time.Time) bool {
	return f.leo == l.leo || now.Sub(f.lastCaughtUp) <= l.cfg.LagTimeMax
}

// effectiveMinISR is min.insync.replicas capped at the replication factor.
func (l *Leader) effectiveMinISR() int {
	return max(1, min(l.cfg.MinISR, len(l.replicas)))
}

// FollowerFetch records a fetch from follower id at fetchOffset, received
// at now, and reports whether the HW moved. The fetch offset is the
// follower's LEO: it has every offset below it, and (because it truncated
// to the leader's epoch end offset before fetching) with the leader's
// content. The caller must not call it for a fetch whose last fetched
// epoch diverges from this log (see DivergingEpoch): Kafka does not
// update a follower's state from such a fetch either.
//
// lastCaughtUp moves to now when the fetch reaches the leader's LEO, or to
// the previous fetch's time when it reaches the LEO the leader had then:
// a follower fetching steadily behind a stream of small appends is caught
// up as of its previous fetch (KAFKA-4485).
func (l *Leader) FollowerFetch(id int32, fetchOffset int64, now time.Time) (hwMoved bool, err error) {
	f := l.follower(id)
	if f == nil {
		return false, fmt.Errorf("%w: broker %d fetched", ErrNotReplica, id)
	}
	if fetchOffset < 0 || fetchOffset > l.leo {
		return false, fmt.Errorf("%w: broker %d fetched at %d, LEO %d", ErrOffsetOutOfRange, id, fetchOffset, l.leo)
	}
	switch {
	case fetchOffset >= l.leo:
		f.lastCaughtUp = laterOf(f.lastCaughtUp, now)
	case fetchOffset >= f.lastFetchLeaderLEO:
		f.lastCaughtUp = laterOf(f.lastCaughtUp, f.lastFetch)
	}
	f.lastFetchLeaderLEO = max(f.lastFetchLeaderLEO, l.leo)
	f.lastFetch = now
	prev := f.leo
	f.leo = fetchOffset
	if prev == fetchOffset {
		// As Kafka does, the HW is only reconsidered when a LEO moved.
		return false, nil
	}
	return l.maybeIncrementHW(now), nil
}

// BrokerEpoch records that follower id's current incarnation has broker
// epoch epoch (from its fetch, or from the cluster metadata; -1: unknown,
// nothing checked). A newer epoch than the one the leader's view of the
// follower was learnt from means the broker restarted: that view (LEO,
// caught-up times) belonged to a process that is gone, whose log the new
// one may not have (it may have truncated, or lost an unflushed tail), so
// it is forgotten, and the follower starts over as one that has not
// fetched from this leader. Without this a restarted follower could be
// proposed for the ISR on its predecessor's LEO (KIP-903). An older epoch
// than one already seen is a fetch of a dead incarnation still in flight:
// ErrStaleBrokerEpoch, and the caller must not record that fetch.
func (l *Leader) BrokerEpoch(id int32, epoch int64) error {
	f := l.follower(id)
	if f == nil {
		return fmt.Errorf("%w: broker %d", ErrNotReplica, id)
	}
	switch {
	case epoch < 0 || epoch == f.brokerEpoch:
		return nil
	case epoch < f.brokerEpoch:
		return fmt.Errorf("%w: broker %d at epoch %d, fetch from epoch %d", ErrStaleBrokerEpoch, id, f.brokerEpoch, epoch)
	}
	if f.brokerEpoch >= 0 {
		*f = follower{id: id, leo: -1, lastFetchLeaderLEO: -1, fenced: f.fenced}
	}
	f.brokerEpoch = epoch
	return nil
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// LeaderAppended records that the leader's log grew to leo at now, and
// reports whether the HW moved (it can, when the ISR is the leader alone).
func (l *Leader) LeaderAppended(leo int64, now time.Time) (hwMoved bool, err error) {
	if leo < l.leo {
		return false, fmt.Errorf("%w: leader LEO %d going back to %d", ErrInvalidOffsets, l.leo, leo)
	}
	l.leo = leo
	return l.maybeIncrementHW(now), nil
}

// MaybeIncrementHW reconsiders the HW at now without any new fetch or
// append, and reports whether it moved: a follower outside the ISR that
// held the HW back stops doing so once it has lagged for LagTimeMax.
// Kafka only reconsiders on events; calling this from the periodic ISR
// check is optional and never unsafe.
func (l *Leader) MaybeIncrementHW(now time.Time) bool { return l.maybeIncrementHW(now) }

// maybeIncrementHW is Kafka's maybeIncrementLeaderHW. The HW is the
// smallest LEO among the leader, the maximal ISR, and the followers that
// are caught up and eligible to join the ISR: waiting for those lets a
// follower chasing a single-member ISR ever reach the HW. It moves only
// forward, and not at all while the committed ISR is below the effective
// min.insync.replicas (KAFKA-15583), so that what consumers see was always
// on that many replicas.
func (l *Leader) maybeIncrementHW(now time.Time) bool {
	if len(l.isr) < l.effectiveMinISR() {
		return false
	}
	hw := l.leo
	for i := range l.followers {
		f := &l.followers[i]
		if f.leo >= hw {
			continue
		}
		if slices.Contains(l.maximal, f.id) || (!f.fenced && l.caughtUp(f, now)) {
			hw = f.leo
		}
	}
	if hw <= l.hw {
		return false
	}
	l.hw = hw
	return true
}

// SetFenced marks follower id as fenced or in controlled shutdown (or no
// longer so), as the cluster metadata says: such a replica may not join
// the ISR, and outside the ISR it does not hold the HW back (KAFKA-15021).
func (l *Leader) SetFenced(id int32, fenced bool) error {
	f := l.follower(id)
	if f == nil {
		return fmt.Errorf("%w: broker %d", ErrNotReplica, id)
	}
	f.fenced = fenced
	return nil
}

// SetConfig changes the topic configuration; it applies from the next
// decision on.
func (l *Leader) SetConfig(cfg Config) { l.cfg = cfg }

// HW is the high watermark: consumers read below it.
func (l *Leader) HW() int64 { return l.hw }

// LEO is the leader's log end offset as last reported.
func (l *Leader) LEO() int64 { return l.leo }

// ID is this broker.
func (l *Leader) ID() int32 { return l.id }

// LeaderEpoch is this leader's epoch.
func (l *Leader) LeaderEpoch() int32 { return l.epoch }

// PartitionEpoch is the partition epoch of the committed state.
func (l *Leader) PartitionEpoch() int32 { return l.partitionEpoch }

// EpochStartOffset is the offset where this leader's epoch began.
func (l *Leader) EpochStartOffset() int64 { return l.epochStart }

// Replicas is the assignment, in preferred order.
func (l *Leader) Replicas() []int32 { return slices.Clone(l.replicas) }

// ISR is the committed ISR, in replicas order.
func (l *Leader) ISR() []int32 { return slices.Clone(l.isr) }

// MaximalISR is the committed ISR together with the members of a pending
// change (KIP-497): the set the HW is computed over. acks=all checks the
// committed ISR (ISR) instead.
func (l *Leader) MaximalISR() []int32 { return slices.Clone(l.maximal) }

// FollowerLEO is the leader's view of follower id's LEO, -1 until it has
// fetched from this leader; ok is false when id is not a follower.
func (l *Leader) FollowerLEO(id int32) (leo int64, ok bool) {
	if f := l.follower(id); f != nil {
		return f.leo, true
	}
	return -1, false
}
