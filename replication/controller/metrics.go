package controller

import (
	"time"

	"github.com/hashicorp/raft"
)

// What an operator's dashboard reads from the controller: the counts
// Kafka's active controller reports as kafka.controller:type=KafkaController
// metrics, and the time a command waits before it is applied (Kafka's
// ControllerEventManager EventQueueTimeMs). broker/metrics_cluster.go
// exports them under Kafka's names.

// Stats are the quorum's counts as the active controller reports them.
// Only the raft leader reports them (Active true); every other voter
// reports zeros, as Kafka's inactive controllers do, so that a sum over
// the cluster's brokers counts each partition once.
type Stats struct {
	// Active is set on the raft leader (ActiveControllerCount 1).
	Active bool
	// Topics and Partitions count the image's topics and partitions
	// (GlobalTopicCount, GlobalPartitionCount).
	Topics, Partitions int
	// Offline counts the partitions without a leader
	// (OfflinePartitionsCount).
	Offline int
	// PreferredImbalance counts the partitions not led by their preferred
	// (first) replica, leaderless ones included, as KRaft counts them
	// (PreferredReplicaImbalanceCount).
	PreferredImbalance int
	// FencedBrokers and ActiveBrokers count the registered brokers that
	// are fenced and those that are not (FencedBrokerCount,
	// ActiveBrokerCount).
	FencedBrokers, ActiveBrokers int
}

// Stats returns the counts of the current image if this node is the raft
// leader, zeros otherwise. It walks every partition: it is meant for a
// metrics scrape, not for a hot path.
func (c *Controller) Stats() Stats {
	if c.raft.State() != raft.Leader {
		return Stats{}
	}
	img := c.Image()
	st := Stats{Active: true, Topics: len(img.topics)}
	for _, t := range img.topics {
		st.Partitions += len(t.Partitions)
		for _, p := range t.Partitions {
			if p.Leader == -1 {
				st.Offline++
			}
			if len(p.Replicas) > 0 && p.Leader != p.Replicas[0] {
				st.PreferredImbalance++
			}
		}
	}
	for _, b := range img.brokers {
		if b.Fenced {
			st.FencedBrokers++
		} else {
			st.ActiveBrokers++
		}
	}
	return st
}

// ObserveQueueTime sets fn to be told, for every command this node
// proposes as the raft leader and sees applied, the time from its
// submission to raft to its application to the state machine here (the
// raft round, the commit, and the commands queued before it on the FSM
// goroutine). Commands a follower forwards are measured on the leader
// that proposes them. fn runs on the proposing goroutine and must not
// block; nil stops the observation.
func (c *Controller) ObserveQueueTime(fn func(time.Duration)) {
	if fn == nil {
		c.queueTime.Store(nil)
		return
	}
	c.queueTime.Store(&fn)
}

// observeQueueTime reports one command's wait to the observer, if any.
func (c *Controller) observeQueueTime(submitted time.Time) {
	if fn := c.queueTime.Load(); fn != nil {
		(*fn)(time.Since(submitted))
	}
}
