package controller

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
)

// The quorum's side of the simulation (sim_test.go): reassignments,
// controllers that lag, snapshot, crash and change membership, and the
// invariants checked after every step.

// reassign starts, replaces or cancels a reassignment of tp.
func (s *sim) reassign(tp TopicPartition) error {
	p, _ := s.img.Partition(tp.Topic, tp.Partition)
	if p.Reassigning() && s.rng.IntN(3) == 0 {
		return s.alterReassignments([]Reassignment{{Topic: tp.Topic, Partition: tp.Partition, Cancel: true}}, false)
	}
	brokers := s.img.Brokers()
	s.rng.Shuffle(len(brokers), func(i, j int) { brokers[i], brokers[j] = brokers[j], brokers[i] })
	rf, allowRF := len(p.Replicas)-len(p.RemovingReplicas), s.rng.IntN(5) == 0
	if allowRF {
		rf = 1 + s.rng.IntN(4)
	}
	rf = min(rf, len(brokers))
	target := make([]int32, rf)
	for i := range target {
		target[i] = brokers[i].ID
	}
	return s.alterReassignments([]Reassignment{{Topic: tp.Topic, Partition: tp.Partition, Replicas: target}}, allowRF)
}

// drain moves every replica off broker b (the admin tool's "move
// everything off broker N"): one AlterPartitionReassignments.
func (s *sim) drain(b *simBroker) error {
	var others []int32
	for _, bi := range s.img.Brokers() {
		if bi.ID != b.id {
			others = append(others, bi.ID)
		}
	}
	var rs []Reassignment
	for _, tp := range s.tps {
		p, _ := s.img.Partition(tp.Topic, tp.Partition)
		if !slices.Contains(p.Replicas, b.id) {
			continue
		}
		target := slices.DeleteFunc(slices.Clone(p.Replicas[:len(p.Replicas)-len(p.RemovingReplicas)]), func(r int32) bool { return r == b.id })
		free := slices.DeleteFunc(slices.Clone(others), func(r int32) bool { return slices.Contains(target, r) })
		if len(free) > 0 {
			target = append(target, free[s.rng.IntN(len(free))])
		}
		if len(target) > 0 {
			rs = append(rs, Reassignment{Topic: tp.Topic, Partition: tp.Partition, Replicas: target})
		}
	}
	if len(rs) == 0 {
		return nil
	}
	s.logf("drain %d", b.id)
	return s.alterReassignments(rs, true)
}

// createPartition adds a partition to topic (CreatePartitions), placed
// on live brokers with the replication factor of the topic's partition 0
// (Kafka's rule, even while partition 0 moves), at most 5 per topic.
func (s *sim) createPartition(topic string) error {
	t := s.img.Topic(topic)
	if len(t.Partitions) >= 5 {
		return nil
	}
	live := liveBrokers(s.img)
	s.rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
	rf := len(t.Partitions[0].Replicas)
	if rf > len(live) {
		return nil
	}
	a := make([]int32, rf)
	for i := range a {
		a[i] = live[i].ID
	}
	n := int32(len(t.Partitions))
	res, err := s.propose(&command{typ: cmdCreatePartitions, topic: topic, partitions: n + 1, assignments: [][]int32{a}})
	if err != nil {
		return err
	}
	if res.err != nil {
		return fmt.Errorf("CreatePartitions %s: %w", topic, res.err)
	}
	s.tps = append(s.tps, TopicPartition{topic, n})
	s.logf("partition %s-%d on %v", topic, n, a)
	return nil
}

// alterReassignments proposes rs and records the targets the quorum
// accepted.
func (s *sim) alterReassignments(rs []Reassignment, allowRF bool) error {
	res, err := s.propose(&command{typ: cmdAlterReassignments, reassign: rs, allowRFChange: allowRF})
	if err != nil {
		return err
	}
	if res.err != nil {
		return fmt.Errorf("AlterPartitionReassignments: %w", res.err)
	}
	errs, err := decodeReassignResults(res.payload, len(rs))
	if err != nil {
		return err
	}
	for i, r := range rs {
		s.logf("reassign %s-%d to %v (cancel %v): %v", r.Topic, r.Partition, r.Replicas, r.Cancel, errs[i])
		if errs[i] != nil {
			continue
		}
		tp := TopicPartition{r.Topic, r.Partition}
		if r.Cancel {
			s.stats.cancelled++
			delete(s.targets, tp)
		} else {
			s.stats.reassigned++
			s.targets[tp] = slices.Clone(r.Replicas)
		}
	}
	return nil
}

// ctlApply applies the log to controller c up to index to.
func (s *sim) ctlApply(c *simController, to uint64) error {
	for i := c.img.Index + 1; i <= to; i++ {
		cmd, err := decodeCommand(s.log[i-1])
		if err != nil {
			return fmt.Errorf("controller %d: entry %d: %w", c.id, i, err)
		}
		c.img, _ = apply(c.img, i, cmd)
	}
	if h := sha256.Sum256(encodeImage(c.img)); h != s.hashes[c.img.Index] {
		return fmt.Errorf("controller %d's image at index %d is not the one the log gives", c.id, c.img.Index)
	}
	return nil
}

// ctlCatchUp lets controller c apply part of what it lags by.
func (s *sim) ctlCatchUp(c *simController) error {
	behind := uint64(len(s.log)) - c.img.Index
	if behind == 0 {
		return nil
	}
	return s.ctlApply(c, c.img.Index+1+s.rng.Uint64N(behind))
}

// ctlSnapshot is raft asking controller c for a snapshot of its image.
func (s *sim) ctlSnapshot(c *simController) {
	c.snap, c.snapIndex = encodeImage(c.img), c.img.Index
}

// ctlCrash restarts controller c: its latest snapshot is restored (bytes
// from disk, decoded and checked) and the committed log's tail replayed.
func (s *sim) ctlCrash(c *simController) error {
	s.logf("controller %d restarts from its snapshot at %d", c.id, c.snapIndex)
	c.img = emptyImage()
	s.stats.ctlRestores++
	if c.snap != nil {
		img, err := decodeImage(c.snap)
		if err != nil {
			return fmt.Errorf("controller %d's snapshot: %w", c.id, err)
		}
		c.img = img
	}
	if err := s.ctlApply(c, c.snapIndex); err != nil {
		return err
	}
	return s.ctlApply(c, uint64(len(s.log)))
}

// ctlAddVoter adds a controller (AddRaftVoter): it joins as an observer
// and is sent the snapshot of a member that caught up (raft's
// InstallSnapshot), then the log after it.
func (s *sim) ctlAddVoter() error {
	if len(s.ctls) >= 5 {
		return nil
	}
	from := s.ctls[s.rng.IntN(len(s.ctls))]
	if err := s.ctlApply(from, uint64(len(s.log))); err != nil {
		return err
	}
	s.ctlSnapshot(from)
	c := &simController{id: s.nextCtl, snap: from.snap, snapIndex: from.snapIndex}
	s.nextCtl++
	s.stats.ctlJoins++
	s.ctls = append(s.ctls, c)
	s.logf("controller %d joins from %d's snapshot at %d", c.id, from.id, c.snapIndex)
	return s.ctlCrash(c)
}

// ctlRemoveVoter removes a controller (RemoveRaftVoter), never the last.
func (s *sim) ctlRemoveVoter() {
	if len(s.ctls) > 1 {
		i := s.rng.IntN(len(s.ctls))
		s.logf("controller %d leaves", s.ctls[i].id)
		s.ctls = slices.Delete(s.ctls, i, i+1)
	}
}

// check asserts the simulation's invariants on the committed image and
// the brokers' logs.
func (s *sim) check() error {
	if s.img != s.checked {
		// Each new image once: a snapshot of it restores it exactly.
		enc := encodeImage(s.img)
		back, err := decodeImage(enc)
		if err != nil {
			return fmt.Errorf("snapshot round trip: %w", err)
		}
		if !bytes.Equal(encodeImage(back), enc) {
			return fmt.Errorf("snapshot round trip changed the image")
		}
		s.checked = s.img
	}
	for _, tp := range s.tps {
		p, _ := s.img.Partition(tp.Topic, tp.Partition)
		if err := s.checkPartition(tp, p); err != nil {
			return fmt.Errorf("%s-%d %+v: %w", tp.Topic, tp.Partition, p, err)
		}
	}
	return nil
}

func (s *sim) checkPartition(tp TopicPartition, p Partition) error {
	unclean := s.unclean(tp)
	if p.Leader == -1 {
		candidates := p.ISR
		if unclean {
			candidates = p.Replicas
		}
		for _, r := range candidates {
			if s.img.live(r) {
				return fmt.Errorf("no leader, with replica %d live (ISR %v, unclean election %v)", r, p.ISR, unclean)
			}
		}
	}
	if unclean {
		return s.checkMoving(tp, p)
	}
	// Every ISR member can be elected: each must hold every committed
	// record.
	c := s.committed[tp]
	for _, r := range p.ISR {
		var log []simRec
		if rep := s.brokers[r].parts[tp]; rep != nil {
			log = rep.log
		}
		if len(log) < len(c) || firstDifference(log, c) >= 0 {
			i := firstDifference(log, c)
			if i < 0 {
				i = len(log)
			}
			return fmt.Errorf("ISR member %d lacks committed offset %d (its LEO %d, %d committed)", r, i, len(log), len(c))
		}
	}
	return s.checkMoving(tp, p)
}

// checkMoving checks p against the reassignment the simulation asked for.
func (s *sim) checkMoving(tp TopicPartition, p Partition) error {
	target, moving := s.targets[tp]
	switch {
	case !moving && p.Reassigning():
		return fmt.Errorf("a reassignment nobody asked for")
	case !moving:
	case !p.Reassigning():
		if !slices.Equal(p.Replicas, target) {
			return fmt.Errorf("reassignment to %v completed with replicas %v", target, p.Replicas)
		}
		delete(s.targets, tp)
		s.stats.completed++
	default:
		if len(p.Replicas) < len(target) || !slices.Equal(p.Replicas[:len(target)], target) {
			return fmt.Errorf("moving to %v with replicas %v", target, p.Replicas)
		}
		removing := slices.Sorted(slices.Values(p.Replicas[len(target):]))
		if !slices.Equal(removing, p.RemovingReplicas) {
			return fmt.Errorf("moving to %v: removing %v, replicas %v", target, p.RemovingReplicas, p.Replicas)
		}
		for _, r := range p.AddingReplicas {
			if !slices.Contains(target, r) {
				return fmt.Errorf("moving to %v: adding %d", target, r)
			}
		}
		// The target is not all in sync yet: the move would have
		// completed.
		inSync := true
		for _, r := range target {
			inSync = inSync && slices.Contains(p.ISR, r)
		}
		if inSync {
			return fmt.Errorf("moving to %v with the whole target in the ISR %v", target, p.ISR)
		}
	}
	return nil
}

// checkTransition checks what one command did to each partition: a
// reassignment completes only with its whole target in sync (the ISR is
// then exactly the target), and a leader is always one the quorum could
// elect: a member of the ISR before the command, or of the ISR an
// AlterPartition asked for.
func (s *sim) checkTransition(c *command, res result, before, after *Image) error {
	targets := s.targets
	if c.typ == cmdAlterReassignments {
		errs, err := decodeReassignResults(res.payload, len(c.reassign))
		if err != nil {
			return err
		}
		targets = maps.Clone(s.targets)
		for i, r := range c.reassign {
			if errs[i] != nil {
				continue
			}
			if r.Cancel {
				delete(targets, TopicPartition{r.Topic, r.Partition})
			} else {
				targets[TopicPartition{r.Topic, r.Partition}] = r.Replicas
			}
		}
	}
	for _, tp := range s.tps {
		p0, ok0 := before.Partition(tp.Topic, tp.Partition)
		p1, ok1 := after.Partition(tp.Topic, tp.Partition)
		if !ok0 || !ok1 {
			continue
		}
		target, moving := targets[tp]
		// (A target of the replicas the partition has, all of them even
		// in the middle of a move, moves nothing: it only reorders.)
		if moving && (p0.Reassigning() || c.typ == cmdAlterReassignments) && !p1.Reassigning() && !sameSet(target, p0.Replicas) {
			if !slices.Equal(p1.Replicas, target) || !sameSet(p1.ISR, target) {
				return fmt.Errorf("%v: the move to %v completed with replicas %v, ISR %v (before: ISR %v)", tp, target, p1.Replicas, p1.ISR, p0.ISR)
			}
		}
		elig := p0.ISR
		if c.typ == cmdAlterPartition && c.topic == tp.Topic && c.partitions == tp.Partition {
			elig = c.isr // the change that completed a move, and elected in its ISR
		}
		if p1.Leader != -1 && p1.Leader != p0.Leader && !slices.Contains(elig, p1.Leader) && !s.unclean(tp) {
			return fmt.Errorf("%v: broker %d elected from outside the ISR %v", tp, p1.Leader, p0.ISR)
		}
	}
	return nil
}

func sameSet(a, b []int32) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(r int32) bool { return !slices.Contains(b, r) })
}

// settle brings every broker back and runs the protocol without faults
// until the cluster is quiet; then every partition must have a leader,
// no reassignment may be left and every replica must be in the ISR.
func (s *sim) settle() error {
	s.step = -1
	s.logf("settling")
	for len(s.alters) > 0 {
		if err := s.processAlter(0, false); err != nil {
			return err
		}
	}
	for _, b := range s.brokers {
		if !b.up {
			if err := s.restart(b); err != nil {
				return err
			}
		}
	}
	for round := range 100 {
		for _, b := range s.brokers {
			if err := s.heartbeat(b); err != nil {
				return err
			}
			if err := s.deliver(b); err != nil {
				return err
			}
		}
		for _, tp := range s.tps {
			for _, b := range s.brokers {
				if err := s.fetchN(b, tp, 1<<30); err != nil {
					return err
				}
			}
			for _, b := range s.brokers {
				if err := s.isrCheck(b, tp); err != nil {
					return err
				}
			}
		}
		for len(s.alters) > 0 {
			if err := s.processAlter(0, false); err != nil {
				return err
			}
		}
		if err := s.check(); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		if s.settled() {
			return nil
		}
		s.now = s.now.Add(simLagTimeMax / 10)
	}
	var out []string
	for _, tp := range s.tps {
		p, _ := s.img.Partition(tp.Topic, tp.Partition)
		out = append(out, fmt.Sprintf("%v: %+v", tp, p))
	}
	return fmt.Errorf("the cluster did not settle: %v", out)
}

// settled reports whether every partition has a leader, no reassignment
// and every replica in its ISR.
func (s *sim) settled() bool {
	for _, tp := range s.tps {
		p, _ := s.img.Partition(tp.Topic, tp.Partition)
		if p.Leader == -1 || p.Reassigning() || len(p.ISR) != len(p.Replicas) {
			return false
		}
	}
	return true
}
