package controller

import "ringlog/internal/acl"

// cmdType numbers the commands. They are persisted in the raft log: never
// renumber one, only add.
type cmdType uint8

const (
	cmdNoop                cmdType = 1  // marks a point in the log (Sync)
	cmdRegisterBroker      cmdType = 2  // brokerID, addr, rack[, configs: listeners[, offline[, ends]]]; epoch = entry index
	cmdUnfenceBroker       cmdType = 3  // brokerID, epoch
	cmdFenceBroker         cmdType = 4  // brokerID, epoch
	cmdCreateTopic         cmdType = 5  // topic, partitions, rf, validateOnly, configs; + topicID, assignments[, maxTotal]
	cmdDeleteTopic         cmdType = 6  // topic
	cmdCreatePartitions    cmdType = 7  // topic, partitions (new total); + assignments of the new ones[, maxTotal]
	cmdAlterConfigs        cmdType = 8  // topic, configs (set), deletes
	cmdAlterPartition      cmdType = 9  // topic, partition, brokerID, epoch, leaderEpoch, partitionEpoch, isr
	cmdElectPreferred      cmdType = 10 // elect (empty: every partition)
	cmdHeartbeat           cmdType = 11 // brokerID, epoch; RPC only, never in the log
	cmdAllocateProducerIDs cmdType = 12 // brokerID, epoch[, floor]
	cmdControlledShutdown  cmdType = 13 // brokerID, epoch; RPC only: the leader logs a FenceBroker
	cmdAlterScram          cmdType = 14 // scram (changes)
	cmdOfflineReplicas     cmdType = 15 // brokerID, epoch, offline (the broker's whole set)
	cmdElectRecovery       cmdType = 16 // offline: partitions whose unclean recovery timed out; logged by the leader
	cmdElectUnclean        cmdType = 17 // elect (empty: every partition)
	cmdCreateAcls          cmdType = 18 // acls
	cmdDeleteAcls          cmdType = 19 // aclFilters
	cmdAlterClientQuotas   cmdType = 20 // quotas
	cmdAlterReassignments  cmdType = 21 // allowRFChange, reassign (KIP-455; reassign.go)
	cmdUnregisterBroker    cmdType = 22 // brokerID, epoch (0); unregister.go
	cmdAlterBrokerConfigs  cmdType = 23 // topic (the resource: a broker id or ""), configs (set), deletes; brokerconfigs.go
	cmdTypeEnd             cmdType = 24
)

// cmdVersion is the first byte of every encoded command.
const cmdVersion = 1

// Limits checked before a command is proposed; the decoder's own bound is
// the bytes it is given.
const (
	// maxCommandBytes bounds an encoded command and so a raft entry and an
	// RPC frame's body. 10,000 partitions of 16 replicas fit with room.
	maxCommandBytes = 4 << 20
	// maxPartitions is the most partitions a topic may have, as in the engine.
	maxPartitions = 10000
	// maxReplicas bounds a replica list (Kafka's replication factor is an
	// int16; no cluster here has more brokers than this).
	maxReplicas = 256
	// maxConfigBytes bounds a config key or value.
	maxConfigBytes = 32 << 10
	// producerIDBlockSize is how many producer ids AllocateProducerIDs
	// hands a broker at once (Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE).
	producerIDBlockSize = 1000
)

func (t cmdType) String() string {
	names := [...]string{"", "Noop", "RegisterBroker", "UnfenceBroker", "FenceBroker", "CreateTopic",
		"DeleteTopic", "CreatePartitions", "AlterConfigs", "AlterPartition", "ElectPreferredLeaders", "Heartbeat",
		"AllocateProducerIDs", "ControlledShutdown", "AlterScramCredentials", "OfflineReplicas", "ElectRecovery",
		"ElectUncleanLeaders", "CreateAcls", "DeleteAcls", "AlterClientQuotas", "AlterPartitionReassignments", "UnregisterBroker",
		"AlterBrokerConfigs"}
	if t > 0 && t < cmdTypeEnd {
		return names[t]
	}
	return "Unknown"
}

// command is one request to the quorum. The same encoding travels as the
// body of a forwarding RPC (a request as a client made it) and as a raft
// entry (the request completed by the leader: topic id and assignments
// filled in). Only the fields listed for a type are encoded.
type command struct {
	typ            cmdType
	brokerID       int32
	epoch          int64 // broker epoch
	addr, rack     string
	topic          string
	topicID        TopicID
	partitions     int32 // CreateTopic: count; CreatePartitions: new total; AlterPartition: the index
	rf             int16
	validateOnly   bool
	assignments    [][]int32
	configs        map[string]string
	deletes        []string
	leaderEpoch    int32
	partitionEpoch int32
	isr            []int32
	isrEpochs      []int64 // AlterPartition: optional, one per isr member
	floor          int64   // AllocateProducerIDs: the block starts at or above it
	elect          []TopicPartition
	scram          []ScramChange
	// maxTotal (CreateTopic, CreatePartitions; 0: none) is the most
	// partitions the cluster may hold after the command: the cap
	// (ringlog.max.partitions) of the broker that took the client's
	// request. It travels in the command so that the state machine checks
	// it against the count at the command's place in the log: concurrent
	// creations cannot pass it together.
	maxTotal int32
	// offline (RegisterBroker, OfflineReplicas) are the partitions whose
	// replica on the broker is offline: the whole set, not a change.
	offline []TopicIDPartition
	// ends (RegisterBroker) are the log ends of the broker's replicas
	// that it recovered from an unclean shutdown (Partition.Recovering).
	ends []ReplicaLogEnd
	// acls (CreateAcls) are bindings to add; aclFilters (DeleteAcls)
	// select the bindings to remove.
	acls       []acl.Binding
	aclFilters []acl.Filter
	// quotas (AlterClientQuotas) are the entities' changes.
	quotas []QuotaAlteration
	// reassign (AlterReassignments) are the partitions' new targets or
	// cancellations, applied in order; allowRFChange is KIP-860's flag
	// (false: a target must keep the replication factor).
	reassign      []Reassignment
	allowRFChange bool
}

func (c *command) encode() []byte {
	e := &encoder{b: make([]byte, 0, 64)}
	e.u8(cmdVersion)
	e.u8(uint8(c.typ))
	switch c.typ {
	case cmdNoop:
	case cmdRegisterBroker:
		e.i32(c.brokerID)
		e.str(c.addr)
		e.str(c.rack)
		if len(c.configs) > 0 || len(c.offline) > 0 || len(c.ends) > 0 {
			// Trailing fields, the listeners by name, the offline
			// replicas and the recovered log ends: entries written
			// before them still decode. A field is written (empty) when
			// a later one follows.
			e.stringMap(c.configs)
		}
		if len(c.offline) > 0 || len(c.ends) > 0 {
			encodeOffline(e, c.offline)
		}
		if len(c.ends) > 0 {
			encodeReplicaLogEnds(e, c.ends)
		}
	case cmdUnfenceBroker, cmdFenceBroker, cmdHeartbeat, cmdAllocateProducerIDs, cmdControlledShutdown, cmdUnregisterBroker:
		e.i32(c.brokerID)
		e.i64(c.epoch)
		if c.typ == cmdAllocateProducerIDs && c.floor > 0 {
			// A trailing field: entries written before it still decode.
			e.i64(c.floor)
		}
	case cmdCreateTopic:
		e.str(c.topic)
		e.b = append(e.b, c.topicID[:]...)
		e.i32(c.partitions)
		e.i16(c.rf)
		e.bool(c.validateOnly)
		e.stringMap(c.configs)
		encodeAssignments(e, c.assignments)
		if c.maxTotal > 0 {
			// A trailing field: entries written before it still decode.
			e.i32(c.maxTotal)
		}
	case cmdDeleteTopic:
		e.str(c.topic)
	case cmdCreatePartitions:
		e.str(c.topic)
		e.i32(c.partitions)
		encodeAssignments(e, c.assignments)
		if c.maxTotal > 0 {
			e.i32(c.maxTotal)
		}
	case cmdAlterConfigs, cmdAlterBrokerConfigs:
		e.str(c.topic)
		e.stringMap(c.configs)
		e.strs(c.deletes)
	case cmdAlterPartition:
		e.str(c.topic)
		e.i32(c.partitions)
		e.i32(c.brokerID)
		e.i64(c.epoch)
		e.i32(c.leaderEpoch)
		e.i32(c.partitionEpoch)
		e.int32s(c.isr)
		if len(c.isrEpochs) > 0 {
			// A trailing field: entries written before it existed end
			// after the ISR and still decode.
			e.int64s(c.isrEpochs)
		}
	case cmdElectPreferred, cmdElectUnclean:
		e.uvarint(len(c.elect))
		for _, tp := range c.elect {
			e.str(tp.Topic)
			e.i32(tp.Partition)
		}
	case cmdAlterScram:
		encodeScramChanges(e, c.scram)
	case cmdOfflineReplicas:
		e.i32(c.brokerID)
		e.i64(c.epoch)
		encodeOffline(e, c.offline)
	case cmdElectRecovery:
		encodeOffline(e, c.offline)
	case cmdCreateAcls:
		encodeBindings(e, c.acls)
	case cmdDeleteAcls:
		encodeFilters(e, c.aclFilters)
	case cmdAlterClientQuotas:
		encodeQuotaAlterations(e, c.quotas)
	case cmdAlterReassignments:
		encodeReassignments(e, c.allowRFChange, c.reassign)
	}
	return e.b
}

func encodeReplicaLogEnds(e *encoder, v []ReplicaLogEnd) {
	e.uvarint(len(v))
	for _, l := range v {
		e.b = append(e.b, l.ID[:]...)
		e.i32(l.Partition)
		e.i32(l.LastEpoch)
		e.i64(l.LEO)
	}
}

func decodeReplicaLogEnds(d *decoder) []ReplicaLogEnd {
	n := d.count(32)
	if n == 0 {
		return nil
	}
	v := make([]ReplicaLogEnd, n)
	for i := range v {
		copy(v[i].ID[:], d.take(16))
		v[i].Partition = d.i32()
		v[i].LastEpoch = d.i32()
		v[i].LEO = d.i64()
	}
	return v
}

func encodeOffline(e *encoder, v []TopicIDPartition) {
	e.uvarint(len(v))
	for _, tp := range v {
		e.b = append(e.b, tp.ID[:]...)
		e.i32(tp.Partition)
	}
}

func decodeOffline(d *decoder) []TopicIDPartition {
	n := d.count(20)
	if n == 0 {
		return nil
	}
	v := make([]TopicIDPartition, n)
	for i := range v {
		copy(v[i].ID[:], d.take(16))
		v[i].Partition = d.i32()
	}
	return v
}

func encodeAssignments(e *encoder, as [][]int32) {
	e.uvarint(len(as))
	for _, a := range as {
		e.int32s(a)
	}
}

func decodeAssignments(d *decoder) [][]int32 {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	as := make([][]int32, n)
	for i := range as {
		as[i] = d.int32s()
	}
	return as
}

// decodeMaxTotal reads the optional trailing maxTotal.
func decodeMaxTotal(d *decoder) int32 {
	if len(d.b) == 0 {
		return 0
	}
	n := d.i32()
	if d.err == nil && n <= 0 {
		d.fail("partition cap %d", n)
	}
	return n
}

// decodeCommand decodes a command from a raft entry or an RPC body. It
// never panics and allocates no more than the input justifies.
func decodeCommand(b []byte) (*command, error) {
	d := &decoder{b: b}
	if v := d.u8(); d.err == nil && v != cmdVersion {
		d.fail("command version %d", v)
	}
	c := &command{typ: cmdType(d.u8())}
	if d.err == nil && (c.typ == 0 || c.typ >= cmdTypeEnd) {
		d.fail("command type %d", c.typ)
	}
	switch c.typ {
	case cmdNoop:
	case cmdRegisterBroker:
		c.brokerID = d.i32()
		c.addr = d.str()
		c.rack = d.str()
		if len(d.b) > 0 {
			c.configs = d.stringMap()
			switch {
			case len(d.b) > 0:
				c.offline = decodeOffline(d)
				if len(d.b) > 0 {
					if c.ends = decodeReplicaLogEnds(d); len(c.ends) == 0 {
						d.fail("an empty list of recovered log ends")
					}
				} else if len(c.offline) == 0 {
					d.fail("an empty offline replica list")
				}
			case len(c.configs) == 0:
				d.fail("an empty listener map")
			}
		}
	case cmdUnfenceBroker, cmdFenceBroker, cmdHeartbeat, cmdAllocateProducerIDs, cmdControlledShutdown, cmdUnregisterBroker:
		c.brokerID = d.i32()
		c.epoch = d.i64()
		if c.typ == cmdAllocateProducerIDs && len(d.b) > 0 {
			if c.floor = d.i64(); c.floor <= 0 {
				d.fail("producer id floor %d", c.floor)
			}
		}
	case cmdCreateTopic:
		c.topic = d.str()
		copy(c.topicID[:], d.take(16))
		c.partitions = d.i32()
		c.rf = d.i16()
		c.validateOnly = d.bool()
		c.configs = d.stringMap()
		c.assignments = decodeAssignments(d)
		c.maxTotal = decodeMaxTotal(d)
	case cmdDeleteTopic:
		c.topic = d.str()
	case cmdCreatePartitions:
		c.topic = d.str()
		c.partitions = d.i32()
		c.assignments = decodeAssignments(d)
		c.maxTotal = decodeMaxTotal(d)
	case cmdAlterConfigs, cmdAlterBrokerConfigs:
		c.topic = d.str()
		c.configs = d.stringMap()
		c.deletes = d.strs()
	case cmdAlterPartition:
		c.topic = d.str()
		c.partitions = d.i32()
		c.brokerID = d.i32()
		c.epoch = d.i64()
		c.leaderEpoch = d.i32()
		c.partitionEpoch = d.i32()
		c.isr = d.int32s()
		if len(d.b) > 0 {
			c.isrEpochs = d.int64s()
		}
	case cmdElectPreferred, cmdElectUnclean:
		n := d.count(5)
		if n > 0 {
			c.elect = make([]TopicPartition, n)
			for i := range c.elect {
				c.elect[i] = TopicPartition{Topic: d.str(), Partition: d.i32()}
			}
		}
	case cmdAlterScram:
		c.scram = decodeScramChanges(d)
	case cmdOfflineReplicas:
		c.brokerID = d.i32()
		c.epoch = d.i64()
		c.offline = decodeOffline(d)
	case cmdElectRecovery:
		if c.offline = decodeOffline(d); len(c.offline) == 0 {
			d.fail("no partition to elect")
		}
	case cmdCreateAcls:
		c.acls = decodeBindings(d)
	case cmdDeleteAcls:
		c.aclFilters = decodeFilters(d)
	case cmdAlterClientQuotas:
		c.quotas = decodeQuotaAlterations(d)
	case cmdAlterReassignments:
		c.allowRFChange, c.reassign = decodeReassignments(d)
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return c, nil
}
