package controller

import (
	"context"
	"net"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// The quorum's membership as the leader changes it and describes it
// (KIP-853's AddRaftVoter and RemoveRaftVoter, DescribeQuorum), on the
// quorum RPC of quorum.go.

// QuorumReplica is one voter or observer of the quorum as the leader sees
// it. LogEndOffset is the node's last raft log index as it last reported
// it (the leader's own: now); LastFetch is when that report came, and
// LastCaughtUp the last report whose index reached the commit index the
// leader had at the report before it (Kafka's rule for
// lastCaughtUpTimestamp: caught up with where the leader was at the
// previous fetch). -1 and the zero time when the leader has no report.
type QuorumReplica struct {
	ID           int32
	Addr         string
	LogEndOffset int64
	LastFetch    time.Time
	LastCaughtUp time.Time
}

// QuorumInfo is DescribeQuorum's answer: the leader, its term (Kafka's
// leader epoch), the commit index (the high watermark), the voters and
// the observers (non-voters, and nodes that heartbeated and are not in
// the configuration yet), each sorted by id.
type QuorumInfo struct {
	LeaderID      int32
	Epoch         int64
	HighWatermark int64
	Voters        []QuorumReplica
	Observers     []QuorumReplica
}

// pruneObservers takes out of the configuration the non-voters that have
// not heartbeated this leader for BrokerSessionTimeout (counted from when
// it began to lead): raft would otherwise retry AppendEntries to a node
// that is gone, forever. Membership of the log is not registration: a
// broker pruned here stays registered (fenced by its silence), and rejoins
// with its next heartbeat.
func (c *Controller) pruneObservers(leadingSince time.Time) {
	if time.Since(leadingSince) < c.cfg.BrokerSessionTimeout {
		return
	}
	servers, err := c.configuration()
	if err != nil {
		return
	}
	for _, s := range servers {
		id, ok := nodeID(s.ID)
		if !ok || s.Suffrage != raft.Nonvoter {
			continue
		}
		if p, ok := c.progress.get(id); ok && time.Since(p.lastFetch) < c.cfg.BrokerSessionTimeout {
			continue
		}
		c.log.Info("controller: removing a silent non-voter from the quorum", "node", id, "silent_for_more_than", c.cfg.BrokerSessionTimeout)
		c.progress.forget(id)
		if err := c.raft.RemoveServer(s.ID, 0, c.cfg.ElectionTimeout).Error(); err != nil {
			c.log.Warn("controller: removing a silent non-voter", "node", id, "error", err)
			return
		}
	}
}

// describeQuorum builds DescribeQuorum's answer on the leader.
func (c *Controller) describeQuorum() (QuorumInfo, error) {
	servers, err := c.configuration()
	if err != nil {
		return QuorumInfo{}, err
	}
	now := time.Now()
	info := QuorumInfo{LeaderID: c.cfg.NodeID, Epoch: int64(c.raft.CurrentTerm()), HighWatermark: int64(c.raft.CommitIndex())}
	seen := map[int32]bool{}
	replica := func(id int32, addr string) QuorumReplica {
		seen[id] = true
		if id == c.cfg.NodeID {
			return QuorumReplica{ID: id, Addr: addr, LogEndOffset: int64(c.raft.LastIndex()), LastFetch: now, LastCaughtUp: now}
		}
		p, ok := c.progress.get(id)
		if !ok {
			return QuorumReplica{ID: id, Addr: addr, LogEndOffset: -1}
		}
		return QuorumReplica{ID: id, Addr: addr, LogEndOffset: int64(p.lastIndex), LastFetch: p.lastFetch, LastCaughtUp: p.lastCaughtUp}
	}
	for _, s := range servers {
		id, ok := nodeID(s.ID)
		if !ok {
			continue
		}
		if s.Suffrage == raft.Nonvoter {
			info.Observers = append(info.Observers, replica(id, string(s.Address)))
		} else {
			info.Voters = append(info.Voters, replica(id, string(s.Address)))
		}
	}
	for _, id := range c.progress.ids() {
		if !seen[id] {
			p, _ := c.progress.get(id)
			info.Observers = append(info.Observers, replica(id, p.addr))
		}
	}
	byID := func(a, b QuorumReplica) int { return int(a.ID) - int(b.ID) }
	slices.SortFunc(info.Voters, byID)
	slices.SortFunc(info.Observers, byID)
	return info, nil
}

// addVoter promotes node id to a voter at addr (KIP-853's AddRaftVoter):
// DUPLICATE_VOTER when it votes already; the node must have heartbeated
// this leader (it runs and is an observer) and have caught up with the
// commit index of the request's start before the request's deadline, or
// the answer is REQUEST_TIMED_OUT, as Kafka's leader waits for the new
// voter to catch up.
func (c *Controller) addVoter(ctx context.Context, id int32, addr string) (reply, error) {
	if id < 0 {
		return reply{}, errf(ErrInvalidRequest, "node id %d", id)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return reply{}, errf(ErrInvalidRequest, "node %d: address %q: %v", id, addr, err)
	}
	servers, err := c.configuration()
	if err != nil {
		return reply{}, err
	}
	if slices.ContainsFunc(servers, func(s raft.Server) bool { return s.ID == serverID(id) && s.Suffrage != raft.Nonvoter }) {
		return reply{}, errf(ErrDuplicateVoter, "node %d is a voter already", id)
	}
	if p, ok := c.progress.get(id); ok && p.nonVoter {
		return reply{}, errf(ErrInvalidRequest, "node %d is a broker-only node (process.roles=broker): it cannot vote", id)
	}
	// The answer must reach the caller before its own deadline does, or
	// it sees a broken call instead of REQUEST_TIMED_OUT.
	wait := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		wait, cancel = context.WithDeadline(ctx, dl.Add(-time.Until(dl)/10))
		defer cancel()
	}
	target := c.raft.CommitIndex()
	for {
		p, ok := c.progress.get(id)
		if ok && p.lastIndex >= target && time.Since(p.lastFetch) < c.cfg.BrokerSessionTimeout {
			break
		}
		select {
		case <-wait.Done():
			if !ok {
				return reply{}, errf(ErrRequestTimedOut, "node %d has not joined the quorum as an observer (is it running, with this quorum's bootstrap servers?)", id)
			}
			return reply{}, errf(ErrRequestTimedOut, "node %d has not caught up with index %d (at %d)", id, target, p.lastIndex)
		case <-c.ctx.Done():
			return reply{}, ErrClosed
		case <-time.After(20 * time.Millisecond):
		}
	}
	timeout := raftTimeout(ctx)
	c.log.Info("controller: adding a voter", "node", id, "addr", addr)
	f := c.raft.AddVoter(serverID(id), raft.ServerAddress(addr), 0, timeout)
	if err := f.Error(); err != nil {
		return reply{}, raftError(err)
	}
	return reply{}, nil
}

// removeVoter takes node id's vote (KIP-853's RemoveRaftVoter):
// VOTER_NOT_FOUND when it has none, INVALID_REQUEST for the last voter. A
// leader that removes itself steps down once the change commits. A
// removed node that still runs observes: its next heartbeat adds it back
// as a non-voter.
func (c *Controller) removeVoter(ctx context.Context, id int32) (reply, error) {
	servers, err := c.configuration()
	if err != nil {
		return reply{}, err
	}
	voters := 0
	found := false
	for _, s := range servers {
		if s.Suffrage != raft.Nonvoter {
			voters++
			found = found || s.ID == serverID(id)
		}
	}
	switch {
	case !found:
		return reply{}, errf(ErrVoterNotFound, "node %d is not a voter", id)
	case voters == 1:
		return reply{}, errf(ErrInvalidRequest, "node %d is the last voter", id)
	}
	timeout := raftTimeout(ctx)
	c.log.Info("controller: removing a voter", "node", id)
	c.progress.forget(id)
	if err := c.raft.RemoveServer(serverID(id), 0, timeout).Error(); err != nil {
		return reply{}, raftError(err)
	}
	return reply{}, nil
}

// removeNonVoter takes an observer out of the configuration (a broker
// unregistered); a voter is left alone: its vote is changed by
// RemoveVoter only.
func (c *Controller) removeNonVoter(ctx context.Context, id int32) (reply, error) {
	servers, err := c.configuration()
	if err != nil {
		return reply{}, err
	}
	c.progress.forget(id)
	if !slices.ContainsFunc(servers, func(s raft.Server) bool { return s.ID == serverID(id) && s.Suffrage == raft.Nonvoter }) {
		return reply{}, nil
	}
	timeout := raftTimeout(ctx)
	if err := c.raft.RemoveServer(serverID(id), 0, timeout).Error(); err != nil {
		return reply{}, raftError(err)
	}
	return reply{}, nil
}

func encodeQuorumInfo(q QuorumInfo) []byte {
	e := &encoder{}
	e.i32(q.LeaderID)
	e.i64(q.Epoch)
	e.i64(q.HighWatermark)
	for _, rs := range [][]QuorumReplica{q.Voters, q.Observers} {
		e.uvarint(len(rs))
		for _, r := range rs {
			e.i32(r.ID)
			e.str(r.Addr)
			e.i64(r.LogEndOffset)
			e.i64(unixMilli(r.LastFetch))
			e.i64(unixMilli(r.LastCaughtUp))
		}
	}
	return e.b
}

func decodeQuorumInfo(b []byte) (QuorumInfo, error) {
	d := &decoder{b: b}
	q := QuorumInfo{LeaderID: d.i32(), Epoch: d.i64(), HighWatermark: d.i64()}
	for _, rs := range []*[]QuorumReplica{&q.Voters, &q.Observers} {
		n := d.count(4 + 1 + 8 + 8 + 8)
		for range n {
			r := QuorumReplica{ID: d.i32(), Addr: d.str(), LogEndOffset: d.i64()}
			r.LastFetch, r.LastCaughtUp = fromUnixMilli(d.i64()), fromUnixMilli(d.i64())
			*rs = append(*rs, r)
		}
	}
	return q, d.done()
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

func fromUnixMilli(ms int64) time.Time {
	if ms < 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// DescribeQuorum returns the quorum as its leader sees it (Kafka's
// DescribeQuorum, which brokers forward to the active controller).
func (c *Controller) DescribeQuorum(ctx context.Context) (QuorumInfo, error) {
	r, err := c.quorumCall(ctx, []byte{opDescribe})
	if err != nil {
		return QuorumInfo{}, err
	}
	return decodeQuorumInfo(r.payload)
}

// AddVoter makes node id, an observer of the quorum, a voter whose
// controller port is addr (KIP-853's AddRaftVoter). Errors:
// DUPLICATE_VOTER, REQUEST_TIMED_OUT (the node did not join or catch up
// in time), INVALID_REQUEST.
func (c *Controller) AddVoter(ctx context.Context, id int32, addr string) error {
	e := &encoder{}
	e.u8(opAddVoter)
	e.i32(id)
	e.str(addr)
	_, err := c.quorumCall(ctx, e.b)
	return err
}

// RemoveVoter takes node id's vote (KIP-853's RemoveRaftVoter). Errors:
// VOTER_NOT_FOUND, INVALID_REQUEST (the last voter).
func (c *Controller) RemoveVoter(ctx context.Context, id int32) error {
	e := &encoder{}
	e.u8(opRemoveVoter)
	e.i32(id)
	_, err := c.quorumCall(ctx, e.b)
	return err
}

// removeNode takes non-voter id out of the configuration.
func (c *Controller) removeNode(ctx context.Context, id int32) error {
	e := &encoder{}
	e.u8(opRemoveNode)
	e.i32(id)
	_, err := c.quorumCall(ctx, e.b)
	return err
}
