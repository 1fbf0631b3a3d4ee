package controller

import (
	"bytes"
	"encoding/hex"
	"maps"
	"slices"

	"ringlog/internal/acl"
)

// TopicID is a topic's 16-byte id (Kafka's Uuid), chosen at random by the
// raft leader before it proposes the topic. The zero value is no id.
type TopicID [16]byte

func (id TopicID) String() string { return hex.EncodeToString(id[:]) }

// Broker is a registered broker as the quorum knows it.
type Broker struct {
	ID   int32
	Addr string // host:port of the broker's inter-broker listener
	Rack string // broker.rack; empty when not set
	// Listeners are the broker's advertised listeners by name; nil for a
	// broker that registered before listeners were named (Addr serves all).
	Listeners map[string]string
	// Epoch is the broker epoch: the raft index of the entry that registered
	// this incarnation, so it grows with every registration.
	Epoch int64
	// Fenced brokers lead nothing and are never added to an ISR: they missed
	// broker.session.timeout.ms of heartbeats.
	Fenced bool
}

// Partition is the replication state of one partition.
type Partition struct {
	Replicas []int32 // the assignment; Replicas[0] is the preferred leader
	ISR      []int32 // in-sync replicas, a subset of Replicas in replica order
	Leader   int32   // broker id, or -1 when no eligible replica is live
	// LeaderEpoch grows by one with every change of Leader (to -1 too),
	// and when a replica leaves Replicas (KRaft's rule: the removed
	// replica's fetches are fenced).
	LeaderEpoch int32
	// PartitionEpoch grows by one with every change of the partition's
	// state (leader, ISR, replicas or offline replicas); AlterPartition
	// must name it.
	PartitionEpoch int32
	// Offline are the replicas whose broker reported its log of the
	// partition offline (a failed disk, a log that did not open: KIP-112
	// and KIP-858's offline log directories, per partition here), in
	// replica order. They neither lead nor join the ISR until their broker
	// registers again without reporting them.
	Offline []int32
	// Recovering are the log ends that replicas' brokers reported when
	// they registered after recovering the partition's log from an
	// unclean shutdown (a crash, a power loss: the log may have lost its
	// unsynced tail), one per broker, sorted by broker id. A broker's is
	// dropped when its incarnation is fenced, registers again, or is
	// elected leader; all are dropped by an AlterPartition (a leader that
	// serves: everyone follows its log). When
	// every live ISR member of a leaderless partition has one, the
	// partition waits for the longest log (KIP-966's unclean recovery,
	// election.go).
	Recovering []LogEnd
	// AddingReplicas and RemovingReplicas describe a reassignment in
	// progress (KIP-455), both sorted by broker id and empty otherwise:
	// Replicas is then the target followed by RemovingReplicas, and
	// AddingReplicas are the target's members that were not replicas
	// before (reassign.go). The reassignment completes when the ISR holds
	// the whole target.
	AddingReplicas   []int32
	RemovingReplicas []int32
}

// Reassigning reports whether a reassignment of p is in progress.
func (p Partition) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// LogEnd is where a replica's log ended when its broker registered after
// recovering it from an unclean shutdown.
type LogEnd struct {
	Broker int32
	// LastEpoch is the last leader epoch in the log, -1 for none.
	LastEpoch int32
	LEO       int64
}

// ReplicaLogEnd is a log end as a broker reports it at registration: by
// topic id and partition.
type ReplicaLogEnd struct {
	TopicIDPartition
	LastEpoch int32
	LEO       int64
}

// TopicIDPartition names a partition by topic id, as a broker reports its
// offline replicas (a topic name may be reused after a deletion; an id
// is not).
type TopicIDPartition struct {
	ID        TopicID
	Partition int32
}

// Topic is a topic and its partitions; Partitions[i] is partition i.
type Topic struct {
	Name       string
	ID         TopicID
	Configs    map[string]string // topic-level overrides, stored as given
	Partitions []Partition
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Image is an immutable view of the replicated state after the entry at
// Index was applied. A new Image replaces it on every applied entry; the
// old one is never changed, so readers hold it without locks. Every value
// reachable from an Image (maps, slices) is shared with the state machine
// and with other readers: callers must treat it as read-only.
type Image struct {
	// Index is the raft index of the last command entry applied (0 before
	// any); raft's own no-op and configuration entries do not count.
	Index uint64

	brokers  map[int32]Broker
	topics   map[string]*Topic
	topicIDs map[TopicID]string
	// nextProducerID is the start of the next block of producer ids
	// (AllocateProducerIDs): every id below it was handed to a broker.
	nextProducerID int64
	// scram holds the SCRAM credentials (scram.go); nil when there are none.
	scram map[ScramKey]ScramCredential
	// acls is the ACL set (acls.go), its bindings in snapshot order; nil
	// when there are none.
	acls *acl.Set
	// quotas are the client quotas (quotas.go) by entity key; nil when
	// there are none.
	quotas map[string]Quota
	// brokerConfigs are the dynamic broker configs (brokerconfigs.go) by
	// resource: a broker id, or "" for the cluster default; nil when
	// there are none.
	brokerConfigs map[string]map[string]string

	// superseded is closed when a newer Image is published.
	superseded chan struct{}
}

func emptyImage() *Image {
	return &Image{
		brokers:    map[int32]Broker{},
		topics:     map[string]*Topic{},
		topicIDs:   map[TopicID]string{},
		superseded: make(chan struct{}),
	}
}

// Superseded is closed as soon as a newer Image is published: waiting on it
// and then calling Controller.Image again sees every change, coalesced, and
// needs no subscription to cancel.
func (img *Image) Superseded() <-chan struct{} { return img.superseded }

// Endpoint is the address of broker b's listener name: its advertised
// address there, or Addr when b registered no listener names. A broker
// without that listener has none (Kafka leaves such brokers out of what
// a client of the listener is told).
func (b Broker) Endpoint(name string) (string, bool) {
	if b.Listeners == nil {
		return b.Addr, b.Addr != ""
	}
	addr, ok := b.Listeners[name]
	return addr, ok
}

// Broker returns a registered broker.
func (img *Image) Broker(id int32) (Broker, bool) {
	b, ok := img.brokers[id]
	return b, ok
}

// Brokers returns the registered brokers (fenced ones too) by id.
func (img *Image) Brokers() []Broker {
	bs := slices.Collect(maps.Values(img.brokers))
	slices.SortFunc(bs, func(a, b Broker) int { return int(a.ID) - int(b.ID) })
	return bs
}

// NextProducerID is the first producer id no broker was given yet: every
// block handed out so far lies below it.
func (img *Image) NextProducerID() int64 { return img.nextProducerID }

// Topic returns a topic by name, or nil.
func (img *Image) Topic(name string) *Topic { return img.topics[name] }

// TopicByID returns a topic by id, or nil.
func (img *Image) TopicByID(id TopicID) *Topic {
	name, ok := img.topicIDs[id]
	if !ok {
		return nil
	}
	return img.topics[name]
}

// TopicNames returns the names of all topics, sorted.
func (img *Image) TopicNames() []string {
	return slices.Sorted(maps.Keys(img.topics))
}

// Partition returns one partition's state.
func (img *Image) Partition(topic string, partition int32) (Partition, bool) {
	t := img.topics[topic]
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
		return Partition{}, false
	}
	return t.Partitions[partition], true
}

// live reports whether a broker is registered and not fenced.
func (img *Image) live(id int32) bool {
	b, ok := img.brokers[id]
	return ok && !b.Fenced
}

func (p Partition) clone() Partition {
	p.Replicas = slices.Clone(p.Replicas)
	p.ISR = slices.Clone(p.ISR)
	p.Offline = slices.Clone(p.Offline)
	p.Recovering = slices.Clone(p.Recovering)
	p.AddingReplicas = slices.Clone(p.AddingReplicas)
	p.RemovingReplicas = slices.Clone(p.RemovingReplicas)
	return p
}

// OfflineReplicas returns the partitions whose replica on broker the
// image holds offline, sorted by topic id and partition.
func (img *Image) OfflineReplicas(broker int32) []TopicIDPartition {
	var out []TopicIDPartition
	for _, t := range img.topics {
		for i, p := range t.Partitions {
			if slices.Contains(p.Offline, broker) {
				out = append(out, TopicIDPartition{ID: t.ID, Partition: int32(i)})
			}
		}
	}
	sortTopicIDPartitions(out)
	return out
}

func sortTopicIDPartitions(v []TopicIDPartition) {
	slices.SortFunc(v, func(a, b TopicIDPartition) int {
		if c := bytes.Compare(a.ID[:], b.ID[:]); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
}

// clone copies the topic for a change: its configs and its partitions
// slice. The partitions' own slices (replicas, ISR, ...) are shared with
// t: a change replaces a Partition whole with one made by
// Partition.clone, never writes into those slices (so a change of one
// partition costs a copy of the topic's partition structs, not of every
// partition's lists: 100,000 partitions in 1,000 topics apply an ISR
// change in about a third of the time, `ringlog bench metadata`).
func (t *Topic) clone() *Topic {
	c := *t
	c.Configs = maps.Clone(t.Configs)
	c.Partitions = slices.Clone(t.Partitions)
	return &c
}
