package group

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/segment"
)

// The KIP-848 consumer groups on the shards: the state machine of
// consumer.go runs inside engine.OnShard like the classic protocol, its
// records are written with the partition's other records, answers leave
// once the records they report are written, and timers only queue work
// to the shard.

// ConsumerGroupHeartbeat (v0-v1, KIP-848) joins, heartbeats in, or leaves
// a consumer group; the answer carries the member's epoch and, when it
// changed, its assignment.
func (c *Coordinator) ConsumerGroupHeartbeat(cl Client, req *kmsg.ConsumerGroupHeartbeatRequest, reply func(*kmsg.ConsumerGroupHeartbeatResponse)) {
	fail := func(code int16, msg string) {
		r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		r.ErrorCode = code
		if msg != "" {
			r.ErrorMessage = &msg
		}
		reply(r)
	}
	if c == nil {
		fail(kerr.CoordinatorNotAvailable.Code, "")
		return
	}
	if e := validateHeartbeat(req, &c.cfg); e != nil {
		fail(e.err.Code, e.msg)
		return
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		// Compiled here, on the connection's goroutine, so that the
		// shard finds it compiled; a regex that does not compile is
		// refused on the shard, after the member checks, in Kafka's order.
		_, _ = c.regexes.compile(*req.SubscribedTopicRegex)
	}
	if req.MemberID == "" {
		// v0: the coordinator names a joining member.
		req.MemberID = newConsumerMemberID()
	}
	c.onGroupPartition(req.Group, func(p *partition) { p.consumerHeartbeat(cl, req, reply) }, func(code int16) { fail(code, "") })
}

// newConsumerMemberID is a random UUID in the form Kafka's Uuid prints
// (URL-safe base64, no padding), as the coordinator generates for v0.
func newConsumerMemberID() string {
	var u [16]byte
	rand.Read(u[:])
	return base64.RawURLEncoding.EncodeToString(u[:])
}

func (p *partition) env() *cgEnv {
	return &cgEnv{now: time.Now(), topics: p.c.eng, cfg: &p.c.cfg, regexes: &p.c.regexes}
}

func (p *partition) consumerHeartbeat(cl Client, req *kmsg.ConsumerGroupHeartbeatRequest, reply func(*kmsg.ConsumerGroupHeartbeatResponse)) {
	refuse := func(code *kerr.Error, msg string) {
		r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		r.ErrorCode, r.ErrorMessage = code.Code, &msg
		reply(r)
	}
	g := p.groups[req.Group]
	cg := (*cgroup)(nil)
	switch {
	case g != nil && g.consumer != nil:
		cg = g.consumer
	case g != nil && (req.MemberEpoch != 0 || !g.classicEmpty()):
		// A classic group with members: Kafka converts it when its
		// group.consumer.migration.policy allows the upgrade; ringlog
		// does not convert groups, and answers as Kafka does with the
		// upgrade disabled.
		refuse(kerr.GroupIDNotFound, fmt.Sprintf("Group %s is not a consumer group.", req.Group))
		return
	case g == nil && req.MemberEpoch != 0:
		refuse(kerr.GroupIDNotFound, fmt.Sprintf("Consumer group %s not found.", req.Group))
		return
	}
	fresh := cg == nil
	if fresh {
		// A new group, or an empty classic one (its offsets, if any, are
		// kept): built aside, and installed only if the join is accepted.
		cg = newCgroup(req.Group)
	}
	env := p.env()
	env.heartbeat, env.describable = true, cl.DescribeTopic
	resp, recs := cg.heartbeat(env, cl, req)
	if resp.ErrorCode != 0 {
		reply(resp)
		return
	}
	if fresh {
		if g == nil {
			g = p.newGroup(req.Group)
		} else {
			recs = append(g.leaveClassic(), recs...)
		}
		g.consumer = cg
	}
	p.syncConsumerTimers(g)
	p.writeConsumer(g, recs, func(code int16) {
		if code != 0 {
			r := kmsg.NewPtrConsumerGroupHeartbeatResponse()
			r.ErrorCode = code
			resp = r
		}
		reply(resp)
	})
}

// classicEmpty reports whether g is a classic group with no member (nor a
// member id handed out), which a consumer group may replace.
func (g *group) classicEmpty() bool {
	return g.consumer == nil && g.state == stateEmpty && len(g.members) == 0 && len(g.pending) == 0
}

// leaveClassic turns an empty classic group into the shell of a consumer
// group (its offsets stay), and returns the tombstone of its classic
// metadata if it ever wrote any.
func (g *group) leaveClassic() []record {
	g.stopTimers()
	var recs []record
	if g.generation > 0 {
		recs = append(recs, record{key: groupKey(g.id)})
	}
	g.generation, g.protocol, g.protocolType, g.leader, g.subscribed = 0, nil, "", "", nil
	return recs
}

// consumerToClassic turns an empty consumer group into an empty classic
// group (a classic member joins it, as Kafka allows) and writes the
// tombstones of its consumer group records.
func (p *partition) consumerToClassic(g *group) {
	cg := g.consumer
	recs := cg.tombstones()
	cg.stopTimers()
	g.consumer = nil
	g.state, g.generation = stateEmpty, 0
	p.appendRecords(recs, func(err error) {
		if err != nil {
			p.c.log.Warn("group: writing consumer group tombstones failed", "group", g.id, "err", err)
		}
	})
}

// writeConsumer writes a consumer group's records, then calls done with
// the Kafka code of the outcome. With no record, done still waits for
// the writes in flight, whose state the answer may report, and fails as
// the last of them did (this broker stopped leading the partition
// meanwhile: NOT_COORDINATOR, the member looks for the new coordinator).
func (p *partition) writeConsumer(g *group, recs []record, done func(code int16)) {
	if len(recs) == 0 {
		p.afterWrites(func(err error) {
			if errors.Is(err, segment.ErrBatchTooBig) || errors.Is(err, segment.ErrInvalidBatch) {
				err = nil // another group's record, refused on its own
			}
			done(storeErrorCode(err))
		})
		return
	}
	p.appendRecords(recs, func(err error) {
		code := groupStoreErrorCode(err)
		if err != nil {
			p.c.log.Warn("group: writing consumer group records failed", "group", g.id, "err", err)
			if g.live() && g.consumer != nil {
				g.consumer.lostWrite()
				p.syncConsumerTimers(g)
			}
		}
		done(code)
	})
}

// syncConsumerTimers arms, moves or stops the timers of the members the
// last operation touched, from their deadlines.
func (p *partition) syncConsumerTimers(g *group) {
	cg := g.consumer
	if cg == nil {
		return
	}
	for _, m := range cg.dirty {
		if cg.members[m.id] != m {
			m.stopTimers()
			continue
		}
		// A session timer is armed once and re-armed when it fires before
		// a deadline that heartbeats moved, as classic members' are.
		if m.sessTimer == nil || m.sessTimerAt.After(m.sessionAt) {
			p.armSession(g, m)
		}
		switch {
		case m.rebalanceAt.IsZero():
			if m.rebTimer != nil {
				m.rebTimer.Stop()
				m.rebTimer = nil
			}
			m.rebSeq++
		case m.rebTimer == nil || !m.rebTimerAt.Equal(m.rebalanceAt):
			p.armRebalance(g, m)
		}
	}
	cg.dirty = cg.dirty[:0]
}

func (m *cmember) stopTimers() {
	if m.sessTimer != nil {
		m.sessTimer.Stop()
		m.sessTimer = nil
	}
	if m.rebTimer != nil {
		m.rebTimer.Stop()
		m.rebTimer = nil
	}
	m.sessSeq++
	m.rebSeq++
}

func (cg *cgroup) stopTimers() {
	for _, m := range cg.members {
		m.stopTimers()
	}
	for _, m := range cg.dirty {
		m.stopTimers()
	}
	cg.dirty = nil
}

func (p *partition) armSession(g *group, m *cmember) {
	if m.sessTimer != nil {
		m.sessTimer.Stop()
	}
	m.sessSeq++
	seq := m.sessSeq
	m.sessTimerAt = m.sessionAt
	m.sessTimer = p.after(time.Until(m.sessionAt), func() {
		if m.sessSeq != seq || !g.live() || g.consumer == nil || g.consumer.members[m.id] != m {
			return
		}
		m.sessTimer = nil
		env := p.env()
		if env.now.Before(m.sessionAt) {
			p.armSession(g, m)
			return
		}
		p.c.log.Debug("consumer group member session expired", "group", g.id, "member", m.id, "epoch", m.cur.epoch)
		p.fenced(g, g.consumer.expire(env, m))
	})
}

func (p *partition) armRebalance(g *group, m *cmember) {
	if m.rebTimer != nil {
		m.rebTimer.Stop()
	}
	m.rebSeq++
	seq := m.rebSeq
	m.rebTimerAt = m.rebalanceAt
	m.rebTimer = p.after(time.Until(m.rebalanceAt), func() {
		if m.rebSeq != seq || !g.live() || g.consumer == nil || g.consumer.members[m.id] != m {
			return
		}
		m.rebTimer = nil
		env := p.env()
		recs := g.consumer.rebalanceExpired(env, m)
		if recs == nil {
			if !m.rebalanceAt.IsZero() && env.now.Before(m.rebalanceAt) {
				p.armRebalance(g, m)
			}
			return
		}
		p.c.log.Debug("consumer group member did not revoke within its rebalance timeout", "group", g.id, "member", m.id, "epoch", m.cur.epoch)
		p.fenced(g, recs)
	})
}

// fenced writes what a timer's fencing of a member changed.
func (p *partition) fenced(g *group, recs []record) {
	p.syncConsumerTimers(g)
	if len(recs) > 0 {
		p.writeConsumer(g, recs, func(int16) {})
	}
}

// ConsumerGroupDescribe (v0-v1, KIP-848) describes consumer groups: their
// epochs and state, and every member's subscription, assignment and
// target assignment.
func (c *Coordinator) ConsumerGroupDescribe(req *kmsg.ConsumerGroupDescribeRequest, reply func(*kmsg.ConsumerGroupDescribeResponse)) {
	resp := kmsg.NewPtrConsumerGroupDescribeResponse()
	resp.Groups = make([]kmsg.ConsumerGroupDescribeResponseGroup, len(req.Groups))
	c.byPartition(req.Groups, func(p *partition, idx []int) {
		for _, i := range idx {
			resp.Groups[i] = p.consumerDescribe(req.Groups[i], req.IncludeAuthorizedOperations)
		}
	}, func(idx []int, code int16) {
		for _, i := range idx {
			resp.Groups[i] = kmsg.NewConsumerGroupDescribeResponseGroup()
			resp.Groups[i].Group, resp.Groups[i].ErrorCode = req.Groups[i], code
		}
	}, func() { reply(resp) })
}

func (p *partition) consumerDescribe(id string, ops bool) kmsg.ConsumerGroupDescribeResponseGroup {
	d := kmsg.NewConsumerGroupDescribeResponseGroup()
	d.Group = id
	g := p.groups[id]
	var msg string
	switch {
	case id == "":
		d.ErrorCode = kerr.InvalidGroupID.Code
		return d
	case g == nil || g.state == stateDead:
		msg = fmt.Sprintf("Group %s not found.", id)
	case g.consumer == nil:
		msg = fmt.Sprintf("Group %s is not a consumer group.", id)
	}
	if msg != "" {
		d.ErrorCode, d.ErrorMessage = kerr.GroupIDNotFound.Code, &msg
		return d
	}
	cg := g.consumer
	d.State, d.Epoch, d.AssignmentEpoch, d.AssignorName = cg.state(), cg.epoch, cg.assignmentEpoch, cg.assignorName(&p.c.cfg)
	if ops {
		d.AuthorizedOperations = groupOperations
	}
	names := make(map[[16]byte]string, len(cg.subMeta))
	for name, t := range cg.subMeta {
		names[t.id] = name
	}
	describe := func(a assignment) kmsg.Assignment {
		var out kmsg.Assignment
		for _, tid := range a.topicIDs() {
			name, ok := names[tid]
			if !ok {
				info, found := p.c.eng.TopicByID(tid)
				if !found {
					continue // a deleted topic, as Kafka leaves it out
				}
				name = info.Name
			}
			out.TopicPartitions = append(out.TopicPartitions, kmsg.AssignmentTopicPartition{TopicID: tid, Topic: name, Partitions: slices.Clone(a[tid])})
		}
		return out
	}
	for _, mid := range slices.Sorted(maps.Keys(cg.members)) {
		m := cg.members[mid]
		dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.RackID, dm.MemberEpoch = m.id, m.meta.instanceID, m.meta.rackID, m.cur.epoch
		dm.ClientID, dm.ClientHost = m.meta.clientID, m.meta.clientHost
		dm.SubscribedTopics = append([]string{}, m.meta.topics...)
		dm.SubscribedTopicRegex = m.meta.regex
		if dm.SubscribedTopicRegex == nil {
			// Kafka describes a member without a regular expression
			// with "", not null.
			dm.SubscribedTopicRegex = kmsg.StringPtr("")
		}
		dm.Assignment, dm.TargetAssignment = describe(m.cur.assigned), describe(cg.target[mid])
		dm.MemberType = 1 // a member of the consumer protocol
		d.Members = append(d.Members, dm)
	}
	return d
}

// checkCommit is OffsetCommit's check for a consumer group (Kafka's
// ConsumerGroup.validateOffsetCommit): with no member, anyone may commit
// without a member epoch (an admin client, a consumer that assigns
// itself); otherwise the member must exist, commit at v9 or later, and not
// with an epoch newer than its own. An older epoch (a member whose commit
// crossed the heartbeat that moved it on) commits only partitions it
// still holds, assigned at or before that epoch (KIP-1251, Kafka 4.3):
// any other partition refuses the whole commit with STALE_MEMBER_EPOCH,
// which the member answers by heartbeating for its new epoch.
func (cg *cgroup) checkCommit(req *kmsg.OffsetCommitRequest) int16 {
	if req.Generation < 0 && len(cg.members) == 0 {
		return 0
	}
	m := cg.members[req.MemberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case req.Version < 9:
		return kerr.UnsupportedVersion.Code
	case req.Generation > m.cur.epoch:
		return kerr.StaleMemberEpoch.Code
	case req.Generation < m.cur.epoch:
		for _, t := range req.Topics {
			id := t.TopicID
			if id == ([16]byte{}) {
				meta, ok := cg.subMeta[t.Topic]
				if !ok {
					return kerr.StaleMemberEpoch.Code
				}
				id = meta.id
			}
			for _, p := range t.Partitions {
				since, ok := m.cur.assignedSince(id, p.Partition)
				if !ok || req.Generation < since {
					return kerr.StaleMemberEpoch.Code
				}
			}
		}
	}
	return 0
}

// checkFetch is OffsetFetch's check (v9+) for a consumer group: a request
// naming a member must come from a member at its current epoch.
func (cg *cgroup) checkFetch(memberID *string, epoch int32) int16 {
	if memberID == nil && epoch < 0 {
		return 0
	}
	var m *cmember
	if memberID != nil {
		m = cg.members[*memberID]
	}
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case epoch != m.cur.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// installConsumers builds the partition's consumer groups from what
// replay found and starts their members' timers.
func (p *partition) installConsumers(st *loadState) {
	now := time.Now()
	for id, cl := range st.consumers {
		g := p.groups[id]
		if g == nil {
			g = p.newGroup(id)
		}
		g.consumer = cl.build(id, now, &p.c.cfg, func(members []string) {
			p.c.log.Warn("group: partition held by two consumer group members in the log", "group", id, "members", members)
		})
		p.syncConsumerTimers(g)
	}
}

// build makes the group replay found, as it was: epochs, subscriptions,
// target assignments and every member's reconciliation, so that a restart
// of the broker costs its consumers no rebalance. Sessions start over at
// now; a member still revoking gets its rebalance timeout again. conflict
// is told of a partition two members claim.
func (cl *consumerLoad) build(id string, now time.Time, cfg *Config, conflict func(members []string)) *cgroup {
	cg := newCgroup(id)
	cg.epoch, cg.assignmentEpoch = cl.epoch, cl.assignmentEpoch
	if cl.subMeta != nil {
		cg.subMeta = cl.subMeta
	}
	for _, mid := range slices.Sorted(maps.Keys(cl.members)) {
		m := &cmember{id: mid, meta: *cl.members[mid], cur: currentAssignment{assigned: assignment{}, revoking: assignment{}}}
		if c := cl.current[mid]; c != nil {
			m.cur = *c
		}
		cg.members[mid] = m
		if m.meta.instanceID != nil {
			cg.static[*m.meta.instanceID] = mid
		}
		if a, ok := cl.targets[mid]; ok {
			cg.target[mid] = a
		}
		for _, a := range []assignment{m.cur.assigned, m.cur.revoking} {
			for tid, ps := range a {
				for _, part := range ps {
					tp := tpKey{tid, part}
					if other, taken := cg.owners[tp]; taken {
						// Only a write lost in the middle of a reassignment
						// leaves two holders; the first keeps it, and the
						// other gets it once it is released.
						conflict([]string{other, mid})
						continue
					}
					cg.owners[tp] = mid
				}
			}
		}
		m.sessionAt = now.Add(cfg.ConsumerSessionTimeout)
		if m.cur.state == memberUnrevoked {
			m.rebalanceAt, m.rebalanceEpoch = now.Add(m.rebalanceTimeout()), m.cur.epoch
		}
		cg.dirty = append(cg.dirty, m)
	}
	return cg
}
