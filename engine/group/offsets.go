package group

import (
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
)

// commitItem is one partition of an OffsetCommit that passed the checks
// made off the shard (the partition exists).
type commitItem struct {
	t, p int // indexes in the request and response
	tp   engine.TP
	c    committed
	meta *string
}

// OffsetCommit (v0-v10) stores committed offsets. Members of a group
// commit with their generation (a consumer group's members with their
// member epoch, v9+, KIP-848); a "simple" consumer that does its own
// assignment commits with generation -1 and no member id, to a group with
// no members. Partitions that do not exist are refused one by one
// (UNKNOWN_TOPIC_OR_PARTITION, or UNKNOWN_TOPIC_ID for v10's topic ids),
// as Kafka's request handler does before the coordinator sees them.
func (c *Coordinator) OffsetCommit(req *kmsg.OffsetCommitRequest, reply func(*kmsg.OffsetCommitResponse)) {
	resp := kmsg.NewPtrOffsetCommitResponse()
	var items []commitItem
	now := time.Now().UnixMilli()
	for i, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var info engine.TopicInfo
		exists, name, unknown := false, rt.Topic, kerr.UnknownTopicOrPartition.Code
		if c != nil {
			if req.Version >= 10 {
				// v10 names topics by id (KIP-848); offsets stay keyed by
				// name in the log, as Kafka keeps them.
				info, exists = c.eng.TopicByID(rt.TopicID)
				if name = info.Name; !exists {
					unknown = kerr.UnknownTopicID.Code
				}
			} else {
				info, exists = c.eng.Topic(rt.Topic)
			}
		}
		for j, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
			if c != nil && (!exists || rp.Partition < 0 || rp.Partition >= info.Partitions) {
				st.Partitions[j].ErrorCode = unknown
				continue
			}
			cm := committed{offset: rp.Offset, leaderEpoch: rp.LeaderEpoch, commitMs: now, expireMs: -1}
			if req.Version == 1 && rp.Timestamp != -1 {
				// v1 lets the client set the commit time.
				cm.commitMs = rp.Timestamp
			}
			if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis != -1 {
				// v2-v4 may ask for a retention of their own; the offset then
				// expires at that time whatever the group does (pre-KIP-211).
				cm.expireMs = cm.commitMs + req.RetentionTimeMillis
			}
			items = append(items, commitItem{t: i, p: j, tp: engine.TP{Topic: name, Partition: rp.Partition}, c: cm, meta: rp.Metadata})
		}
		resp.Topics = append(resp.Topics, st)
	}
	fail := func(code int16) {
		for _, it := range items {
			resp.Topics[it.t].Partitions[it.p].ErrorCode = code
		}
		reply(resp)
	}
	if len(items) == 0 {
		reply(resp)
		return
	}
	c.onGroupPartition(req.Group, func(p *partition) { p.commit(req, items, resp, reply, fail) }, fail)
}

func (p *partition) commit(req *kmsg.OffsetCommitRequest, items []commitItem, resp *kmsg.OffsetCommitResponse,
	reply func(*kmsg.OffsetCommitResponse), fail func(int16)) {
	g := p.groups[req.Group]
	if g == nil {
		if req.Generation >= 0 {
			// A member of a group that does not exist (it expired, or was
			// deleted): its generation is stale. From v9 Kafka says so
			// with GROUP_ID_NOT_FOUND, which both protocols' clients
			// understand (KIP-848).
			if req.Version >= 9 {
				fail(kerr.GroupIDNotFound.Code)
				return
			}
			fail(kerr.IllegalGeneration.Code)
			return
		}
		g = p.newGroup(req.Group)
	}
	defer g.forgetIfUnused()
	if code := g.checkCommit(req); code != 0 {
		fail(code)
		return
	}
	m := g.byID[req.MemberID]
	switch g.state {
	case stateCompletingRebalance:
		// The member has its generation from the join but not its
		// assignment yet: it cannot have anything to commit.
		g.touch(m, m.sessionTimeout)
		fail(kerr.RebalanceInProgress.Code)
		return
	case statePreparingRebalance, stateStable:
		// Commits are allowed while rebalancing: the member learns of the
		// rebalance from its heartbeat, and commits what it consumed first.
		g.touch(m, m.sessionTimeout)
	}
	maxMeta := p.c.cfg.OffsetMetadataMaxBytes
	var recs []record
	stored := items[:0:0]
	for _, it := range items {
		if it.meta != nil {
			if javaLength(*it.meta) > maxMeta {
				resp.Topics[it.t].Partitions[it.p].ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			it.c.metadata = *it.meta
		}
		recs = append(recs, record{key: offsetKey(g.id, it.tp), value: offsetValue(it.c)})
		stored = append(stored, it)
		g.pendingCommits[it.tp]++
	}
	if len(recs) == 0 {
		reply(resp)
		return
	}
	p.appendRecords(recs, func(err error) {
		code := storeErrorCode(err)
		for _, it := range stored {
			if g.pendingCommits[it.tp]--; g.pendingCommits[it.tp] <= 0 {
				delete(g.pendingCommits, it.tp)
			}
			if code != 0 {
				resp.Topics[it.t].Partitions[it.p].ErrorCode = code
			} else if g.live() {
				// Done callbacks run in log order, so the last one applied
				// is the last one written.
				p.commitSeq++
				it.c.seq = p.commitSeq
				g.offsets[it.tp] = it.c
			}
		}
		if code != 0 {
			p.c.log.Warn("group: writing offsets failed", "group", g.id, "err", err)
		}
		reply(resp)
	})
}

// checkCommit is Kafka's validateOffsetCommit: a commit naming a member or
// a generation must come from a current member of the current
// generation; an anonymous one (generation -1, a simple consumer) is
// accepted only while the group has no members.
func (g *group) checkCommit(req *kmsg.OffsetCommitRequest) int16 {
	if g.consumer != nil {
		return g.consumer.checkCommit(req)
	}
	if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil {
		if code := g.checkMember(req.MemberID, req.InstanceID); code != 0 {
			return code
		}
		if req.Generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
		return 0
	}
	if g.state != stateEmpty {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// javaLength is a string's length as Java counts it (UTF-16 units), which
// is what offset.metadata.max.bytes is compared with in Kafka.
func javaLength(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// OffsetFetch (v0-v10; several groups from v8; the member and its epoch,
// checked for consumer groups, from v9; topic ids from v10) returns
// committed offsets; a partition with none, or a group that does not
// exist, reads -1. With
// require_stable (v7+, KIP-447), a partition whose commit is still being
// written is UNSTABLE_OFFSET_COMMIT, which clients retry.
func (c *Coordinator) OffsetFetch(req *kmsg.OffsetFetchRequest, reply func(*kmsg.OffsetFetchResponse)) {
	resp := kmsg.NewPtrOffsetFetchResponse()
	if req.Version >= 8 {
		ids := make([]string, len(req.Groups))
		for i := range req.Groups {
			ids[i] = req.Groups[i].Group
		}
		resp.Groups = make([]kmsg.OffsetFetchResponseGroup, len(req.Groups))
		c.byPartition(ids, func(p *partition, idx []int) {
			for _, i := range idx {
				rg := &req.Groups[i]
				resp.Groups[i] = p.fetchOffsets(rg.Group, rg.Topics, fetchOpts{all: rg.Topics == nil, requireStable: req.RequireStable,
					memberID: rg.MemberID, memberEpoch: rg.MemberEpoch, byID: req.Version >= 10})
			}
		}, func(idx []int, code int16) {
			for _, i := range idx {
				resp.Groups[i] = kmsg.NewOffsetFetchResponseGroup()
				resp.Groups[i].Group, resp.Groups[i].ErrorCode = req.Groups[i].Group, code
			}
		}, func() { reply(resp) })
		return
	}
	// v0-v7: one group. Its topics have the shape of v8's; null (v2+)
	// means every partition with an offset.
	topics := make([]kmsg.OffsetFetchRequestGroupTopic, len(req.Topics))
	for i, t := range req.Topics {
		topics[i] = kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions}
	}
	all := req.Version >= 2 && req.Topics == nil
	answer := func(gr kmsg.OffsetFetchResponseGroup) {
		if gr.ErrorCode != 0 && req.Version < 2 {
			// v0 and v1 have no top-level error: each partition asked for
			// carries it.
			gr.Topics = nil
			for _, t := range topics {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.Topic
				for _, part := range t.Partitions {
					rp := unknownOffset(part)
					rp.ErrorCode = gr.ErrorCode
					rt.Partitions = append(rt.Partitions, rp)
				}
				gr.Topics = append(gr.Topics, rt)
			}
		}
		resp.ErrorCode = gr.ErrorCode
		for _, t := range gr.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		reply(resp)
	}
	c.onGroupPartition(req.Group, func(p *partition) {
		answer(p.fetchOffsets(req.Group, topics, fetchOpts{all: all, requireStable: req.RequireStable, memberEpoch: -1}))
	},
		func(code int16) {
			gr := kmsg.NewOffsetFetchResponseGroup()
			gr.Group, gr.ErrorCode = req.Group, code
			answer(gr)
		})
}

func unknownOffset(partition int32) kmsg.OffsetFetchResponseGroupTopicPartition {
	rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
	noMetadata := ""
	rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = partition, -1, -1, &noMetadata
	return rp
}

// fetchOpts are OffsetFetch's options for one group.
type fetchOpts struct {
	all           bool // every partition with an offset (null topics)
	requireStable bool // KIP-447
	// memberID and memberEpoch (v9+) name the member fetching, checked
	// for a consumer group (KIP-848); nil and -1 for anyone else.
	memberID    *string
	memberEpoch int32
	byID        bool // v10+: topics are named by id
}

func (p *partition) fetchOffsets(groupID string, topics []kmsg.OffsetFetchRequestGroupTopic, o fetchOpts) kmsg.OffsetFetchResponseGroup {
	gr := kmsg.NewOffsetFetchResponseGroup()
	gr.Group = groupID
	g := p.groups[groupID]
	if g != nil && g.consumer != nil {
		if gr.ErrorCode = g.consumer.checkFetch(o.memberID, o.memberEpoch); gr.ErrorCode != 0 {
			return gr
		}
	}
	all, requireStable := o.all, o.requireStable
	fill := func(rp *kmsg.OffsetFetchResponseGroupTopicPartition, tp engine.TP) {
		if g == nil {
			return
		}
		if requireStable && g.pendingCommits[tp] > 0 {
			rp.ErrorCode = kerr.UnstableOffsetCommit.Code
			return
		}
		if c, ok := g.offsets[tp]; ok {
			meta := c.metadata
			rp.Offset, rp.LeaderEpoch, rp.Metadata = c.offset, c.leaderEpoch, &meta
		}
	}
	if all {
		if g == nil {
			return gr
		}
		tps := make([]engine.TP, 0, len(g.offsets))
		for tp := range g.offsets {
			tps = append(tps, tp)
		}
		slices.SortFunc(tps, func(a, b engine.TP) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			return int(a.Partition - b.Partition)
		})
		for _, tp := range tps {
			if n := len(gr.Topics); n == 0 || gr.Topics[n-1].Topic != tp.Topic {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = tp.Topic
				if o.byID {
					info, ok := p.c.eng.Topic(tp.Topic)
					if !ok {
						continue // deleted: it has no id to be named by
					}
					rt.TopicID = info.ID
				}
				gr.Topics = append(gr.Topics, rt)
			}
			rp := unknownOffset(tp.Partition)
			fill(&rp, tp)
			rt := &gr.Topics[len(gr.Topics)-1]
			rt.Partitions = append(rt.Partitions, rp)
		}
		return gr
	}
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		name, code := t.Topic, int16(0)
		if o.byID {
			info, ok := p.c.eng.TopicByID(t.TopicID)
			name = info.Name
			if !ok {
				code = kerr.UnknownTopicID.Code
			}
		}
		for _, part := range t.Partitions {
			rp := unknownOffset(part)
			if rp.ErrorCode = code; code == 0 {
				fill(&rp, engine.TP{Topic: name, Partition: part})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		gr.Topics = append(gr.Topics, rt)
	}
	return gr
}

// OffsetDelete (v0, KIP-496) deletes a group's offsets for some
// partitions: any of an empty group's, and, of a consumer group with
// members, those of topics it is not subscribed to.
func (c *Coordinator) OffsetDelete(req *kmsg.OffsetDeleteRequest, reply func(*kmsg.OffsetDeleteResponse)) {
	fail := func(code int16) {
		r := kmsg.NewPtrOffsetDeleteResponse()
		r.ErrorCode = code
		reply(r)
	}
	resp := kmsg.NewPtrOffsetDeleteResponse()
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		info, exists := engine.TopicInfo{}, false
		if c != nil {
			info, exists = c.eng.Topic(rt.Topic)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			if !exists || rp.Partition < 0 || rp.Partition >= info.Partitions {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	c.onGroupPartition(req.Group, func(p *partition) { p.deleteOffsets(req.Group, resp, reply, fail) }, fail)
}

func (p *partition) deleteOffsets(groupID string, resp *kmsg.OffsetDeleteResponse, reply func(*kmsg.OffsetDeleteResponse), fail func(int16)) {
	g := p.groups[groupID]
	if g == nil {
		fail(kerr.GroupIDNotFound.Code)
		return
	}
	var subscribed func(topic string) bool
	switch {
	case g.consumer != nil:
		// A consumer group keeps the offsets of the topics its members
		// subscribe to, by name or by regular expression.
		env := p.env()
		subscribed = func(topic string) bool { return g.consumer.subscribedTo(env, topic) }
	case g.state == stateEmpty:
	case g.state == statePreparingRebalance, g.state == stateCompletingRebalance, g.state == stateStable:
		if g.protocolType != "consumer" {
			fail(kerr.NonEmptyGroup.Code)
			return
		}
		subscribed = g.subscribedTo
	default:
		fail(kerr.GroupIDNotFound.Code)
		return
	}
	var tps []engine.TP
	for i := range resp.Topics {
		st := &resp.Topics[i]
		for j := range st.Partitions {
			sp := &st.Partitions[j]
			if sp.ErrorCode != 0 {
				continue
			}
			if subscribed != nil && subscribed(st.Topic) {
				sp.ErrorCode = kerr.GroupSubscribedToTopic.Code
				continue
			}
			tps = append(tps, engine.TP{Topic: st.Topic, Partition: sp.Partition})
		}
	}
	recs := g.dropOffsets(tps, false)
	if len(recs) == 0 {
		reply(resp)
		return
	}
	p.appendRecords(recs, func(err error) {
		if code := storeErrorCode(err); code != 0 {
			p.c.log.Warn("group: writing offset tombstones failed", "group", groupID, "err", err)
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					if sp := &resp.Topics[i].Partitions[j]; sp.ErrorCode == 0 {
						sp.ErrorCode = code
					}
				}
			}
		}
		reply(resp)
	})
}

// dropOffsets removes these offsets from g and returns their tombstones.
// A group left empty with no offsets dies, as in Kafka's
// cleanupGroupMetadata, with a tombstone for its metadata if it ever had a
// generation (a simple group never wrote any). force kills an empty group
// even with commits in flight (DeleteGroups): their results are then not
// applied.
func (g *group) dropOffsets(tps []engine.TP, force bool) []record {
	var recs []record
	for _, tp := range tps {
		if _, ok := g.offsets[tp]; ok {
			delete(g.offsets, tp)
			recs = append(recs, record{key: offsetKey(g.id, tp)})
		}
	}
	idle := len(g.offsets) == 0 && len(g.pendingCommits) == 0 && len(g.pending) == 0
	if g.isEmpty() && (idle || force) && g.p.groups[g.id] == g {
		g.stopTimers()
		g.state = stateDead
		delete(g.p.groups, g.id)
		switch {
		case g.consumer != nil:
			g.consumer.stopTimers()
			recs = append(recs, g.consumer.tombstones()...)
		case g.generation > 0:
			recs = append(recs, record{key: groupKey(g.id)})
		}
	}
	return recs
}

// isEmpty reports whether g has no member: a classic group in state
// Empty, a consumer group with no member.
func (g *group) isEmpty() bool {
	if g.consumer != nil {
		return len(g.consumer.members) == 0
	}
	return g.state == stateEmpty
}

// expiredOffsets applies offsets.retention.minutes as Kafka does since
// KIP-211: the offsets of an empty group expire once the group has been
// empty that long; a stable consumer group's offsets of topics it no
// longer subscribes to expire that long after their commit; a simple
// group's (no protocol) that long after their commit. An offset committed
// with an explicit retention (OffsetCommit v2-v4) expires at its own time.
// Offsets being written never expire.
func (g *group) expiredOffsets(nowMs, retentionMs int64) []engine.TP {
	var base func(c committed) int64
	keepSubscribed := false
	var subscribed func(topic string) bool
	switch {
	case g.consumer != nil:
		// A consumer group's offsets expire that long after their commit,
		// except those of topics a member subscribes to (Kafka's
		// ConsumerGroup expiration condition).
		env := g.p.env()
		base = func(c committed) int64 { return c.commitMs }
		keepSubscribed = true
		subscribed = func(topic string) bool { return g.consumer.subscribedTo(env, topic) }
	case g.protocolType != "" && g.state == stateEmpty:
		base = func(c committed) int64 {
			if g.stateMs >= 0 {
				return g.stateMs
			}
			return c.commitMs // a group written before KIP-211
		}
	case g.protocolType == "consumer" && g.state == stateStable && g.subscribed != nil:
		base = func(c committed) int64 { return c.commitMs }
		keepSubscribed = true
		subscribed = func(topic string) bool { return g.subscribed[topic] }
	case g.protocolType == "":
		base = func(c committed) int64 { return c.commitMs }
	default:
		return nil
	}
	var tps []engine.TP
	for tp, c := range g.offsets {
		if g.pendingCommits[tp] > 0 || (keepSubscribed && subscribed(tp.Topic)) {
			continue
		}
		if c.expireMs >= 0 {
			if nowMs >= c.expireMs {
				tps = append(tps, tp)
			}
		} else if nowMs-base(c) >= retentionMs {
			tps = append(tps, tp)
		}
	}
	return tps
}

// expireAll runs the offsets expiry on every partition, each on its shard,
// then arms itself again.
func (c *Coordinator) expireAll() {
	if c.closed.Load() {
		return
	}
	for _, p := range c.parts {
		c.eng.OnShard(p.tp, p.expire)
	}
	c.mu.Lock()
	if !c.closed.Load() {
		c.expiry = time.AfterFunc(c.cfg.OffsetsRetentionCheckInterval, c.expireAll)
	}
	c.mu.Unlock()
}

func (p *partition) expire() {
	if p.state != partLoaded {
		return
	}
	now := time.Now().UnixMilli()
	retention := p.c.cfg.OffsetsRetention.Milliseconds()
	var recs []record
	removed, groups := 0, 0
	for _, g := range p.groups {
		r := g.dropOffsets(g.expiredOffsets(now, retention), false)
		if len(r) > 0 {
			removed += len(r)
			groups++
		}
		recs = append(recs, r...)
	}
	if len(recs) == 0 {
		return
	}
	p.c.log.Info("group: expired offsets", "partition", p.tp.Partition, "tombstones", removed, "groups", groups)
	p.appendRecords(recs, func(err error) {
		if err != nil {
			// The next run does not write them again (the offsets are
			// gone from memory); after a restart they are replayed and
			// expire again.
			p.c.log.Warn("group: writing expiry tombstones failed", "partition", p.tp.Partition, "err", err)
		}
	})
}
