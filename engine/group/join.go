package group

import (
	"bytes"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client is who sent a request: its client.id and its address as Kafka
// shows it ("/127.0.0.1"), for DescribeGroups.
type Client struct {
	ID   string
	Host string
	// DescribeTopic says whether the client's principal may DESCRIBE a
	// topic; nil when no authorizer runs (Config.Authorizing).
	DescribeTopic func(topic string) bool
}

// JoinGroup (v0-v9) adds or updates a member and takes part in a
// rebalance. The answer may come much later: a join parks until every
// member has rejoined or the rebalance timeout passes.
func (c *Coordinator) JoinGroup(cl Client, req *kmsg.JoinGroupRequest, reply func(*kmsg.JoinGroupResponse)) {
	if req.Group == "" {
		reply(joinError(req.MemberID, kerr.InvalidGroupID.Code))
		return
	}
	// The request's bytes stay with the connection's frame; a member's
	// metadata lives as long as the member, so it gets its own copy.
	protos := make([]protocol, 0, min(len(req.Protocols), 64))
	for _, p := range req.Protocols {
		protos = append(protos, protocol{name: p.Name, metadata: bytes.Clone(p.Metadata)})
	}
	c.onGroupPartition(req.Group, func(p *partition) { p.join(cl, req, protos, reply) },
		func(code int16) { reply(joinError(req.MemberID, code)) })
}

func (p *partition) join(cl Client, req *kmsg.JoinGroupRequest, protos []protocol, reply func(*kmsg.JoinGroupResponse)) {
	cfg := &p.c.cfg
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if session < cfg.MinSessionTimeout || session > cfg.MaxSessionTimeout {
		reply(joinError(req.MemberID, kerr.InvalidSessionTimeout.Code))
		return
	}
	// JoinGroup v0 has no rebalance timeout: the session timeout is both.
	rebalance := time.Duration(max(req.RebalanceTimeoutMillis, 0)) * time.Millisecond
	if req.Version == 0 {
		rebalance = session
	}
	size := 0
	for _, pr := range protos {
		size += len(pr.name) + len(pr.metadata)
	}
	if size > cfg.MemberMetadataMaxBytes {
		// No Kafka code fits exactly; MESSAGE_TOO_LARGE is not retriable
		// and says what is wrong (the Java consumer raises it to poll()).
		reply(joinError(req.MemberID, kerr.MessageTooLarge.Code))
		return
	}
	unknown := req.MemberID == ""
	g := p.groups[req.Group]
	if g != nil && g.consumer != nil {
		switch {
		case len(g.consumer.members) > 0:
			// Kafka 4.0 lets classic members into a consumer group (its
			// protocol-mixing upgrade path); ringlog does not mix the two
			// protocols in one group, and answers as Kafka does a member
			// whose protocols the group cannot take.
			reply(joinError(req.MemberID, kerr.InconsistentGroupProtocol.Code))
			return
		case !unknown:
			reply(joinError(req.MemberID, kerr.UnknownMemberID.Code))
			return
		case req.ProtocolType == "" || len(protos) == 0:
			reply(joinError("", kerr.InconsistentGroupProtocol.Code))
			return
		}
		// An empty consumer group gives way to a classic one, as in
		// Kafka; its committed offsets stay.
		p.consumerToClassic(g)
	}
	if g == nil {
		if !unknown {
			reply(joinError(req.MemberID, kerr.UnknownMemberID.Code))
			return
		}
		g = p.newGroup(req.Group)
	}
	defer g.forgetIfUnused()
	old := g.byID[req.MemberID]
	switch {
	case !g.acceptJoining(old):
		// As Kafka does, a rejoining member beyond the limit (lowered
		// since it joined) is removed: the group shrinks back to size.
		if old != nil {
			g.remove(old)
		}
		reply(joinError("", kerr.GroupMaxSizeReached.Code))
	case g.metadataBytes()+memberOverhead+size-sizeOf(old) > cfg.GroupMetadataMaxBytes:
		reply(joinError("", kerr.GroupMaxSizeReached.Code))
	case unknown:
		g.joinNew(cl, req, protos, rebalance, session, reply)
	default:
		g.joinKnown(cl, req, protos, rebalance, session, reply)
	}
	if g.state == statePreparingRebalance {
		g.tryCompleteJoin()
	}
}

func sizeOf(m *member) int {
	if m == nil {
		return 0
	}
	return m.size()
}

// acceptJoining applies group.max.size (KIP-389) as Kafka does: while
// rebalancing, the members that rejoined count (so that the last ones to
// rejoin are the ones left out when the limit was lowered); otherwise the
// members.
func (g *group) acceptJoining(m *member) bool {
	switch g.state {
	case statePreparingRebalance:
		return (m != nil && m.joinReply != nil) || g.joinedCount() < g.p.c.cfg.MaxSize
	case stateCompletingRebalance, stateStable:
		return m != nil || len(g.members) < g.p.c.cfg.MaxSize
	}
	return true
}

func (g *group) joinNew(cl Client, req *kmsg.JoinGroupRequest, protos []protocol, rebalance, session time.Duration, reply func(*kmsg.JoinGroupResponse)) {
	if !g.supports(req.ProtocolType, protos) {
		reply(joinError("", kerr.InconsistentGroupProtocol.Code))
		return
	}
	id := newMemberID(cl.ID, req.InstanceID)
	m := &member{id: id, instanceID: req.InstanceID, clientID: cl.ID, clientHost: cl.Host, protocolType: req.ProtocolType,
		protocols: protos, rebalanceTimeout: rebalance, sessionTimeout: session, isNew: true}
	if req.InstanceID != nil {
		if oldID, ok := g.static[*req.InstanceID]; ok && g.byID[oldID] != nil {
			g.joinStaticAgain(g.byID[oldID], id, req, protos, rebalance, session, reply)
			return
		}
		// A static member joins at once, whatever the version (Kafka
		// asks only dynamic members for KIP-394's round trip): a retried
		// join of the same instance replaces the member it created
		// rather than adding a defunct one.
		g.addAndRebalance(m, reply)
		return
	}
	if req.Version >= 4 {
		// KIP-394: hand out the member id and expect the member back with
		// it, so that a client retrying a join it timed out on does not
		// leave a defunct member behind. The id expires after the session
		// timeout if the member does not come back.
		g.pending[id] = g.p.after(session, func() { g.pendingExpired(id) })
		reply(joinError(id, kerr.MemberIDRequired.Code))
		return
	}
	g.addAndRebalance(m, reply)
}

func (g *group) pendingExpired(id string) {
	if _, ok := g.pending[id]; !ok || !g.live() {
		return
	}
	delete(g.pending, id)
	if g.state == statePreparingRebalance {
		g.tryCompleteJoin()
	}
	g.forgetIfUnused()
}

func (g *group) joinKnown(cl Client, req *kmsg.JoinGroupRequest, protos []protocol, rebalance, session time.Duration, reply func(*kmsg.JoinGroupResponse)) {
	if !g.supports(req.ProtocolType, protos) {
		reply(joinError(req.MemberID, kerr.InconsistentGroupProtocol.Code))
		return
	}
	if t, ok := g.pending[req.MemberID]; ok {
		if req.InstanceID != nil {
			// Ids of static members are never pending: this is not an id
			// this group handed to this instance.
			reply(joinError(req.MemberID, kerr.UnknownMemberID.Code))
			return
		}
		t.Stop()
		delete(g.pending, req.MemberID)
		m := &member{id: req.MemberID, clientID: cl.ID, clientHost: cl.Host, protocolType: req.ProtocolType,
			protocols: protos, rebalanceTimeout: rebalance, sessionTimeout: session, isNew: true}
		g.addAndRebalance(m, reply)
		return
	}
	if code := g.checkMember(req.MemberID, req.InstanceID); code != 0 {
		reply(joinError(req.MemberID, code))
		return
	}
	m := g.byID[req.MemberID]
	switch g.state {
	case statePreparingRebalance:
		g.updateAndRebalance(m, protos, rebalance, session, reply)
	case stateCompletingRebalance:
		if m.matches(protos) {
			// The member lost the answer to its join (a timeout, a broken
			// connection): give it the generation again.
			reply(g.joinResponse(m))
			return
		}
		g.updateAndRebalance(m, protos, rebalance, session, reply)
	case stateStable:
		if g.isLeader(m.id) || !m.matches(protos) {
			// A leader's join forces a rebalance: that is how a leader
			// acts on changes the metadata does not show (new partitions
			// of a subscribed topic, say).
			g.updateAndRebalance(m, protos, rebalance, session, reply)
			return
		}
		reply(g.joinResponse(m))
	default:
		reply(joinError(req.MemberID, kerr.UnknownMemberID.Code))
	}
}

// joinStaticAgain handles a static member's new instance joining with no
// member id while the old one is still a member (KIP-345): the new
// instance takes over the old one's place and assignment, and the old one
// is fenced. A stable group whose protocol the new instance does not
// change is not rebalanced: the new member id is written down, and the
// member gets the current generation.
func (g *group) joinStaticAgain(old *member, id string, req *kmsg.JoinGroupRequest, protos []protocol, rebalance, session time.Duration, reply func(*kmsg.JoinGroupResponse)) {
	oldProtos, oldRebalance, oldSession := old.protocols, old.rebalanceTimeout, old.sessionTimeout
	currentLeader := g.leader
	m := g.replace(old, id)
	m.protocols, m.rebalanceTimeout, m.sessionTimeout = protos, rebalance, session
	g.touch(m, session)
	m.joinReply = reply
	switch g.state {
	case stateStable:
		if g.protocol == nil || g.selectProtocol() != *g.protocol {
			g.prepareRebalance()
			return
		}
		gen := g.generation
		g.storeGroup(g.assignments(), func(code int16) {
			if !g.live() || g.byID[m.id] != m || m.joinReply == nil || g.state != stateStable || g.generation != gen {
				// A rebalance started meanwhile: it answers the join.
				return
			}
			reply := m.joinReply
			m.joinReply = nil
			if code != 0 {
				// The new member id is not on disk: put the old member
				// back, as Kafka does, and let the new instance retry.
				m.protocols, m.rebalanceTimeout, m.sessionTimeout = oldProtos, oldRebalance, oldSession
				back := g.replace(m, old.id)
				g.touch(back, back.sessionTimeout)
				reply(joinError("", code))
				return
			}
			resp := g.joinResponse(m)
			resp.Generation = gen
			if req.Version >= 9 {
				// KIP-814: a static leader learns it leads, but is told to
				// skip the assignment, since the group keeps the one it has.
				resp.SkipAssignment = g.isLeader(m.id)
			} else {
				// Before v9 the leader id returned is the old one, so that a
				// returning leader does not compute an assignment that a
				// stable group would never hand out.
				resp.Members = nil
				resp.LeaderID = currentLeader
			}
			reply(resp)
			// Its session timer, if it fired while the join was parked,
			// was not re-armed.
			g.touch(m, m.sessionTimeout)
		})
	case stateCompletingRebalance:
		// The leader may already be assigning with the old member id: the
		// new one would get nothing. Rebalance.
		g.prepareRebalance()
	case statePreparingRebalance:
		// Parked: answered when the rebalance completes.
	}
}

func (g *group) assignments() map[string][]byte {
	a := make(map[string][]byte, len(g.members))
	for _, m := range g.members {
		a[m.id] = m.assignment
	}
	return a
}

func (g *group) addAndRebalance(m *member, reply func(*kmsg.JoinGroupResponse)) {
	if g.state == statePreparingRebalance && g.generation == 0 {
		g.newMemberAdded = true
	}
	g.add(m)
	m.joinReply = reply
	// A new member cannot heartbeat before its join completes, nor can a
	// parked request notice its client went away: bound its wait.
	g.touch(m, newMemberJoinTimeout)
	g.maybePrepareRebalance()
}

func (g *group) updateAndRebalance(m *member, protos []protocol, rebalance, session time.Duration, reply func(*kmsg.JoinGroupResponse)) {
	m.protocols, m.rebalanceTimeout, m.sessionTimeout = protos, rebalance, session
	g.parkJoin(m, reply)
	g.maybePrepareRebalance()
}

// parkJoin parks m's join. A join already parked for m is answered
// REBALANCE_IN_PROGRESS: the client sent another one because it gave up on
// it, and every request gets an answer (Kafka drops the older callback).
func (g *group) parkJoin(m *member, reply func(*kmsg.JoinGroupResponse)) {
	if m.joinReply != nil {
		old := m.joinReply
		m.joinReply = nil
		old(joinError(m.id, kerr.RebalanceInProgress.Code))
	}
	m.joinReply = reply
}

func (g *group) maybePrepareRebalance() {
	switch g.state {
	case stateStable, stateCompletingRebalance, stateEmpty:
		g.prepareRebalance()
	}
}

// prepareRebalance starts a rebalance: members waiting in SyncGroup are
// sent back to join, and the join phase waits for every member (the
// rebalance timeout at most). The first rebalance of an empty group waits
// group.initial.rebalance.delay.ms first, longer while members keep
// arriving (KIP-134), so that a group starting up rebalances once rather
// than once per member.
func (g *group) prepareRebalance() {
	if g.state == stateCompletingRebalance {
		g.resetAndPropagateAssignmentError(kerr.RebalanceInProgress.Code)
	}
	g.cancelSyncTimer()
	fromEmpty := g.state == stateEmpty
	g.transition(statePreparingRebalance)
	if fromEmpty {
		delay := g.p.c.cfg.InitialRebalanceDelay
		g.initialDelay = true
		g.armJoinTimer(delay, g.initialDelayExpired(delay, max(g.rebalanceTimeout()-delay, 0)))
		return
	}
	g.initialDelay = false
	g.armJoinTimer(g.rebalanceTimeout(), g.completeJoin)
	g.tryCompleteJoin()
}

// initialDelayExpired extends the initial delay by another delay (within
// the rebalance timeout) while new members arrived during the last one.
func (g *group) initialDelayExpired(delay, remaining time.Duration) func() {
	return func() {
		if g.newMemberAdded && remaining > 0 {
			g.newMemberAdded = false
			next := min(g.p.c.cfg.InitialRebalanceDelay, remaining)
			g.armJoinTimer(next, g.initialDelayExpired(next, max(remaining-delay, 0)))
			return
		}
		g.initialDelay = false
		g.completeJoin()
	}
}

func (g *group) armJoinTimer(d time.Duration, fn func()) {
	if g.joinTimer != nil {
		g.joinTimer.Stop()
	}
	g.joinSeq++
	seq := g.joinSeq
	g.joinTimer = g.p.after(d, func() {
		if g.live() && g.joinSeq == seq && g.state == statePreparingRebalance {
			fn()
		}
	})
}

func (g *group) tryCompleteJoin() {
	if g.state == statePreparingRebalance && !g.initialDelay && g.allJoined() {
		g.completeJoin()
	}
}

// completeJoin ends the join phase (Kafka's onCompleteJoin): dynamic
// members that did not rejoin are dropped (static ones keep their place,
// KIP-345), and the next generation starts, with every parked join
// answered and the leader given the members' metadata.
func (g *group) completeJoin() {
	if g.state != statePreparingRebalance {
		return
	}
	g.joinSeq++
	if g.joinTimer != nil {
		g.joinTimer.Stop()
		g.joinTimer = nil
	}
	g.initialDelay = false
	for _, m := range slices.Clone(g.members) {
		if m.joinReply == nil && m.instanceID == nil {
			g.remove(m)
		}
	}
	if len(g.members) > 0 && !g.electJoinedLeader() {
		// Only static members that have not rejoined are left: wait for
		// them, or for their sessions to end.
		g.armJoinTimer(g.rebalanceTimeout(), g.completeJoin)
		return
	}
	g.generation++
	if len(g.members) == 0 {
		g.protocol = nil
		g.subscribed = nil
		g.transition(stateEmpty)
		// Losing this write is harmless: the previous generation had no
		// member that could still act on it after a restart.
		g.storeGroup(nil, func(code int16) {
			if code != 0 {
				g.p.c.log.Warn("group: writing an empty group failed", "group", g.id, "code", code)
			}
		})
		return
	}
	name := g.selectProtocol()
	g.protocol = &name
	g.transition(stateCompletingRebalance)
	g.computeSubscribed()
	g.pendingSync = make(map[string]bool, len(g.members))
	for _, m := range g.members {
		g.pendingSync[m.id] = true
		if m.joinReply != nil {
			reply := m.joinReply
			m.joinReply = nil
			reply(g.joinResponse(m))
		}
		g.touch(m, m.sessionTimeout)
		m.isNew = false
	}
	g.armSyncTimer(g.rebalanceTimeout())
}

// joinResponse is m's answer for the current generation; the leader gets
// every member's metadata for the chosen protocol, to assign from.
func (g *group) joinResponse(m *member) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Generation = g.generation
	pt := g.protocolType
	r.ProtocolType = &pt
	if g.protocol != nil {
		name := *g.protocol
		r.Protocol = &name
	}
	r.LeaderID = g.leader
	r.MemberID = m.id
	if g.isLeader(m.id) && g.protocol != nil {
		r.Members = make([]kmsg.JoinGroupResponseMember, 0, len(g.members))
		for _, x := range g.members {
			jm := kmsg.NewJoinGroupResponseMember()
			jm.MemberID, jm.InstanceID, jm.ProtocolMetadata = x.id, x.instanceID, x.metadataFor(*g.protocol)
			if jm.ProtocolMetadata == nil {
				jm.ProtocolMetadata = []byte{}
			}
			r.Members = append(r.Members, jm)
		}
	}
	return r
}

// armSyncTimer expects every member's SyncGroup within the rebalance
// timeout; those that do not send it are removed and the group rebalances
// again (a member that got its join answer and died must not hold the
// group in CompletingRebalance forever).
func (g *group) armSyncTimer(d time.Duration) {
	g.cancelSyncTimer()
	seq, gen := g.syncSeq, g.generation
	g.syncTimer = g.p.after(d, func() {
		if !g.live() || g.syncSeq != seq || g.generation != gen || len(g.pendingSync) == 0 {
			return
		}
		if g.state != stateCompletingRebalance && g.state != stateStable {
			return
		}
		for id := range g.pendingSync {
			if m := g.byID[id]; m != nil {
				g.p.c.log.Debug("group member did not sync in time", "group", g.id, "member", id, "generation", gen)
				g.remove(m)
			}
		}
		g.pendingSync = nil
		g.prepareRebalance()
	})
}

func (g *group) cancelSyncTimer() {
	g.syncSeq++
	if g.syncTimer != nil {
		g.syncTimer.Stop()
		g.syncTimer = nil
	}
}

// storeGroup writes the group's metadata with these assignments; done gets
// the Kafka code of the outcome, on the shard.
func (g *group) storeGroup(assignment map[string][]byte, done func(code int16)) {
	rec := record{key: groupKey(g.id), value: groupValue(g, assignment)}
	g.p.appendRecords([]record{rec}, func(err error) {
		if err != nil {
			g.p.c.log.Warn("group: writing group metadata failed", "group", g.id, "generation", g.generation, "err", err)
		}
		done(groupStoreErrorCode(err))
	})
}
