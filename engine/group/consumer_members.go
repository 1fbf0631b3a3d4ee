package group

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Members leaving and being fenced, and the bookkeeping of who holds
// which partition.

// leave handles epochs -1 (leave) and -2 (a static member leaving for a
// while, expected back within its session timeout).
func (cg *cgroup) leave(env *cgEnv, req *kmsg.ConsumerGroupHeartbeatRequest) ([]record, *hbError) {
	var m *cmember
	if req.InstanceID == nil {
		if m = cg.members[req.MemberID]; m == nil {
			return nil, refuse(kerr.UnknownMemberID, "Member %s is not a member of group %s.", req.MemberID, cg.id)
		}
		// Kafka requires the instance id with epoch -2; the schema has a
		// null instance id mean "unchanged", and franz-go leaves that way,
		// so a static member's own instance id is taken. A dynamic member
		// cannot leave for a while.
		if req.MemberEpoch == leaveStaticEpoch && m.meta.instanceID == nil {
			return nil, refuse(kerr.InvalidRequest, "InstanceId can't be null.")
		}
	} else {
		id, ok := cg.static[*req.InstanceID]
		if !ok {
			return nil, refuse(kerr.UnknownMemberID, "Instance id %s is unknown.", *req.InstanceID)
		}
		if id != req.MemberID {
			return nil, refuse(kerr.FencedInstanceID, "Static member %s with instance id %s was fenced by member %s.", req.MemberID, *req.InstanceID, id)
		}
		m = cg.members[id]
	}
	var recs []record
	if req.MemberEpoch == leaveStaticEpoch {
		// The member stays, with its assignment kept for it (nobody else
		// gets its partitions), until it comes back or its session ends.
		// What it was revoking it has given up by leaving.
		next := m.cur
		next.epoch, next.revoking = leaveStaticEpoch, assignment{}
		cg.setCurrent(m, &next)
		m.rebalanceAt = time.Time{}
		cg.dirty = append(cg.dirty, m)
		return append(recs, record{key: consumerMemberKey(consumerCurrentAssignmentKy, cg.id, m.id), value: currentAssignmentValue(&m.cur)}), nil
	}
	return append(recs, cg.fence(env, m)...), nil
}

// fence removes a member (it left, its session expired, it did not revoke
// in time) and bumps the group epoch, so that its partitions are assigned
// again at the next heartbeat of any member.
//
// The last member's going leaves nobody to heartbeat the new epoch's
// (empty) target assignment into being, so it is computed here: as in
// Kafka, an empty group's assignment epoch is its group epoch.
func (cg *cgroup) fence(env *cgEnv, m *cmember) []record {
	recs := cg.removeMember(m)
	bump := true
	recs = append(recs, cg.refreshSubscriptions(env, &bump)...)
	cg.epoch++
	recs = append(recs, record{key: consumerKey(consumerGroupMetadataKey, cg.id), value: int32Value(cg.epoch)})
	if len(cg.members) == 0 {
		recs = append(recs, cg.computeTarget(env)...)
	}
	return recs
}

// expire fences m if its session ended; rebalanceExpired if it still has
// not revoked at the epoch its rebalance timeout was armed for. Both are
// called by timers, and return nil when the timer is stale.
func (cg *cgroup) expire(env *cgEnv, m *cmember) []record {
	if cg.members[m.id] != m || env.now.Before(m.sessionAt) {
		return nil
	}
	return cg.fence(env, m)
}

func (cg *cgroup) rebalanceExpired(env *cgEnv, m *cmember) []record {
	if cg.members[m.id] != m || m.rebalanceAt.IsZero() || env.now.Before(m.rebalanceAt) ||
		m.cur.state != memberUnrevoked || m.cur.epoch != m.rebalanceEpoch {
		return nil
	}
	return cg.fence(env, m)
}

func (cg *cgroup) addMember(m *cmember) {
	cg.members[m.id] = m
	cg.dirty = append(cg.dirty, m)
}

// removeMember takes m out with its records' tombstones, in Kafka's
// order (current assignment, target, subscription).
func (cg *cgroup) removeMember(m *cmember) []record {
	for tp, o := range cg.owners {
		if o == m.id {
			delete(cg.owners, tp)
		}
	}
	delete(cg.members, m.id)
	delete(cg.target, m.id)
	if m.meta.instanceID != nil && cg.static[*m.meta.instanceID] == m.id {
		delete(cg.static, *m.meta.instanceID)
	}
	cg.dirty = append(cg.dirty, m)
	return memberTombstones(cg.id, m.id)
}

func memberTombstones(groupID, memberID string) []record {
	return []record{
		{key: consumerMemberKey(consumerCurrentAssignmentKy, groupID, memberID)},
		{key: consumerMemberKey(consumerTargetMemberKey, groupID, memberID)},
		{key: consumerMemberKey(consumerMemberMetadataKey, groupID, memberID)},
	}
}

// setCurrent installs m's new reconciliation state and moves partition
// ownership with it.
func (cg *cgroup) setCurrent(m *cmember, next *currentAssignment) {
	for _, a := range []assignment{m.cur.assigned, m.cur.revoking} {
		for id, ps := range a {
			for _, p := range ps {
				if cg.owners[tpKey{id, p}] == m.id {
					delete(cg.owners, tpKey{id, p})
				}
			}
		}
	}
	m.cur = *next
	for _, a := range []assignment{m.cur.assigned, m.cur.revoking} {
		for id, ps := range a {
			for _, p := range ps {
				cg.owners[tpKey{id, p}] = m.id
			}
		}
	}
}

// lostWrite is called when a write of the group's records failed: memory
// is ahead of the log, which a restart would go back to. Every member
// keeps what it holds (nobody else may be given its partitions while it
// may still consume them) but is fenced at its next heartbeat, and joins
// again, which writes its records anew; a member that does not come back
// is removed when its session ends, with tombstones. The target
// assignment and the subscription metadata are forgotten so that the
// next heartbeat writes them in full, at a new group epoch (epochs only
// move forward, so none handed out is handed out again).
func (cg *cgroup) lostWrite() {
	for _, m := range cg.members {
		m.lost = true
	}
	clear(cg.target)
	cg.subMeta = map[string]topicMeta{}
	cg.subKnown = false
	cg.epoch++
}

func copyStr(s *string) *string {
	c := *s
	return &c
}

func equalPtr(a, b *string) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func equalMeta(a, b *memberMetadata) bool {
	return equalPtr(a.instanceID, b.instanceID) && equalPtr(a.rackID, b.rackID) && a.clientID == b.clientID &&
		a.clientHost == b.clientHost && slices.Equal(a.topics, b.topics) && equalPtr(a.regex, b.regex) &&
		a.rebalanceTimeoutMs == b.rebalanceTimeoutMs && equalPtr(a.assignor, b.assignor)
}
