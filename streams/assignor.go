package streams

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// taskBalancer assigns tasks, not partitions: every partition of a task
// (partition p of each source topic of a subtopology) goes to one
// member, as Kafka Streams' StreamsPartitionAssignor does; a
// partition-level balancer (cooperative-sticky, or KIP-848's server-side
// assignors) could split a task's partitions between two members and
// the task's store between two owners. Tasks stay with the member that
// owned them (sticky: its store is warm) up to an even share, the rest
// go to the least loaded members, and the plan is made cooperative
// (KIP-429): a task moving between members is first revoked, then
// assigned in the next rebalance, so no two members own it at once.
type taskBalancer struct{ app *App }

// ProtocolName is the group protocol; all members of an application use
// it, as Kafka Streams' "stream".
func (*taskBalancer) ProtocolName() string { return "ringlog-streams" }
func (*taskBalancer) IsCooperative() bool  { return true }

func (*taskBalancer) JoinGroupMetadata(topics []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = topics
	meta.Generation = generation
	for t, ps := range current {
		o := kmsg.NewConsumerMemberMetadataOwnedPartition()
		o.Topic, o.Partitions = t, ps
		meta.OwnedPartitions = append(meta.OwnedPartitions, o)
	}
	sort.Slice(meta.OwnedPartitions, func(i, j int) bool { return meta.OwnedPartitions[i].Topic < meta.OwnedPartitions[j].Topic })
	return meta.AppendTo(nil)
}

func (*taskBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(assignment)
}

func (b *taskBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	if err != nil {
		return nil, nil, err
	}
	return cb, cb.MemberTopics(), nil
}

// Balance is kgo's ConsumerBalancerBalance.
func (b *taskBalancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	plan := planTasks(b.app.topicSub, cb, topics)
	p := cb.NewPlan()
	for member, tps := range plan {
		for t, ps := range tps {
			p.AddPartitions(member, t, ps)
		}
	}
	p.AdjustCooperative(cb)
	return p
}

// planTasks groups the partitions into tasks and spreads the tasks.
func planTasks(topicSub map[string]int, cb *kgo.ConsumerBalancer, topics map[string]int32) map[*kmsg.JoinGroupResponseMember]map[string][]int32 {
	type tpart struct {
		topic string
		p     int32
	}
	tasks := map[taskID][]tpart{}
	for t, n := range topics {
		sub, ok := topicSub[t]
		if !ok {
			sub = -1 - len(t) // a topic of another topology version: its own tasks
		}
		for p := int32(0); p < n; p++ {
			id := taskID{sub, p}
			tasks[id] = append(tasks[id], tpart{t, p})
		}
	}
	ids := make([]taskID, 0, len(tasks))
	for id := range tasks {
		ids = append(ids, id)
	}
	// Partition first: one subtopology's tasks spread over the members.
	sort.Slice(ids, func(i, j int) bool {
		if ids[i].partition != ids[j].partition {
			return ids[i].partition < ids[j].partition
		}
		return ids[i].sub < ids[j].sub
	})
	var members []*kmsg.JoinGroupResponseMember
	owner := map[tpart]*kmsg.JoinGroupResponseMember{}
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		members = append(members, m)
		for _, o := range meta.OwnedPartitions {
			for _, p := range o.Partitions {
				owner[tpart{o.Topic, p}] = m
			}
		}
	})
	plan := map[*kmsg.JoinGroupResponseMember]map[string][]int32{}
	load := map[*kmsg.JoinGroupResponseMember]int{}
	if len(members) == 0 {
		return plan
	}
	quota := (len(ids) + len(members) - 1) / len(members)
	give := func(m *kmsg.JoinGroupResponseMember, id taskID) {
		if plan[m] == nil {
			plan[m] = map[string][]int32{}
		}
		for _, tp := range tasks[id] {
			plan[m][tp.topic] = append(plan[m][tp.topic], tp.p)
		}
		load[m]++
	}
	// Members that may hold a full quota: as many as the remainder
	// allows, so that loads differ by one at most.
	full := len(ids) % len(members)
	if full == 0 {
		full = len(members)
	}
	fullUsed := 0
	var rest []taskID
	for _, id := range ids {
		var prev *kmsg.JoinGroupResponseMember
		for _, tp := range tasks[id] {
			if m := owner[tp]; m != nil {
				prev = m
				break
			}
		}
		if prev != nil && (load[prev] < quota-1 || load[prev] == quota-1 && fullUsed < full) {
			if load[prev] == quota-1 {
				fullUsed++
			}
			give(prev, id)
			continue
		}
		rest = append(rest, id)
	}
	for _, id := range rest {
		best := members[0]
		for _, m := range members[1:] {
			if load[m] < load[best] {
				best = m
			}
		}
		give(best, id)
	}
	return plan
}
