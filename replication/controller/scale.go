package controller

import (
	"crypto/rand"
	"fmt"
	"runtime"
	"slices"
	"time"
)

// ScaleConfig is the cluster MeasureScale builds: Brokers brokers and
// Partitions partitions of replication factor RF, in topics of
// PartitionsPerTopic partitions, of which broker 1 leads FailedLeads (the
// rest are spread over the other brokers round-robin).
type ScaleConfig struct {
	Brokers            int
	Partitions         int
	PartitionsPerTopic int
	RF                 int
	FailedLeads        int
	// Changes is how many AlterPartition commands the per-change figures
	// are averaged over.
	Changes int
}

// ScaleReport is what MeasureScale measured. Durations are wall time of
// the state machine's own code on this process's goroutine: raft, disks
// and networks are not in them.
type ScaleReport struct {
	Config ScaleConfig
	// Build is the time to apply the registrations and topic creations.
	Build time.Duration
	// ImageHeapBytes is the Go heap the image holds (live heap with the
	// image, minus without it, each after a collection).
	ImageHeapBytes int64
	// SnapshotBytes is the encoded image; SnapshotEncode the time to
	// encode it and SnapshotRestore the time to decode and check it (what
	// a broker or controller does with a snapshot raft hands it).
	SnapshotBytes   int
	SnapshotEncode  time.Duration
	SnapshotRestore time.Duration
	// FenceElect is the time to apply the FenceBroker command of broker
	// 1: every partition it led gets a new leader, every ISR it was in
	// shrinks. FenceMoved counts the partitions whose leader moved.
	FenceElect time.Duration
	FenceMoved int
	// ChangeCommandBytes is an AlterPartition entry as raft carries it to
	// every voter and observer (the delta a change costs on the wire),
	// against SnapshotBytes for the whole image; ChangeApply is the mean
	// time to apply one.
	ChangeCommandBytes int
	ChangeApply        time.Duration
}

// MeasureScale builds the image of a large cluster with the state
// machine's own apply (no raft, no sockets: the commands the leader would
// log, applied in order) and measures what the scale questions
// ask: the time to apply a full snapshot, to elect new leaders for a
// failed broker's partitions, the image's memory, and the bytes of a
// change against the bytes of an image. It is `ringlog bench metadata`.
func MeasureScale(cfg ScaleConfig) (ScaleReport, error) {
	if cfg.Brokers < cfg.RF || cfg.RF < 1 || cfg.Brokers < 2 {
		return ScaleReport{}, fmt.Errorf("controller: %d brokers cannot hold replication factor %d", cfg.Brokers, cfg.RF)
	}
	if cfg.PartitionsPerTopic < 1 || cfg.PartitionsPerTopic > maxPartitions || cfg.Partitions < cfg.PartitionsPerTopic {
		return ScaleReport{}, fmt.Errorf("controller: %d partitions per topic of %d", cfg.PartitionsPerTopic, cfg.Partitions)
	}
	if cfg.FailedLeads > cfg.Partitions {
		return ScaleReport{}, fmt.Errorf("controller: broker 1 cannot lead %d of %d partitions", cfg.FailedLeads, cfg.Partitions)
	}
	if cfg.Changes < 1 {
		cfg.Changes = 1
	}
	rep := ScaleReport{Config: cfg}
	before := liveHeap()

	start := time.Now()
	img := emptyImage()
	var index uint64
	step := func(c *command) (result, error) {
		index++
		next, res := apply(img, index, c)
		if res.err != nil {
			return res, fmt.Errorf("controller: %s: %w", c.typ, res.err)
		}
		img = next
		return res, nil
	}
	epochs := make([]int64, cfg.Brokers+1)
	for id := 1; id <= cfg.Brokers; id++ {
		c := &command{typ: cmdRegisterBroker, brokerID: int32(id), addr: fmt.Sprintf("10.0.%d.%d:9092", id/256, id%256)}
		if _, err := step(c); err != nil {
			return rep, err
		}
		epochs[id] = int64(index)
	}
	topics := (cfg.Partitions + cfg.PartitionsPerTopic - 1) / cfg.PartitionsPerTopic
	k := 0 // the partition's number in the whole cluster
	for ti := range topics {
		n := min(cfg.PartitionsPerTopic, cfg.Partitions-ti*cfg.PartitionsPerTopic)
		as := make([][]int32, n)
		for i := range as {
			as[i] = scaleAssignment(cfg, k)
			k++
		}
		c := &command{typ: cmdCreateTopic, topic: fmt.Sprintf("topic-%05d", ti), assignments: as}
		if _, err := rand.Read(c.topicID[:]); err != nil {
			return rep, err
		}
		if _, err := step(c); err != nil {
			return rep, err
		}
	}
	rep.Build = time.Since(start)
	rep.ImageHeapBytes = liveHeap() - before

	start = time.Now()
	snap := encodeImage(img)
	rep.SnapshotEncode = time.Since(start)
	rep.SnapshotBytes = len(snap)
	start = time.Now()
	restored, err := decodeImage(snap)
	rep.SnapshotRestore = time.Since(start)
	if err != nil {
		return rep, err
	}
	if restored.Index != img.Index || len(restored.topics) != len(img.topics) {
		return rep, fmt.Errorf("controller: the restored image differs (index %d, %d topics)", restored.Index, len(restored.topics))
	}

	// Per change: shrink and expand one partition's ISR, on partitions
	// led by brokers other than 1, as their leaders would.
	var changeTotal time.Duration
	names := img.TopicNames()
	for i := range cfg.Changes {
		name := names[i%len(names)]
		pi := int32((i / len(names)) % cfg.PartitionsPerTopic)
		p, ok := img.Partition(name, pi)
		if !ok || p.Leader == 1 || len(p.ISR) < 2 {
			continue
		}
		isr := slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return r == p.ISR[len(p.ISR)-1] && r != p.Leader })
		c := &command{typ: cmdAlterPartition, topic: name, partitions: pi, brokerID: p.Leader, epoch: epochs[p.Leader],
			leaderEpoch: p.LeaderEpoch, partitionEpoch: p.PartitionEpoch, isr: isr}
		if rep.ChangeCommandBytes == 0 {
			rep.ChangeCommandBytes = len(c.encode())
		}
		start = time.Now()
		if _, err := step(c); err != nil {
			return rep, err
		}
		changeTotal += time.Since(start)
	}
	rep.ChangeApply = changeTotal / time.Duration(cfg.Changes)

	led := 0
	for _, name := range names {
		for _, p := range img.Topic(name).Partitions {
			if p.Leader == 1 {
				led++
			}
		}
	}
	start = time.Now()
	if _, err := step(&command{typ: cmdFenceBroker, brokerID: 1, epoch: epochs[1]}); err != nil {
		return rep, err
	}
	rep.FenceElect = time.Since(start)
	for _, name := range names {
		for _, p := range img.Topic(name).Partitions {
			if p.Leader == 1 {
				return rep, fmt.Errorf("controller: %s still led by the fenced broker", name)
			}
		}
	}
	rep.FenceMoved = led
	runtime.KeepAlive(img)
	return rep, nil
}

// scaleAssignment is partition k's replicas: led by broker 1 for the
// first FailedLeads partitions, by brokers 2..Brokers in turn after
// them; the followers are the brokers after the leader, in turn.
func scaleAssignment(cfg ScaleConfig, k int) []int32 {
	b := cfg.Brokers
	var leader int
	if k < cfg.FailedLeads {
		leader = 1
	} else {
		leader = 2 + (k-cfg.FailedLeads)%(b-1)
	}
	// Followers at offsets o, o+1, ... after the leader, all within
	// 1..b-1 of it: distinct, and never the leader.
	o := 1 + k%(b-cfg.RF+1)
	a := make([]int32, cfg.RF)
	a[0] = int32(leader)
	for r := 1; r < cfg.RF; r++ {
		a[r] = int32((leader-1+o+r-1)%b + 1)
	}
	return a
}

// liveHeap is the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
