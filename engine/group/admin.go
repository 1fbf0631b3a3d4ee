package group

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
)

// byPartition runs fn once on each partition of __consumer_offsets that
// holds some of ids, with the indexes of those ids; fail gets the indexes
// of a partition that cannot serve and the code. reply runs once every
// partition has answered. Each index is written by one partition's call
// only, so the parts need no lock between them; one call per partition
// (not per group) keeps a request naming many groups from flooding the
// shards' inboxes.
func (c *Coordinator) byPartition(ids []string, fn func(p *partition, idx []int), fail func(idx []int, code int16), reply func()) {
	c.byPartitionAsync(ids, func(p *partition, idx []int, done func()) { fn(p, idx); done() }, fail, reply)
}

// byPartitionAsync is byPartition for work that finishes later (after a
// write): fn calls done when its part is answered.
func (c *Coordinator) byPartitionAsync(ids []string, fn func(p *partition, idx []int, done func()), fail func(idx []int, code int16), reply func()) {
	if c == nil {
		all := make([]int, len(ids))
		for i := range all {
			all[i] = i
		}
		fail(all, kerr.CoordinatorNotAvailable.Code)
		reply()
		return
	}
	byPart := map[int32][]int{}
	var order []int32
	for i, id := range ids {
		pi := PartitionFor(id, int32(len(c.parts)))
		if byPart[pi] == nil {
			order = append(order, pi)
		}
		byPart[pi] = append(byPart[pi], i)
	}
	gth := newGather(reply)
	for _, pi := range order {
		idx := byPart[pi]
		gth.add()
		c.onPartition(c.parts[pi], func(p *partition) { fn(p, idx, gth.done) }, func(code int16) { fail(idx, code); gth.done() })
	}
	gth.done()
}

// groupOperations are the ACL operations that apply to a group (READ 3,
// DELETE 6, DESCRIBE 8, KIP-430): with no authorizer, all are allowed.
const groupOperations = 1<<3 | 1<<6 | 1<<8

// DescribeGroups (v0-v6) describes classic groups; one that does not
// exist, or is a consumer group (ConsumerGroupDescribe describes those), is
// described as Dead, and from v6 with GROUP_ID_NOT_FOUND and a message
// (KIP-1043), as Kafka 4.0 answers.
func (c *Coordinator) DescribeGroups(req *kmsg.DescribeGroupsRequest, reply func(*kmsg.DescribeGroupsResponse)) {
	resp := kmsg.NewPtrDescribeGroupsResponse()
	resp.Groups = make([]kmsg.DescribeGroupsResponseGroup, len(req.Groups))
	c.byPartition(req.Groups, func(p *partition, idx []int) {
		for _, i := range idx {
			resp.Groups[i] = p.describe(req.Groups[i], req.IncludeAuthorizedOperations)
			if d := &resp.Groups[i]; d.State == stateDead.String() && req.Version >= 6 {
				msg := fmt.Sprintf("Group %s not found.", d.Group)
				if g := p.groups[d.Group]; g != nil && g.consumer != nil {
					msg = fmt.Sprintf("Group %s is not a classic group.", d.Group)
				}
				d.ErrorCode, d.ErrorMessage = kerr.GroupIDNotFound.Code, &msg
			}
		}
	}, func(idx []int, code int16) {
		for _, i := range idx {
			resp.Groups[i] = kmsg.NewDescribeGroupsResponseGroup()
			resp.Groups[i].Group, resp.Groups[i].ErrorCode = req.Groups[i], code
		}
	}, func() { reply(resp) })
}

func (p *partition) describe(id string, ops bool) kmsg.DescribeGroupsResponseGroup {
	d := kmsg.NewDescribeGroupsResponseGroup()
	d.Group = id
	if ops {
		d.AuthorizedOperations = groupOperations
	}
	g := p.groups[id]
	if g == nil || g.consumer != nil {
		d.State = stateDead.String()
		return d
	}
	d.State, d.ProtocolType = g.state.String(), g.protocolType
	// Kafka shows the protocol and the members' metadata and assignments
	// only for a stable group: in other states they are being replaced.
	stable := g.state == stateStable && g.protocol != nil
	if stable {
		d.Protocol = *g.protocol
	}
	for _, m := range g.members {
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
		if stable {
			if md := m.metadataFor(*g.protocol); md != nil {
				dm.ProtocolMetadata = md
			}
			if m.assignment != nil {
				dm.MemberAssignment = m.assignment
			}
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// ListGroups (v0-v5) lists the groups of every partition this broker
// coordinates, filtered by state (v4+, KIP-518) and by type (v5+, KIP-848:
// "classic" or "consumer"), case-insensitively as Kafka does. While some
// partition is loading, the groups of the others are listed with
// COORDINATOR_LOAD_IN_PROGRESS. The partitions led elsewhere are left
// out, as Kafka lists only its own groups (clients ask every broker).
func (c *Coordinator) ListGroups(req *kmsg.ListGroupsRequest, reply func(*kmsg.ListGroupsResponse)) {
	resp := kmsg.NewPtrListGroupsResponse()
	if c == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		reply(resp)
		return
	}
	if c.closed.Load() {
		resp.ErrorCode = kerr.NotCoordinator.Code
		reply(resp)
		return
	}
	parts := make([][]kmsg.ListGroupsResponseGroup, len(c.parts))
	codes := make([]int16, len(c.parts))
	gth := newGather(func() {
		for i := range c.parts {
			resp.Groups = append(resp.Groups, parts[i]...)
			if codes[i] == kerr.NotCoordinator.Code && !c.closed.Load() {
				continue // led by another broker
			}
			if codes[i] != 0 && (resp.ErrorCode == 0 || codes[i] == kerr.CoordinatorLoadInProgress.Code) {
				resp.ErrorCode = codes[i]
			}
		}
		reply(resp)
	})
	for i, p := range c.parts {
		gth.add()
		c.onPartition(p, func(p *partition) { parts[i] = p.list(req.StatesFilter, req.TypesFilter); gth.done() },
			func(code int16) { codes[i] = code; gth.done() })
	}
	gth.done()
}

func (p *partition) list(states, types []string) []kmsg.ListGroupsResponseGroup {
	var out []kmsg.ListGroupsResponseGroup
	in := func(filter []string, v string) bool {
		return len(filter) == 0 || slices.ContainsFunc(filter, func(f string) bool { return strings.EqualFold(f, v) })
	}
	for _, g := range p.groups {
		if g.state == stateDead {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.id, g.protocolType, g.state.String(), "classic"
		if g.consumer != nil {
			lg.ProtocolType, lg.GroupState, lg.GroupType = "consumer", g.consumer.state(), "consumer"
		}
		if in(states, lg.GroupState) && in(types, lg.GroupType) {
			out = append(out, lg)
		}
	}
	slices.SortFunc(out, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return out
}

// DeleteGroups (v0-v3) deletes empty groups (of either type) with their
// offsets; a group with members is NON_EMPTY_GROUP. The answer waits for
// the tombstones to be written (Kafka writes them without waiting), so
// that a deleted group stays deleted across a restart. v3 adds messages
// to the errors (KIP-1043).
func (c *Coordinator) DeleteGroups(req *kmsg.DeleteGroupsRequest, reply func(*kmsg.DeleteGroupsResponse)) {
	resp := kmsg.NewPtrDeleteGroupsResponse()
	resp.Groups = make([]kmsg.DeleteGroupsResponseGroup, len(req.Groups))
	for i, id := range req.Groups {
		resp.Groups[i] = kmsg.NewDeleteGroupsResponseGroup()
		resp.Groups[i].Group = id
	}
	c.byPartitionAsync(req.Groups, func(p *partition, idx []int, done func()) {
		var recs []record
		var deleted []int
		for _, i := range idx {
			g := p.groups[req.Groups[i]]
			switch {
			case g == nil || g.state == stateDead:
				resp.Groups[i].ErrorCode = kerr.GroupIDNotFound.Code
			case !g.isEmpty():
				resp.Groups[i].ErrorCode = kerr.NonEmptyGroup.Code
			default:
				// Member ids handed out but not used yet die with the group.
				g.stopTimers()
				tps := make([]engine.TP, 0, len(g.offsets))
				for tp := range g.offsets {
					tps = append(tps, tp)
				}
				recs = append(recs, g.dropOffsets(tps, true)...)
				deleted = append(deleted, i)
			}
		}
		if len(recs) == 0 {
			done()
			return
		}
		p.appendRecords(recs, func(err error) {
			if code := storeErrorCode(err); code != 0 {
				p.c.log.Warn("group: writing group tombstones failed", "partition", p.tp.Partition, "err", err)
				for _, i := range deleted {
					resp.Groups[i].ErrorCode = code
				}
			}
			done()
		})
	}, func(idx []int, code int16) {
		for _, i := range idx {
			resp.Groups[i].ErrorCode = code
		}
	}, func() {
		if req.Version >= 3 {
			for i := range resp.Groups {
				if err := kerr.ErrorForCode(resp.Groups[i].ErrorCode); err != nil {
					msg := err.Error()
					if ke, ok := err.(*kerr.Error); ok {
						msg = ke.Description
					}
					resp.Groups[i].ErrorMessage = &msg
				}
			}
		}
		reply(resp)
	})
}
