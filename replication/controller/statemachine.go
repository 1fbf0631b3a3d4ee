package controller

import (
	"maps"
	"math"
	"slices"
	"strings"

	"ringlog/internal/acl"
)

// The replicated state machine, as a pure function: apply(image, index,
// command) returns the next image and the command's result. It reads no
// clock, no randomness and no configuration of the node, so every voter
// computes the same image from the same log (the leader makes every choice
// that needs randomness before it proposes, see leader.go). A command that
// fails validation leaves the state unchanged; its error is its result.

// result is what applying a command returns to its proposer.
type result struct {
	err     error
	payload []byte // per command: see the apply functions
}

// tx builds the next image by copy on write: maps are cloned on the first
// change, a topic is copied on its first change (Topic.clone: its configs
// and its partitions slice).
type tx struct {
	base     *Image
	index    uint64
	brokers  map[int32]Broker
	topics   map[string]*Topic
	topicIDs map[TopicID]string
	copied   map[string]bool // topics already copied in this tx
	// nextProducerID is set when the tx took a block of producer ids.
	nextProducerID   int64
	producerIDsMoved bool
	// scram is the next credential map, when the tx changed it.
	scram map[ScramKey]ScramCredential
	// acls is the next ACL set, when aclsChanged.
	acls        *acl.Set
	aclsChanged bool
	// quotas is the next quota map, when quotasChanged.
	quotas        map[string]Quota
	quotasChanged bool
	// brokerConfigs is the next dynamic broker config map, when
	// brokerConfigsChanged.
	brokerConfigs        map[string]map[string]string
	brokerConfigsChanged bool
}

func (t *tx) broker(id int32) (Broker, bool) {
	if t.brokers != nil {
		b, ok := t.brokers[id]
		return b, ok
	}
	return t.base.Broker(id)
}

func (t *tx) live(id int32) bool {
	b, ok := t.broker(id)
	return ok && !b.Fenced
}

func (t *tx) setBroker(b Broker) {
	if t.brokers == nil {
		t.brokers = maps.Clone(t.base.brokers)
	}
	t.brokers[b.ID] = b
}

func (t *tx) topicMap() map[string]*Topic {
	if t.topics != nil {
		return t.topics
	}
	return t.base.topics
}

func (t *tx) topic(name string) *Topic { return t.topicMap()[name] }

func (t *tx) topicIDMap() map[TopicID]string {
	if t.topicIDs != nil {
		return t.topicIDs
	}
	return t.base.topicIDs
}

// mutableTopic returns a copy of the topic that this tx may change.
func (t *tx) mutableTopic(name string) *Topic {
	if t.copied[name] {
		return t.topics[name]
	}
	old := t.topic(name)
	if old == nil {
		return nil
	}
	c := old.clone()
	t.putTopic(c)
	return c
}

func (t *tx) putTopic(tp *Topic) {
	if t.topics == nil {
		t.topics = maps.Clone(t.base.topics)
		t.copied = map[string]bool{}
	}
	t.topics[tp.Name] = tp
	t.copied[tp.Name] = true
	if t.topicIDMap()[tp.ID] == tp.Name {
		return // a change of a topic the ids map already names
	}
	if t.topicIDs == nil {
		t.topicIDs = maps.Clone(t.base.topicIDs)
	}
	t.topicIDs[tp.ID] = tp.Name
}

func (t *tx) deleteTopic(name string) {
	tp := t.topic(name)
	if t.topics == nil {
		t.topics = maps.Clone(t.base.topics)
		t.copied = map[string]bool{}
	}
	if t.topicIDs == nil {
		t.topicIDs = maps.Clone(t.base.topicIDs)
	}
	delete(t.topics, name)
	delete(t.topicIDs, tp.ID)
}

// image returns the next image; the base is not changed.
func (t *tx) image() *Image {
	next := &Image{
		Index:          t.index,
		brokers:        t.base.brokers,
		topics:         t.base.topics,
		topicIDs:       t.base.topicIDs,
		nextProducerID: t.base.nextProducerID,
		scram:          t.base.scram,
		acls:           t.base.acls,
		quotas:         t.base.quotas,
		brokerConfigs:  t.base.brokerConfigs,
		superseded:     make(chan struct{}),
	}
	if t.brokerConfigsChanged {
		next.brokerConfigs = t.brokerConfigs
	}
	if t.scram != nil {
		next.scram = t.scram
	}
	if t.aclsChanged {
		next.acls = t.acls
	}
	if t.quotasChanged {
		next.quotas = t.quotas
	}
	if t.producerIDsMoved {
		next.nextProducerID = t.nextProducerID
	}
	if t.brokers != nil {
		next.brokers = t.brokers
	}
	if t.topics != nil {
		next.topics = t.topics
	}
	if t.topicIDs != nil {
		next.topicIDs = t.topicIDs
	}
	return next
}

// apply applies one committed command at raft index index.
func apply(base *Image, index uint64, c *command) (*Image, result) {
	t := &tx{base: base, index: index}
	var res result
	switch c.typ {
	case cmdNoop:
	case cmdRegisterBroker:
		res = t.registerBroker(c)
	case cmdUnfenceBroker:
		res = t.unfenceBroker(c)
	case cmdFenceBroker:
		res = t.fenceBroker(c)
	case cmdCreateTopic:
		res = t.createTopic(c)
	case cmdDeleteTopic:
		res = t.deleteTopicCmd(c)
	case cmdCreatePartitions:
		res = t.createPartitions(c)
	case cmdAlterConfigs:
		res = t.alterConfigs(c)
	case cmdAlterPartition:
		res = t.alterPartition(c)
	case cmdElectPreferred, cmdElectUnclean:
		res = t.electPreferred(c)
	case cmdAllocateProducerIDs:
		res = t.allocateProducerIDs(c)
	case cmdAlterScram:
		res = t.alterScram(c)
	case cmdOfflineReplicas:
		res = t.offlineReplicas(c)
	case cmdElectRecovery:
		res = t.electRecovery(c)
	case cmdCreateAcls:
		res = t.createAcls(c)
	case cmdDeleteAcls:
		res = t.deleteAcls(c)
	case cmdAlterClientQuotas:
		res = t.alterClientQuotas(c)
	case cmdAlterReassignments:
		res = t.alterReassignments(c)
	case cmdUnregisterBroker:
		res = t.unregisterBroker(c)
	case cmdAlterBrokerConfigs:
		res = t.alterBrokerConfigs(c)
	default:
		// A heartbeat or an unknown type in the log: written by a bug, kept
		// out of the state.
		res.err = errf(ErrInvalidRequest, "command %s is not a log entry", c.typ)
	}
	if res.err != nil {
		// A failed command changes nothing but the index.
		t = &tx{base: base, index: index}
	}
	return t.image(), res
}

// registerBroker registers a broker incarnation; its epoch is the entry's
// index. A broker that registers again while unfenced restarted without
// being fenced: its old incarnation is fenced first (leaderships move, ISR
// shrinks), because the new one may have lost the tail of its logs. The
// replicas it reports offline (logs that did not open) replace those of
// its previous incarnation, and so do the log ends it recovered from an
// unclean shutdown (Partition.Recovering). Then the broker is unfenced and
// leaderless partitions it can lead get it. Payload: the epoch, 8 bytes.
func (t *tx) registerBroker(c *command) result {
	if c.brokerID < 0 {
		return result{err: errf(ErrInvalidRequest, "broker id %d", c.brokerID)}
	}
	if old, ok := t.broker(c.brokerID); ok && !old.Fenced {
		t.fence(old)
	}
	listeners := c.configs
	if len(listeners) == 0 {
		listeners = nil // Addr serves every listener name
	}
	t.setBroker(Broker{ID: c.brokerID, Addr: c.addr, Rack: c.rack, Epoch: int64(t.index), Listeners: listeners})
	// The recovered log ends go in before anything is elected: the new
	// incarnation is live from here, and must not lead as if its logs
	// were whole.
	t.setRecovering(c.brokerID, c.ends)
	t.setOffline(c.brokerID, c.offline)
	t.electLeaderless(func(*Topic) bool { return true })
	e := &encoder{}
	e.i64(int64(t.index))
	return result{payload: e.b}
}

func (t *tx) checkBrokerEpoch(id int32, epoch int64) (Broker, error) {
	b, ok := t.broker(id)
	if !ok {
		return b, errf(ErrBrokerIDNotRegistered, "broker %d", id)
	}
	if b.Epoch != epoch {
		return b, errf(ErrStaleBrokerEpoch, "broker %d has epoch %d, not %d", id, b.Epoch, epoch)
	}
	return b, nil
}

// allocateProducerIDs hands a broker the next block of producer ids
// (Kafka's AllocateProducerIds, KIP-730). The block is taken from the
// replicated counter, so no two blocks overlap whichever brokers ask, and
// a broker that asks twice (a retry after a lost leadership) merely skips
// a block. As in Kafka the broker must name its current epoch: a fenced
// broker may allocate, a dead incarnation may not. Payload: start i64 |
// length i32.
func (t *tx) allocateProducerIDs(c *command) result {
	if _, err := t.checkBrokerEpoch(c.brokerID, c.epoch); err != nil {
		return result{err: err}
	}
	start := max(t.base.nextProducerID, c.floor)
	if start > math.MaxInt64-producerIDBlockSize {
		// Kafka answers UNKNOWN_SERVER_ERROR too: ids are int64 and never
		// reused, so this takes 9e15 blocks.
		return result{err: errf(ErrUnknown, "producer ids exhausted: the next block would start at %d", start)}
	}
	t.nextProducerID, t.producerIDsMoved = start+producerIDBlockSize, true
	e := &encoder{}
	e.i64(start)
	e.i32(producerIDBlockSize)
	return result{payload: e.b}
}

// offlineReplicas records the replicas a broker incarnation reports
// offline, its whole set (KIP-858's offline log directories, per
// partition): see setOffline. As in Kafka the broker must name its current
// epoch.
func (t *tx) offlineReplicas(c *command) result {
	if _, err := t.checkBrokerEpoch(c.brokerID, c.epoch); err != nil {
		return result{err: err}
	}
	t.setOffline(c.brokerID, c.offline)
	return result{}
}

// setOffline makes set (partitions by topic id; unknown ones are ignored:
// their topic was deleted meanwhile) the partitions whose replica on
// broker id is offline. A replica going offline leaves the ISR, except as
// its last member (as a fenced broker does: the only replica known to
// have every committed record may yet come back with them), and a leader
// going offline hands over to the first eligible ISR member, or leaves
// the partition leaderless (Kafka's handleDirectoriesOffline). A replica
// coming back online may lead a leaderless partition again.
func (t *tx) setOffline(id int32, set []TopicIDPartition) {
	want := map[TopicPartition]bool{}
	for _, tp := range set {
		if name, ok := t.topicName(tp.ID); ok {
			want[TopicPartition{name, tp.Partition}] = true
		}
	}
	t.changePartitions(func(name string, i int32, p Partition, unclean bool) (Partition, bool) {
		if !slices.Contains(p.Replicas, id) {
			return p, false
		}
		off := want[TopicPartition{name, i}]
		if off == slices.Contains(p.Offline, id) {
			return p, false
		}
		return partitionOffline(p, id, off, t.live, unclean)
	})
}

// topicName looks a topic id up in the tx's state.
func (t *tx) topicName(id TopicID) (string, bool) {
	m := t.base.topicIDs
	if t.topicIDs != nil {
		m = t.topicIDs
	}
	name, ok := m[id]
	return name, ok
}

// unfenceBroker returns a fenced broker to service (it heartbeats again).
func (t *tx) unfenceBroker(c *command) result {
	b, err := t.checkBrokerEpoch(c.brokerID, c.epoch)
	if err != nil || !b.Fenced {
		return result{err: err}
	}
	b.Fenced = false
	t.setBroker(b)
	t.electLeaderless(func(*Topic) bool { return true })
	return result{}
}

// fenceBroker fences a broker whose session expired.
func (t *tx) fenceBroker(c *command) result {
	b, err := t.checkBrokerEpoch(c.brokerID, c.epoch)
	if err != nil || b.Fenced {
		return result{err: err}
	}
	t.fence(b)
	return result{}
}

// fence marks b fenced and moves its leaderships to the live ISR (see
// partitionFenced).
func (t *tx) fence(b Broker) {
	b.Fenced = true
	t.setBroker(b)
	// What the incarnation reported of its logs dies with it.
	t.setRecovering(b.ID, nil)
	t.changePartitions(func(_ string, _ int32, p Partition, unclean bool) (Partition, bool) {
		if !slices.Contains(p.Replicas, b.ID) {
			return p, false
		}
		return partitionFenced(p, b.ID, t.live, unclean)
	})
}

// setRecovering makes ends (by topic id; unknown topics and partitions the
// broker holds no replica of are ignored) broker id's entries in the
// partitions' Recovering, replacing those it had.
func (t *tx) setRecovering(id int32, ends []ReplicaLogEnd) {
	want := map[TopicPartition]ReplicaLogEnd{}
	for _, l := range ends {
		if name, ok := t.topicName(l.ID); ok {
			want[TopicPartition{name, l.Partition}] = l
		}
	}
	t.changePartitions(func(name string, i int32, p Partition, _ bool) (Partition, bool) {
		l, ok := want[TopicPartition{name, i}]
		ok = ok && slices.Contains(p.Replicas, id)
		_, had := logEndOf(p.Recovering, id)
		if !ok && !had {
			return p, false
		}
		np := p.clone()
		np.Recovering = withoutLogEnd(np.Recovering, id)
		if ok {
			np.Recovering = append(np.Recovering, LogEnd{Broker: id, LastEpoch: max(l.LastEpoch, -1), LEO: max(l.LEO, 0)})
			slices.SortFunc(np.Recovering, func(a, b LogEnd) int { return int(a.Broker - b.Broker) })
		}
		return np, true
	})
}

// electRecovery ends the wait of partitions in unclean recovery whose
// replicas did not all come back within the controller's
// UncleanRecoveryTimeout: the longest log among those that did leads.
// Partitions no longer waiting (a leader came meanwhile) are left alone.
func (t *tx) electRecovery(c *command) result {
	for _, tip := range c.offline {
		name, ok := t.topicName(tip.ID)
		if !ok {
			continue
		}
		tp := t.topic(name)
		if tip.Partition < 0 || int(tip.Partition) >= len(tp.Partitions) {
			continue
		}
		p := tp.Partitions[tip.Partition]
		if p.Leader != -1 || !recovering(p, t.live) {
			continue
		}
		if np, changed := finish(p, electRecovered(p.clone(), t.live)); changed {
			t.mutableTopic(name).Partitions[tip.Partition] = np
		}
	}
	return result{}
}

// electLeaderless gives a leader to every leaderless partition of the
// topics selected that has a live candidate.
func (t *tx) electLeaderless(sel func(*Topic) bool) {
	t.changePartitions(func(name string, _ int32, p Partition, unclean bool) (Partition, bool) {
		if p.Leader != -1 || !sel(t.topic(name)) {
			return p, false
		}
		return partitionElect(p, t.live, unclean)
	})
}

// changePartitions calls change for every partition, topics in name order
// (only for readability: each partition's change depends on nothing but
// itself and the brokers), with the topic's unclean election setting, and
// stores what it returns when it says the partition changed.
func (t *tx) changePartitions(change func(topic string, i int32, p Partition, unclean bool) (Partition, bool)) {
	for _, name := range slices.Sorted(maps.Keys(t.topicMap())) {
		tp := t.topic(name)
		unclean := uncleanEnabled(tp)
		for i := range tp.Partitions {
			if np, changed := change(name, int32(i), tp.Partitions[i], unclean); changed {
				t.mutableTopic(name).Partitions[i] = np
			}
		}
	}
}

// uncleanEnabled reads unclean.leader.election.enable (default false).
func uncleanEnabled(tp *Topic) bool {
	return strings.EqualFold(tp.Configs[configUncleanLeaderElection], "true")
}
