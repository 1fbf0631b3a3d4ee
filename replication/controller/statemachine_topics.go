package controller

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// createTopic adds a topic with the id and assignments the leader chose.
// The ISR of each partition is its live replicas, the leader the first of
// them. A validateOnly command changes nothing (the leader runs the same
// function to validate). Payload: the topic as encodeTopic writes it.
func (t *tx) createTopic(c *command) result {
	if err := validateTopicName(c.topic); err != nil {
		return result{err: err}
	}
	if t.topic(c.topic) != nil {
		return result{err: errf(ErrTopicExists, "topic %q", c.topic)}
	}
	// Kafka refuses names that differ only by '.' versus '_': they collide
	// in metric names.
	norm := strings.ReplaceAll(c.topic, ".", "_")
	for other := range t.topicMap() {
		if strings.ReplaceAll(other, ".", "_") == norm {
			return result{err: errf(ErrInvalidTopic, "%q collides with existing topic %q", c.topic, other)}
		}
	}
	if c.topicID == (TopicID{}) {
		return result{err: errf(ErrInvalidRequest, "topic %q has no id", c.topic)}
	}
	if t.base.TopicByID(c.topicID) != nil {
		return result{err: errf(ErrInvalidRequest, "topic id %s is taken", c.topicID)}
	}
	if err := validateConfigs(c.configs, nil); err != nil {
		return result{err: err}
	}
	if len(c.assignments) == 0 {
		return result{err: errf(ErrInvalidReplicaAssignment, "topic %q has no assignment", c.topic)}
	}
	parts, err := t.newPartitions(c.assignments, len(c.assignments[0]), 0)
	if err != nil {
		return result{err: err}
	}
	if err := t.checkMaxTotal(c.maxTotal, len(parts)); err != nil {
		return result{err: err}
	}
	tp := &Topic{Name: c.topic, ID: c.topicID, Configs: c.configs, Partitions: parts}
	if tp.Configs == nil {
		tp.Configs = map[string]string{}
	}
	e := &encoder{}
	encodeTopic(e, tp)
	if !c.validateOnly {
		t.putTopic(tp)
	}
	return result{payload: e.b}
}

// newPartitions builds the initial state of partitions first, first+1, ...
// from their assignments, all of replication factor rf.
func (t *tx) newPartitions(as [][]int32, rf int, first int) ([]Partition, error) {
	if first+len(as) > maxPartitions {
		return nil, errf(ErrInvalidPartitions, "%d partitions, at most %d", first+len(as), maxPartitions)
	}
	parts := make([]Partition, len(as))
	for i, a := range as {
		if len(a) == 0 {
			return nil, errf(ErrInvalidReplicaAssignment, "The manual partition assignment includes an empty replica list (partition %d).", first+i)
		}
		if len(a) > maxReplicas {
			return nil, errf(ErrInvalidReplicaAssignment, "partition %d has %d replicas, at most %d", first+i, len(a), maxReplicas)
		}
		if len(a) != rf {
			return nil, errf(ErrInvalidReplicaAssignment,
				"partition %d has %d replicas, the others %d", first+i, len(a), rf)
		}
		if hasDuplicates(a) {
			return nil, errf(ErrInvalidReplicaAssignment, "The manual partition assignment includes a broker more than once (partition %d: %v).", first+i, a)
		}
		var isr []int32
		for _, r := range a {
			b, ok := t.broker(r)
			if !ok {
				return nil, errf(ErrInvalidReplicaAssignment, "The manual partition assignment includes broker %d, but no such broker is registered (partition %d).", r, first+i)
			}
			if !b.Fenced {
				isr = append(isr, r)
			}
		}
		if len(isr) == 0 {
			return nil, errf(ErrInvalidReplicaAssignment, "partition %d: every replica in %v is fenced", first+i, a)
		}
		parts[i] = Partition{Replicas: slices.Clone(a), ISR: isr, Leader: isr[0]}
	}
	return parts, nil
}

// checkMaxTotal refuses n more partitions when the cluster would then hold
// more than maxTotal (0: no bound). Every broker holds every partition of
// the cluster (replication/node), so the cluster's count is each broker's.
func (t *tx) checkMaxTotal(maxTotal int32, n int) error {
	if maxTotal <= 0 {
		return nil
	}
	have := 0
	for _, tp := range t.topicMap() {
		have += len(tp.Partitions)
	}
	if have+n > int(maxTotal) {
		return errf(ErrPolicyViolation, "Unable to add %d partitions: the brokers hold %d, and ringlog.max.partitions is %d", n, have, maxTotal)
	}
	return nil
}

func (t *tx) deleteTopicCmd(c *command) result {
	if t.topic(c.topic) == nil {
		return result{err: errf(ErrUnknownTopicOrPartition, "topic %q", c.topic)}
	}
	t.deleteTopic(c.topic)
	return result{}
}

// createPartitions grows a topic to c.partitions partitions with the
// assignments the leader chose for the new ones.
func (t *tx) createPartitions(c *command) result {
	old := t.topic(c.topic)
	if old == nil {
		return result{err: errf(ErrUnknownTopicOrPartition, "topic %q", c.topic)}
	}
	n := len(old.Partitions)
	if int(c.partitions) <= n {
		return result{err: errf(ErrInvalidPartitions, "topic %q has %d partitions, cannot go to %d", c.topic, n, c.partitions)}
	}
	if int(c.partitions) != n+len(c.assignments) {
		return result{err: errf(ErrInvalidReplicaAssignment, "%d assignments for %d new partitions", len(c.assignments), int(c.partitions)-n)}
	}
	parts, err := t.newPartitions(c.assignments, len(old.Partitions[0].Replicas), n)
	if err != nil {
		return result{err: err}
	}
	if err := t.checkMaxTotal(c.maxTotal, len(parts)); err != nil {
		return result{err: err}
	}
	tp := t.mutableTopic(c.topic)
	tp.Partitions = append(tp.Partitions, parts...)
	return result{}
}

// alterConfigs sets and deletes topic config keys. Turning unclean leader
// election on elects leaders for the topic's leaderless partitions at once,
// as KRaft does.
func (t *tx) alterConfigs(c *command) result {
	if t.topic(c.topic) == nil {
		return result{err: errf(ErrUnknownTopicOrPartition, "topic %q", c.topic)}
	}
	if err := validateConfigs(c.configs, c.deletes); err != nil {
		return result{err: err}
	}
	tp := t.mutableTopic(c.topic)
	for k, v := range c.configs {
		tp.Configs[k] = v
	}
	for _, k := range c.deletes {
		delete(tp.Configs, k)
	}
	if len(tp.Configs) > maxConfigs {
		return result{err: errf(ErrInvalidConfig, "topic %q would have %d config keys, at most %d", c.topic, len(tp.Configs), maxConfigs)}
	}
	if uncleanEnabled(tp) {
		t.electLeaderless(func(x *Topic) bool { return x.Name == c.topic })
	}
	return result{}
}

// alterPartition applies a partition leader's ISR change with Kafka's
// checks, in Kafka's order. Payload: the partition's state afterwards, as
// encodePartition writes it.
func (t *tx) alterPartition(c *command) result {
	tp := t.topic(c.topic)
	if tp == nil || c.partitions < 0 || int(c.partitions) >= len(tp.Partitions) {
		return result{err: errf(ErrUnknownTopicOrPartition, "%s-%d", c.topic, c.partitions)}
	}
	if _, err := t.checkBrokerEpoch(c.brokerID, c.epoch); err != nil {
		return result{err: err}
	}
	p := tp.Partitions[c.partitions]
	if c.leaderEpoch != p.LeaderEpoch {
		return result{err: errf(ErrFencedLeaderEpoch, "%s-%d: leader epoch %d, current %d", c.topic, c.partitions, c.leaderEpoch, p.LeaderEpoch)}
	}
	if c.brokerID != p.Leader {
		return result{err: errf(ErrInvalidRequest, "%s-%d: broker %d is not the leader (%d)", c.topic, c.partitions, c.brokerID, p.Leader)}
	}
	if c.partitionEpoch != p.PartitionEpoch {
		return result{err: errf(ErrInvalidUpdateVersion, "%s-%d: partition epoch %d, current %d", c.topic, c.partitions, c.partitionEpoch, p.PartitionEpoch)}
	}
	if len(c.isr) == 0 || hasDuplicates(c.isr) || !slices.Contains(c.isr, p.Leader) {
		return result{err: errf(ErrInvalidRequest, "%s-%d: ISR %v must list the leader %d once and no broker twice", c.topic, c.partitions, c.isr, p.Leader)}
	}
	if len(c.isrEpochs) != 0 && len(c.isrEpochs) != len(c.isr) {
		return result{err: errf(ErrInvalidRequest, "%s-%d: %d broker epochs for ISR %v", c.topic, c.partitions, len(c.isrEpochs), c.isr)}
	}
	for i, r := range c.isr {
		if !slices.Contains(p.Replicas, r) {
			return result{err: errf(ErrIneligibleReplica, "%s-%d: broker %d is not a replica", c.topic, c.partitions, r)}
		}
		if !t.live(r) {
			return result{err: errf(ErrIneligibleReplica, "%s-%d: broker %d is fenced", c.topic, c.partitions, r)}
		}
		if slices.Contains(p.Offline, r) && !slices.Contains(p.ISR, r) {
			return result{err: errf(ErrIneligibleReplica, "%s-%d: broker %d reported its replica offline", c.topic, c.partitions, r)}
		}
		if len(c.isrEpochs) != 0 && c.isrEpochs[i] >= 0 {
			if b, _ := t.broker(r); b.Epoch != c.isrEpochs[i] {
				return result{err: errf(ErrIneligibleReplica, "%s-%d: broker %d has epoch %d, the leader judged epoch %d", c.topic, c.partitions, r, b.Epoch, c.isrEpochs[i])}
			}
		}
	}
	np := p.clone()
	// Kept in replica order, whatever order the leader sent.
	np.ISR = slices.DeleteFunc(slices.Clone(p.Replicas), func(r int32) bool { return !slices.Contains(c.isr, r) })
	// A leader that serves: every replica follows its log, so what they
	// recovered at their start no longer matters.
	np.Recovering = nil
	// The ISR may now hold a reassignment's whole target (reassign.go).
	np = completeReassignment(np, t.live, uncleanEnabled(tp))
	np, changed := finish(p, np)
	if changed {
		t.mutableTopic(c.topic).Partitions[c.partitions] = np
	}
	e := &encoder{}
	encodePartition(e, np)
	return result{payload: e.b}
}

// electPreferred moves leadership to preferred replicas. Payload: a count
// and (topic, partition, error code) per partition listed, or for an empty
// list (every partition) per partition whose leader changed.
func (t *tx) electPreferred(c *command) result {
	e := &encoder{}
	var out []electResult
	try := func(name string, i int32) {
		tp := t.topic(name)
		if tp == nil || i < 0 || int(i) >= len(tp.Partitions) {
			out = append(out, electResult{TopicPartition{name, i}, ErrUnknownTopicOrPartition.Code})
			return
		}
		elect := partitionPreferred
		if c.typ == cmdElectUnclean {
			elect = partitionUnclean
		}
		np, err := elect(tp.Partitions[i], t.live)
		if err == nil {
			t.mutableTopic(name).Partitions[i] = np
		}
		// Every partition: those that needed no election are left out,
		// as Kafka's controller leaves them out of ElectLeaders' answer.
		if len(c.elect) > 0 || !errors.Is(err, ErrElectionNotNeeded) {
			out = append(out, electResult{TopicPartition{name, i}, ErrorCode(err)})
		}
	}
	if len(c.elect) == 0 {
		for _, name := range slices.Sorted(maps.Keys(t.topicMap())) {
			for i := range t.topic(name).Partitions {
				try(name, int32(i))
			}
		}
	} else {
		for _, tp := range c.elect {
			try(tp.Topic, tp.Partition)
		}
	}
	e.uvarint(len(out))
	for _, r := range out {
		e.str(r.tp.Topic)
		e.i32(r.tp.Partition)
		e.i16(r.code)
	}
	return result{payload: e.b}
}

type electResult struct {
	tp   TopicPartition
	code int16
}

func decodeElectResults(b []byte) (map[TopicPartition]error, error) {
	d := &decoder{b: b}
	n := d.count(7)
	out := make(map[TopicPartition]error, n)
	for range n {
		tp := TopicPartition{Topic: d.str(), Partition: d.i32()}
		out[tp] = errorFromCode(d.i16(), "")
	}
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("election results: %w", err)
	}
	return out, nil
}
