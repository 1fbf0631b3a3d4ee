package controller

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"ringlog/replication"
)

// The brokers of the simulation (sim_test.go): each applies its view of
// the image as replication/node does (node.go's applyPartition,
// becomeLeader, leaderUpdate, setFenced; leader.go's FollowerFetch and
// alterPartition), with replication.Leader making every leader's
// decision.

func (s *sim) replica(b *simBroker, tp TopicPartition) *simReplica {
	r := b.parts[tp]
	if r == nil {
		r = &simReplica{partitionEpoch: -1}
		b.parts[tp] = r
	}
	return r
}

// heartbeat is a live broker's heartbeat: an incarnation the quorum does
// not know (new, restarted, or unregistered meanwhile) registers, a
// fenced one is unfenced.
func (s *sim) heartbeat(b *simBroker) error {
	bi, ok := s.img.Broker(b.id)
	switch {
	case !ok || bi.Epoch != b.epoch:
		res, err := s.propose(&command{typ: cmdRegisterBroker, brokerID: b.id, addr: "h:" + strconv.Itoa(int(b.id))})
		if err != nil {
			return err
		}
		if res.err != nil {
			return fmt.Errorf("register broker %d: %w", b.id, res.err)
		}
		b.epoch = int64(len(s.log))
		return s.deliver(b)
	case bi.Fenced:
		_, err := s.propose(&command{typ: cmdUnfenceBroker, brokerID: b.id, epoch: b.epoch})
		return err
	}
	return nil
}

// deliver brings broker b the current image.
func (s *sim) deliver(b *simBroker) error {
	img := s.img
	b.view = img
	for _, tp := range s.tps {
		p, ok := img.Partition(tp.Topic, tp.Partition)
		if !ok {
			continue
		}
		if !slices.Contains(p.Replicas, b.id) {
			// No longer a replica: it stops and empties its log
			// (Kafka's StopReplica with delete).
			delete(b.parts, tp)
			continue
		}
		r := s.replica(b, tp)
		epochChanged := r.partitionEpoch != p.PartitionEpoch
		r.partitionEpoch = p.PartitionEpoch
		if p.Leader != b.id {
			r.leader = nil
			continue
		}
		if r.leader != nil && r.leader.LeaderEpoch() == p.LeaderEpoch {
			if epochChanged {
				_, err := r.leader.UpdateISR(replication.PartitionState{LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
					ISR: p.ISR, Replicas: p.Replicas}, s.now)
				if err != nil && !errors.Is(err, replication.ErrStale) {
					return fmt.Errorf("broker %d: UpdateISR %v: %w", b.id, tp, err)
				}
			}
		} else {
			l, err := replication.NewLeader(replication.LeaderState{ID: b.id, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch,
				Replicas: p.Replicas, ISR: p.ISR, LEO: int64(len(r.log)), HW: min(r.hw, int64(len(r.log)))}, s.topicConfig(img, tp.Topic), s.now)
			if err != nil {
				return fmt.Errorf("broker %d: NewLeader %v: %w", b.id, tp, err)
			}
			l.MaybeIncrementHW(s.now)
			r.leader = l
			s.stats.leaderships++
			s.logf("broker %d leads %v at epoch %d: LEO %d HW %d ISR %v", b.id, tp, p.LeaderEpoch, len(r.log), l.HW(), p.ISR)
		}
		for _, f := range p.Replicas {
			if f == b.id {
				continue
			}
			fi, ok := img.Broker(f)
			_ = r.leader.SetFenced(f, !ok || fi.Fenced)
			if ok {
				_ = r.leader.BrokerEpoch(f, fi.Epoch)
			}
		}
		if err := s.acked(b, tp); err != nil {
			return err
		}
	}
	return nil
}

func (s *sim) topicConfig(img *Image, topic string) replication.Config {
	cfg := replication.Config{LagTimeMax: simLagTimeMax, MinISR: 1}
	if t := img.Topic(topic); t != nil {
		if n, err := strconv.Atoi(t.Configs["min.insync.replicas"]); err == nil {
			cfg.MinISR = n
		}
	}
	return cfg
}

// acked records what b's HW of tp covers as committed (an acks=all
// producer has its answer), after checking that it agrees with what was
// committed before: a HW over a log that differs from it has lost a
// committed record.
func (s *sim) acked(b *simBroker, tp TopicPartition) error {
	r := b.parts[tp]
	hw := r.leader.HW()
	if hw > int64(len(r.log)) {
		return fmt.Errorf("broker %d's HW %d of %v is above its LEO %d", b.id, hw, tp, len(r.log))
	}
	r.hw = hw
	if s.unclean(tp) {
		return nil // an unclean election may lose what was committed
	}
	c := s.committed[tp]
	if i := firstDifference(c, r.log[:hw]); i >= 0 {
		return fmt.Errorf("committed offset %d of %v lost: broker %d leads at epoch %d with HW %d over %v there, committed %v",
			i, tp, b.id, r.leader.LeaderEpoch(), hw, r.log[i], c[i])
	}
	if hw > int64(len(c)) {
		s.committed[tp] = slices.Clone(r.log[:hw])
	}
	return nil
}

// firstDifference is the first offset below both lengths where a and b
// differ, -1 when one is a prefix of the other.
func firstDifference(a, b []simRec) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// produce appends records on a broker that believes it leads tp (a
// deposed leader that has not heard does too, as in Kafka).
func (s *sim) produce(b *simBroker, tp TopicPartition) error {
	r := b.parts[tp]
	if !b.up || r == nil || r.leader == nil {
		return nil
	}
	for range 1 + s.rng.IntN(3) {
		s.nextRec++
		r.log = append(r.log, simRec{epoch: r.leader.LeaderEpoch(), id: s.nextRec})
		s.stats.produced++
	}
	if _, err := r.leader.LeaderAppended(int64(len(r.log)), s.now); err != nil {
		return err
	}
	s.logf("produce on %d %v epoch %d: LEO %d HW %d", b.id, tp, r.leader.LeaderEpoch(), len(r.log), r.leader.HW())
	return s.acked(b, tp)
}

// fetch is one fetch of follower f of tp from the leader its view names,
// refused as node.FollowerFetch refuses it. A follower truncates to the
// longest prefix its log shares with the leader's before it fetches:
// what the epoch walk (KIP-101, KIP-279; replication's truncate.go and
// its simulation) arrives at.
func (s *sim) fetch(f *simBroker, tp TopicPartition) error {
	return s.fetchN(f, tp, 1+s.rng.IntN(4))
}

func (s *sim) fetchN(f *simBroker, tp TopicPartition, n int) error {
	if !f.up || f.view == nil {
		return nil
	}
	p, ok := f.view.Partition(tp.Topic, tp.Partition)
	if !ok || p.Leader < 0 || p.Leader == f.id || !slices.Contains(p.Replicas, f.id) {
		return nil
	}
	lb := s.brokers[p.Leader]
	lr := lb.parts[tp]
	if !lb.up || lr == nil || lr.leader == nil || lr.leader.LeaderEpoch() != p.LeaderEpoch {
		return nil // NOT_LEADER, FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH
	}
	if fi, ok := lb.view.Broker(f.id); ok && f.epoch > fi.Epoch {
		return nil // an epoch above what the leader's image registered
	}
	l := lr.leader
	if err := l.BrokerEpoch(f.id, f.epoch); err != nil {
		return nil // not a replica in the leader's view, or a stale incarnation
	}
	r := s.replica(f, tp)
	keep := firstDifference(r.log, lr.log)
	if keep < 0 {
		keep = min(len(r.log), len(lr.log))
	}
	if keep < len(r.log) {
		s.logf("broker %d truncates %v from %d to %d", f.id, tp, len(r.log), keep)
		r.log = r.log[:keep]
		s.stats.truncations++
		r.hw = min(r.hw, int64(keep))
	}
	if _, err := l.FollowerFetch(f.id, int64(len(r.log)), s.now); err != nil {
		if errors.Is(err, replication.ErrNotReplica) {
			return nil
		}
		return fmt.Errorf("broker %d fetching %v from %d: %w", f.id, tp, lb.id, err)
	}
	if err := s.acked(lb, tp); err != nil {
		return err
	}
	end := min(len(lr.log), len(r.log)+n)
	r.log = append(r.log, lr.log[len(r.log):end]...)
	r.hw = max(r.hw, min(l.HW(), int64(len(r.log))))
	s.logf("fetch by %d of %v from %d: LEO %d HW %d (leader LEO %d HW %d)", f.id, tp, lb.id, len(r.log), r.hw, len(lr.log), l.HW())
	return nil
}

// isrCheck is a leader's periodic ISR check (node.checkISRs): one
// proposal in flight at a time, a shrink before an expansion.
func (s *sim) isrCheck(b *simBroker, tp TopicPartition) error {
	r := b.parts[tp]
	if !b.up || r == nil || r.leader == nil {
		return nil
	}
	l := r.leader
	l.MaybeIncrementHW(s.now)
	if err := s.acked(b, tp); err != nil {
		return err
	}
	c, ok := l.Pending()
	if ok {
		// Sent again only when it got no answer (AlterUnknown).
		ok = s.resend[l] && !slices.ContainsFunc(s.alters, func(a simAlter) bool { return a.leader == l && !a.dup })
	} else {
		c, ok = l.ShrinkProposal(s.now)
		if !ok {
			c, ok = l.ExpandProposal()
		}
		ok = ok && l.ProposalSent(c) == nil
	}
	if !ok {
		return nil
	}
	delete(s.resend, l)
	s.logf("broker %d proposes ISR %v for %v at epochs %d/%d", b.id, c.ISR, tp, c.LeaderEpoch, c.PartitionEpoch)
	s.alters = append(s.alters, simAlter{broker: b.id, epoch: b.epoch, tp: tp, change: c, leader: l})
	return nil
}

// processAlter lets the quorum apply AlterPartition i; when lossy, the
// sender may never hear the answer (it times out and drops its proposal,
// as node.alterPartition does on an error).
func (s *sim) processAlter(i int, lossy bool) error {
	a := s.alters[i]
	s.alters = slices.Delete(s.alters, i, i+1)
	if lossy && !a.dup && s.rng.IntN(5) == 0 {
		// A copy arrives again later: submit sends a forward again when
		// its connection broke after the request went out.
		dup := a
		dup.dup = true
		s.alters = append(s.alters, dup)
	}
	res, err := s.propose(a.command())
	if err != nil {
		return err
	}
	if res.err != nil {
		s.stats.altersRefused++
	} else {
		s.stats.altersApplied++
	}
	b := s.brokers[a.broker]
	r := b.parts[a.tp]
	if a.dup || !b.up || r == nil || r.leader != a.leader {
		return nil // a copy nobody waits for, or deposed meanwhile
	}
	err = res.err
	if err == nil && lossy && s.rng.IntN(4) == 0 {
		// Applied, but the answer came after the sender's deadline.
		err = ErrRequestTimedOut
		s.logf("answer to %d for %v lost: %v", a.broker, a.tp, a.change.ISR)
	}
	if err != nil {
		s.alterFailed(a, err)
		return nil
	}
	p := decodePartition(&decoder{b: res.payload}, snapshotVersion)
	if _, err := a.leader.ISRCommitted(a.change, replication.PartitionState{LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: p.ISR}, s.now); err == nil {
		return s.acked(b, a.tp)
	}
	return nil
}

func (a simAlter) command() *command {
	return &command{typ: cmdAlterPartition, topic: a.tp.Topic, partitions: a.tp.Partition, brokerID: a.broker, epoch: a.epoch,
		leaderEpoch: a.change.LeaderEpoch, partitionEpoch: a.change.PartitionEpoch, isr: a.change.ISR, isrEpochs: a.change.Epochs}
}

// dropAlter loses AlterPartition i before it reaches the quorum: the
// sender times out.
func (s *sim) dropAlter(i int) {
	a := s.alters[i]
	s.alters = slices.Delete(s.alters, i, i+1)
	s.logf("alter of %d for %v lost", a.broker, a.tp)
	if r := s.brokers[a.broker].parts[a.tp]; s.brokers[a.broker].up && r != nil && r.leader == a.leader {
		s.alterFailed(a, ErrRequestTimedOut)
	}
}

// alterFailed is node.alterPartition's handling of an error.
func (s *sim) alterFailed(a simAlter, err error) {
	switch AlterPartitionOutcome(err) {
	case AlterRefused:
		_ = a.leader.ISRRejected(a.change)
	case AlterUnknown:
		s.resend[a.leader] = true
	}
}

// crash stops broker b's process: its logs stay (flushed), its view and
// leader states go; its AlterPartitions in flight may still arrive.
func (s *sim) crash(b *simBroker) {
	s.logf("crash %d", b.id)
	b.up, b.view = false, nil
	for _, r := range b.parts {
		r.leader = nil
		r.partitionEpoch = -1
	}
}

// restart starts broker b's process again: a new incarnation, which
// registers before it serves.
func (s *sim) restart(b *simBroker) error {
	s.logf("restart %d", b.id)
	b.up, b.epoch = true, 0
	return s.heartbeat(b)
}

// fence is the quorum fencing broker b when its session expires: always
// for a dead process, sometimes for a live one (heartbeats lost).
func (s *sim) fence(b *simBroker) error {
	bi, ok := s.img.Broker(b.id)
	if !ok || bi.Fenced || b.up && s.rng.IntN(3) > 0 {
		return nil
	}
	s.stats.fenced++
	_, err := s.propose(&command{typ: cmdFenceBroker, brokerID: b.id, epoch: bi.Epoch})
	return err
}

// unregister is UnregisterBroker for b; the state machine refuses it
// while b is a replica. A broker unregistered is often retired (stopped,
// its disks wiped); one that runs on registers again at its next
// heartbeat.
func (s *sim) unregister(b *simBroker) error {
	if s.rng.IntN(2) == 0 {
		// Mostly a broker that was drained: one that is no replica.
		if idle := s.pickBroker(func(b *simBroker) bool {
			_, ok := s.img.Broker(b.id)
			return ok && !s.isReplica(b.id)
		}); idle != nil {
			b = idle
		}
	}
	if _, ok := s.img.Broker(b.id); !ok {
		return nil
	}
	res, err := s.propose(&command{typ: cmdUnregisterBroker, brokerID: b.id})
	if err != nil || res.err != nil {
		return err
	}
	s.stats.unregistered++
	if s.rng.IntN(2) == 0 {
		s.logf("retire %d", b.id)
		s.crash(b)
		b.epoch = 0
		clear(b.parts)
	}
	return nil
}

// isReplica reports whether broker id is a replica of any partition.
func (s *sim) isReplica(id int32) bool {
	for _, tp := range s.tps {
		if p, _ := s.img.Partition(tp.Topic, tp.Partition); slices.Contains(p.Replicas, id) {
			return true
		}
	}
	return false
}

// unclean reports whether tp's topic enables unclean leader election.
func (s *sim) unclean(tp TopicPartition) bool {
	t := s.img.Topic(tp.Topic)
	return t != nil && uncleanEnabled(t)
}
