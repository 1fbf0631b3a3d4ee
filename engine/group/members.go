package group

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup (v0-v5): the leader hands in the assignment it computed (the
// broker relays it, whatever the protocol); every member gets its part
// once the group's metadata is written.
func (c *Coordinator) SyncGroup(req *kmsg.SyncGroupRequest, reply func(*kmsg.SyncGroupResponse)) {
	if req.Group == "" {
		reply(syncError(kerr.InvalidGroupID.Code))
		return
	}
	var assignment map[string][]byte
	if len(req.GroupAssignment) > 0 {
		assignment = make(map[string][]byte, min(len(req.GroupAssignment), 1024))
		for _, a := range req.GroupAssignment {
			assignment[a.MemberID] = bytes.Clone(a.MemberAssignment)
		}
	}
	c.onGroupPartition(req.Group, func(p *partition) { p.sync(req, assignment, reply) },
		func(code int16) { reply(syncError(code)) })
}

func (p *partition) sync(req *kmsg.SyncGroupRequest, assignment map[string][]byte, reply func(*kmsg.SyncGroupResponse)) {
	g := p.groups[req.Group]
	if g == nil {
		reply(syncError(kerr.UnknownMemberID.Code))
		return
	}
	if code := g.checkMember(req.MemberID, req.InstanceID); code != 0 {
		reply(syncError(code))
		return
	}
	if req.Generation != g.generation {
		reply(syncError(kerr.IllegalGeneration.Code))
		return
	}
	// v5+ name the protocol type and protocol the member thinks it is in
	// (KIP-559).
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) ||
		(req.Protocol != nil && (g.protocol == nil || *req.Protocol != *g.protocol)) {
		reply(syncError(kerr.InconsistentGroupProtocol.Code))
		return
	}
	m := g.byID[req.MemberID]
	switch g.state {
	case statePreparingRebalance:
		reply(syncError(kerr.RebalanceInProgress.Code))
	case stateCompletingRebalance:
		if m.syncReply != nil {
			old := m.syncReply
			m.syncReply = nil
			old(syncError(kerr.RebalanceInProgress.Code))
		}
		m.syncReply = reply
		delete(g.pendingSync, m.id)
		if g.isLeader(m.id) {
			g.completeSync(assignment)
		}
	case stateStable:
		// A follower syncing after the leader: the assignment is there.
		delete(g.pendingSync, m.id)
		reply(g.syncResponse(m))
		g.touch(m, m.sessionTimeout)
	default:
		reply(syncError(kerr.UnknownMemberID.Code))
	}
}

// completeSync writes the generation with the leader's assignment, then
// hands every member waiting in SyncGroup its part and makes the group
// stable. Members the leader left out get an empty assignment; ids that
// are not members are ignored.
func (g *group) completeSync(assignment map[string][]byte) {
	full := make(map[string][]byte, len(g.members))
	for _, m := range g.members {
		a := assignment[m.id]
		if a == nil {
			a = []byte{}
		}
		full[m.id] = a
	}
	gen := g.generation
	g.storeGroup(full, func(code int16) {
		// The group may have moved on while the write was in flight (a
		// member joined): then that rebalance answers the waiting syncs.
		if !g.live() || g.state != stateCompletingRebalance || g.generation != gen {
			return
		}
		if code != 0 {
			g.resetAndPropagateAssignmentError(code)
			g.maybePrepareRebalance()
			return
		}
		for _, m := range g.members {
			m.assignment = full[m.id]
		}
		g.transition(stateStable)
		g.propagateAssignment(0)
	})
}

func (g *group) resetAndPropagateAssignmentError(code int16) {
	for _, m := range g.members {
		m.assignment = nil
	}
	g.propagateAssignment(code)
}

// propagateAssignment answers every parked SyncGroup, with its assignment
// or with code, and expects the members' heartbeats again.
func (g *group) propagateAssignment(code int16) {
	for _, m := range g.members {
		if m.syncReply == nil {
			continue
		}
		reply := m.syncReply
		m.syncReply = nil
		if code != 0 {
			reply(syncError(code))
		} else {
			reply(g.syncResponse(m))
		}
		g.touch(m, m.sessionTimeout)
	}
}

func (g *group) syncResponse(m *member) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	pt := g.protocolType
	r.ProtocolType = &pt
	if g.protocol != nil {
		name := *g.protocol
		r.Protocol = &name
	}
	r.MemberAssignment = m.assignment
	if r.MemberAssignment == nil {
		r.MemberAssignment = []byte{}
	}
	return r
}

// Heartbeat (v0-v4) keeps a member's session alive and tells it when a
// rebalance needs it to rejoin.
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest, reply func(*kmsg.HeartbeatResponse)) {
	answer := func(code int16) {
		r := kmsg.NewPtrHeartbeatResponse()
		r.ErrorCode = code
		reply(r)
	}
	if req.Group == "" {
		answer(kerr.InvalidGroupID.Code)
		return
	}
	c.onGroupPartition(req.Group, func(p *partition) { answer(p.heartbeat(req)) }, func(code int16) {
		// While the coordinator loads, Kafka answers heartbeats blindly:
		// the members' sessions start over once their group is loaded, so
		// there is nothing to check, and an error would make them rejoin.
		if code == kerr.CoordinatorLoadInProgress.Code {
			code = 0
		}
		answer(code)
	})
}

func (p *partition) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	g := p.groups[req.Group]
	if g == nil {
		return kerr.UnknownMemberID.Code
	}
	if code := g.checkMember(req.MemberID, req.InstanceID); code != 0 {
		return code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m := g.byID[req.MemberID]
	switch g.state {
	case stateCompletingRebalance, stateStable:
		// A member may heartbeat between its join answer and its sync.
		g.touch(m, m.sessionTimeout)
		return 0
	case statePreparingRebalance:
		g.touch(m, m.sessionTimeout)
		return kerr.RebalanceInProgress.Code
	}
	return kerr.UnknownMemberID.Code
}

// LeaveGroup (v0-v5; several members at once from v3, KIP-345) removes
// members; a static member may be named by its instance id alone.
func (c *Coordinator) LeaveGroup(req *kmsg.LeaveGroupRequest, reply func(*kmsg.LeaveGroupResponse)) {
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	answer := func(r *kmsg.LeaveGroupResponse) {
		// Before v3 the one member's code is the response's.
		if req.Version < 3 && len(r.Members) > 0 {
			r.ErrorCode, r.Members = r.Members[0].ErrorCode, nil
		}
		reply(r)
	}
	fail := func(code int16) {
		r := kmsg.NewPtrLeaveGroupResponse()
		r.ErrorCode = code
		reply(r)
	}
	if req.Group == "" {
		fail(kerr.InvalidGroupID.Code)
		return
	}
	c.onGroupPartition(req.Group, func(p *partition) { answer(p.leave(req.Group, leaving)) }, fail)
}

func (p *partition) leave(groupID string, leaving []kmsg.LeaveGroupRequestMember) *kmsg.LeaveGroupResponse {
	r := kmsg.NewPtrLeaveGroupResponse()
	g := p.groups[groupID]
	for _, lm := range leaving {
		mr := kmsg.NewLeaveGroupResponseMember()
		mr.MemberID, mr.InstanceID = lm.MemberID, lm.InstanceID
		mr.ErrorCode = g.leaveOne(lm)
		r.Members = append(r.Members, mr)
	}
	return r
}

func (g *group) leaveOne(lm kmsg.LeaveGroupRequestMember) int16 {
	if g == nil || !g.live() {
		return kerr.UnknownMemberID.Code
	}
	if lm.MemberID == "" && lm.InstanceID != nil {
		// A static member leaving by instance id (an admin removing it,
		// KIP-345).
		id, ok := g.static[*lm.InstanceID]
		if !ok || g.byID[id] == nil {
			return kerr.UnknownMemberID.Code
		}
		g.removeMemberAndUpdate(g.byID[id])
		return 0
	}
	if t, ok := g.pending[lm.MemberID]; ok {
		t.Stop()
		delete(g.pending, lm.MemberID)
		if g.state == statePreparingRebalance {
			g.tryCompleteJoin()
		}
		g.forgetIfUnused()
		return 0
	}
	if code := g.checkMember(lm.MemberID, lm.InstanceID); code != 0 {
		return code
	}
	g.removeMemberAndUpdate(g.byID[lm.MemberID])
	return 0
}
