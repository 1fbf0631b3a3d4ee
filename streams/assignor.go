package streams

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
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
// With Config.NumStandbyReplicas, tasks with stores also get standbys
// (planStandbys), and a task that must move prefers a member holding it
// as a standby.
type taskBalancer struct{ app *App }

// ProtocolName is the group protocol; all members of an application use
// it, as Kafka Streams' "stream".
func (*taskBalancer) ProtocolName() string { return "ringlog-streams" }
func (*taskBalancer) IsCooperative() bool  { return true }

// JoinGroupMetadata is the consumer protocol's subscription; its UserData
// lists the standby tasks this member holds (taskList), so that the
// leader keeps them there and prefers their holder when a task's active
// copy must move.
func (b *taskBalancer) JoinGroupMetadata(topics []string, current map[string][]int32, generation int32) []byte {
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
	if held := b.app.standbysHeld(); len(held) > 0 {
		meta.UserData = appendTaskList(nil, held)
	}
	return meta.AppendTo(nil)
}

// ParseSyncAssignment reads the member's partitions, as
// kgo.ParseConsumerSyncAssignment does, and its standby tasks from the
// assignment's UserData, which kgo's parser drops. Unreadable UserData
// (a leader of a newer version) costs the standbys, not the assignment.
func (b *taskBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	var ma kmsg.ConsumerMemberAssignment
	if err := ma.ReadFrom(assignment); err != nil {
		return nil, fmt.Errorf("streams: sync assignment: %w", err)
	}
	m := make(map[string][]int32, len(ma.Topics))
	for _, t := range ma.Topics {
		m[t.Topic] = t.Partitions
	}
	standbys, err := decodeTaskList(ma.UserData)
	if err != nil {
		b.app.log.Warn("streams: standby assignment unreadable", "err", err)
		standbys = nil
	}
	b.app.setStandbysWanted(standbys)
	return m, nil
}

func (b *taskBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	if err != nil {
		return nil, nil, err
	}
	return cb, cb.MemberTopics(), nil
}

// Balance is kgo's ConsumerBalancerBalance: the active tasks, made
// cooperative, then the standby tasks, carried in each member's
// assignment UserData.
func (b *taskBalancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	held := map[*kmsg.JoinGroupResponseMember]map[taskID]bool{}
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		ids, err := decodeTaskList(meta.UserData)
		if err != nil {
			b.app.log.Warn("streams: standby tasks of a member unreadable", "member", m.MemberID, "err", err)
			return
		}
		for _, id := range ids {
			if held[m] == nil {
				held[m] = map[taskID]bool{}
			}
			held[m][id] = true
		}
	})
	plan, dest, prev := planTasks(b.app.subOf, cb, topics, held)
	p := cb.NewPlan()
	for member, tps := range plan {
		for t, ps := range tps {
			p.AddPartitions(member, t, ps)
		}
	}
	p.AdjustCooperative(cb)
	if b.app.cfg.NumStandbyReplicas <= 0 {
		return p
	}
	var members []*kmsg.JoinGroupResponseMember
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, _ *kmsg.ConsumerMemberMetadata) { members = append(members, m) })
	var stateful []taskID
	for id := range dest {
		if id.sub >= 0 && id.sub < len(b.app.topo.subs) && len(b.app.topo.subs[id.sub].stores) > 0 {
			stateful = append(stateful, id)
		}
	}
	sortTaskIDs(stateful)
	return &standbyPlan{plan: p, standbys: planStandbys(stateful, members, dest, prev, held, b.app.cfg.NumStandbyReplicas)}
}

func sortTaskIDs(ids []taskID) {
	// Partition first: one subtopology's tasks spread over the members.
	sort.Slice(ids, func(i, j int) bool {
		if ids[i].partition != ids[j].partition {
			return ids[i].partition < ids[j].partition
		}
		return ids[i].sub < ids[j].sub
	})
}

// planTasks groups the partitions into tasks and spreads the tasks: each
// stays with its previous owner up to an even share; a task that must
// move goes to a member holding it as a standby if that member has room,
// else to the least loaded member. It returns the plan, each task's
// destination (before the cooperative adjustment defers moves) and its
// previous owner.
func planTasks(subOf func(topic string) (int, bool), cb *kgo.ConsumerBalancer, topics map[string]int32,
	held map[*kmsg.JoinGroupResponseMember]map[taskID]bool,
) (plan map[*kmsg.JoinGroupResponseMember]map[string][]int32, dest, prevOwner map[taskID]*kmsg.JoinGroupResponseMember) {
	type tpart struct {
		topic string
		p     int32
	}
	tasks := map[taskID][]tpart{}
	for t, n := range topics {
		sub, ok := subOf(t) // a pattern's topic listed by another member first too
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
	sortTaskIDs(ids)
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
	plan = map[*kmsg.JoinGroupResponseMember]map[string][]int32{}
	dest = map[taskID]*kmsg.JoinGroupResponseMember{}
	prevOwner = map[taskID]*kmsg.JoinGroupResponseMember{}
	load := map[*kmsg.JoinGroupResponseMember]int{}
	if len(members) == 0 {
		return plan, dest, prevOwner
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
		dest[id] = m
	}
	// Members that may hold a full quota: as many as the remainder
	// allows, so that loads differ by one at most.
	full := len(ids) % len(members)
	if full == 0 {
		full = len(members)
	}
	fullUsed := 0
	// room says whether m may take one more task and counts the full
	// quota it then reaches.
	room := func(m *kmsg.JoinGroupResponseMember) bool {
		if load[m] < quota-1 {
			return true
		}
		if load[m] == quota-1 && fullUsed < full {
			fullUsed++
			return true
		}
		return false
	}
	var rest []taskID
	for _, id := range ids {
		var prev *kmsg.JoinGroupResponseMember
		for _, tp := range tasks[id] {
			if m := owner[tp]; m != nil {
				prev = m
				break
			}
		}
		if prev != nil {
			prevOwner[id] = prev
			if room(prev) {
				give(prev, id)
				continue
			}
		}
		rest = append(rest, id)
	}
	// A task that moves goes to a member holding it as a standby: its
	// store there is (nearly) up to date. Only after every task that
	// stays has its place, or a standby holder could fill up with moved
	// tasks and push out one of its own.
	var left []taskID
	for _, id := range rest {
		placed := false
		for _, m := range members {
			if held[m][id] && m != prevOwner[id] && room(m) {
				give(m, id)
				placed = true
				break
			}
		}
		if !placed {
			left = append(left, id)
		}
	}
	for _, id := range left {
		best := members[0]
		for _, m := range members[1:] {
			if load[m] < load[best] {
				best = m
			}
		}
		give(best, id)
	}
	return plan, dest, prevOwner
}

// planStandbys gives each stateful task up to n standbys on members other
// than the one its active copy is planned on (Kafka's
// num.standby.replicas; a member never holds a task twice): first the
// members holding it as a standby already, then its previous owner (its
// store is there), then the members with the fewest standbys, a member
// preferred for stickiness only while it holds less than an even share.
func planStandbys(stateful []taskID, members []*kmsg.JoinGroupResponseMember,
	dest, prevOwner map[taskID]*kmsg.JoinGroupResponseMember, held map[*kmsg.JoinGroupResponseMember]map[taskID]bool, n int,
) map[string][]taskID {
	out := map[string][]taskID{}
	if n > len(members)-1 {
		n = len(members) - 1
	}
	if n <= 0 {
		return out
	}
	quota := (len(stateful)*n + len(members) - 1) / len(members)
	load := map[*kmsg.JoinGroupResponseMember]int{}
	for _, id := range stateful {
		chosen := map[*kmsg.JoinGroupResponseMember]bool{dest[id]: true}
		pick := func(m *kmsg.JoinGroupResponseMember) {
			chosen[m] = true
			load[m]++
			out[m.MemberID] = append(out[m.MemberID], id)
		}
		for k := 0; k < n; k++ {
			var best *kmsg.JoinGroupResponseMember
			rank := func(m *kmsg.JoinGroupResponseMember) int {
				switch {
				case load[m] >= quota:
					return 3
				case held[m][id]:
					return 0
				case prevOwner[id] == m:
					return 1
				}
				return 2
			}
			for _, m := range members {
				if chosen[m] {
					continue
				}
				if best == nil || rank(m) < rank(best) || rank(m) == rank(best) && load[m] < load[best] {
					best = m
				}
			}
			if best == nil {
				break
			}
			pick(best)
		}
	}
	// The greedy pass can leave the last tasks only full members to go
	// to: move standbys from the most loaded member to the least loaded
	// one, those it did not hold before first, until the loads differ by
	// one at most (or no move is possible). Each move lowers the spread,
	// so this ends.
	for {
		hi, lo := members[0], members[0]
		for _, m := range members[1:] {
			if load[m] > load[hi] {
				hi = m
			}
			if load[m] < load[lo] {
				lo = m
			}
		}
		if load[hi]-load[lo] <= 1 || !moveStandby(out, hi, lo, dest, held, load) {
			break
		}
	}
	return out
}

// moveStandby moves one standby from hi to lo, one hi did not hold
// before if it can; false if none may move.
func moveStandby(out map[string][]taskID, hi, lo *kmsg.JoinGroupResponseMember,
	dest map[taskID]*kmsg.JoinGroupResponseMember, held map[*kmsg.JoinGroupResponseMember]map[taskID]bool, load map[*kmsg.JoinGroupResponseMember]int,
) bool {
	for _, sticky := range []bool{false, true} {
		for i, id := range out[hi.MemberID] {
			if held[hi][id] != sticky || dest[id] == lo || containsTask(out[lo.MemberID], id) {
				continue
			}
			out[hi.MemberID] = slices.Delete(out[hi.MemberID], i, i+1)
			out[lo.MemberID] = append(out[lo.MemberID], id)
			load[hi]--
			load[lo]++
			return true
		}
	}
	return false
}

// standbyPlan is the active plan with each member's standby tasks in its
// assignment's UserData.
type standbyPlan struct {
	plan     *kgo.BalancePlan
	standbys map[string][]taskID // member id -> standby tasks
}

// IntoSyncAssignment encodes the plan as kgo's BalancePlan does (topics
// and partitions sorted, members by id), with the standby tasks added.
func (s *standbyPlan) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	var out []kmsg.SyncGroupRequestGroupAssignment
	for member, assignment := range s.plan.AsMemberIDMap() {
		ma := kmsg.NewConsumerMemberAssignment()
		for topic, partitions := range assignment {
			slices.Sort(partitions)
			t := kmsg.NewConsumerMemberAssignmentTopic()
			t.Topic, t.Partitions = topic, partitions
			ma.Topics = append(ma.Topics, t)
		}
		sort.Slice(ma.Topics, func(i, j int) bool { return ma.Topics[i].Topic < ma.Topics[j].Topic })
		if ids := s.standbys[member]; len(ids) > 0 {
			ma.UserData = appendTaskList(nil, ids)
		}
		sa := kmsg.NewSyncGroupRequestGroupAssignment()
		sa.MemberID, sa.MemberAssignment = member, ma.AppendTo(nil)
		out = append(out, sa)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MemberID < out[j].MemberID })
	return out
}

// A task list is the UserData of the subscription (the standby tasks a
// member holds) and of the assignment (the standby tasks it is to hold):
//
//	version u8 (1) | count u32 BE | count × (subtopology u32 BE | partition u32 BE)
//
// Ours, not Kafka Streams' SubscriptionInfo/AssignmentInfo: only members
// of this library share the group.
const taskListVersion = 1

var errTaskList = errors.New("streams: task list malformed")

func appendTaskList(b []byte, ids []taskID) []byte {
	b = append(b, taskListVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ids)))
	for _, id := range ids {
		b = binary.BigEndian.AppendUint32(b, uint32(id.sub))
		b = binary.BigEndian.AppendUint32(b, uint32(id.partition))
	}
	return b
}

// decodeTaskList reads a task list; empty bytes are an empty list. The
// count is checked against the bytes before anything is allocated.
func decodeTaskList(b []byte) ([]taskID, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if b[0] != taskListVersion {
		return nil, fmt.Errorf("%w: version %d", errTaskList, b[0])
	}
	if len(b) < 5 {
		return nil, fmt.Errorf("%w: %d bytes", errTaskList, len(b))
	}
	n := binary.BigEndian.Uint32(b[1:])
	body := b[5:]
	if uint64(n)*8 != uint64(len(body)) {
		return nil, fmt.Errorf("%w: %d tasks in %d bytes", errTaskList, n, len(body))
	}
	ids := make([]taskID, 0, n)
	for i := 0; i < len(body); i += 8 {
		sub, p := binary.BigEndian.Uint32(body[i:]), binary.BigEndian.Uint32(body[i+4:])
		if sub > math.MaxInt32 || p > math.MaxInt32 {
			return nil, fmt.Errorf("%w: task %d_%d", errTaskList, int32(sub), int32(p))
		}
		ids = append(ids, taskID{int(sub), int32(p)})
	}
	return ids, nil
}
