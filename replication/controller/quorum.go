package controller

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Membership of the quorum: who votes, who observes, and how far each has
// read the log. Raft's configuration is the one record of membership:
// voters (raft.Voter) vote, observers (raft.Nonvoter) receive the log and
// apply it without voting. Kafka's brokers fetch the metadata log from the
// quorum as observers; a raft non-voter is the same thing, pushed by the
// leader instead of pulled.
//
// Every node that is not a local quorum's heartbeats the leader on the
// quorum RPC (below) every BrokerHeartbeatInterval, the first time at
// start: the heartbeat carries its id, the address of its controller
// port, its cluster id and its last log index. The leader
//
//   - refuses another cluster id (INCONSISTENT_CLUSTER_ID);
//   - adds a node it does not find in the configuration as a non-voter
//     (a broker-only node, a controller waiting for AddVoter, or a voter
//     that was removed and still runs: Kafka's removed voter observes
//     too), and updates the address of a member that moved;
//   - keeps the index and the time in memory (quorumProgress), for
//     DescribeQuorum. hashicorp/raft keeps its followers' match indexes to
//     itself; the heartbeat is how the leader learns them.
//
// The quorum RPC is a third protocol on the controller port (mux.go): a
// connection opening with quorumMagic carries frames as the forwarding RPC
// does (rpc.go), one request at a time:
//
//	request:  timeout ms u32 | op u8 | fields of the op
//	response: error code i16 | message | raft index u64 | payload
//
// A node that does not lead answers NOT_CONTROLLER with the leader's
// address as the payload when it knows one: a node that is no member yet
// knows the quorum only by controller.quorum.bootstrap.servers, asks any
// of them, and is told where the leader is (Kafka's bootstrap semantics).

const quorumMagic = 0xC8

// Quorum RPC ops.
const (
	opHeartbeat   uint8 = 1 // id i32, addr, cluster id, non-voter bool, last index u64
	opDescribe    uint8 = 2 // -> QuorumInfo
	opAddVoter    uint8 = 3 // id i32, addr
	opRemoveVoter uint8 = 4 // id i32
	opRemoveNode  uint8 = 5 // id i32: a non-voter leaves the configuration
)

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

// nodeProgress is the leader's memory of one node's heartbeats.
type nodeProgress struct {
	addr         string
	nonVoter     bool // a broker-only node: never a voter
	lastIndex    uint64
	lastFetch    time.Time
	lastCaughtUp time.Time
	// commitAtFetch is the commit index when the last report came.
	commitAtFetch uint64
}

// quorumProgress is what the leader learned from the heartbeats. It is not
// replicated: a new leader learns it again within one interval.
type quorumProgress struct {
	mu    sync.Mutex
	nodes map[int32]*nodeProgress
}

func (q *quorumProgress) report(id int32, addr string, nonVoter bool, index, commit uint64, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.nodes == nil {
		q.nodes = map[int32]*nodeProgress{}
	}
	p := q.nodes[id]
	if p == nil {
		p = &nodeProgress{}
		q.nodes[id] = p
	}
	if index >= p.commitAtFetch && !p.lastFetch.IsZero() {
		p.lastCaughtUp = now
	}
	p.addr, p.nonVoter, p.lastIndex, p.lastFetch, p.commitAtFetch = addr, nonVoter, index, now, commit
}

func (q *quorumProgress) get(id int32) (nodeProgress, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	p, ok := q.nodes[id]
	if !ok {
		return nodeProgress{}, false
	}
	return *p, true
}

func (q *quorumProgress) forget(id int32) {
	q.mu.Lock()
	delete(q.nodes, id)
	q.mu.Unlock()
}

func (q *quorumProgress) ids() []int32 {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []int32
	for id := range q.nodes {
		out = append(out, id)
	}
	return out
}

// serverID is raft's id of node id.
func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

// nodeID parses raft's id of a node; false when it is no node id.
func nodeID(s raft.ServerID) (int32, bool) {
	n, err := strconv.ParseInt(string(s), 10, 32)
	return int32(n), err == nil && n >= 0
}

// configuration returns raft's latest configuration as this node knows it.
func (c *Controller) configuration() ([]raft.Server, error) {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, raftError(err)
	}
	return f.Configuration().Servers, nil
}

// member reports whether node id is in this node's raft configuration, or
// whether the configuration is still empty (a node that has not joined
// yet takes its first connection from any authenticated node: the leader
// that is adding it). The mux asks it for raft connections under TLS.
func (c *Controller) member(id int32) bool {
	if c.cfg.voterAddr(id) != "" {
		return true
	}
	select {
	case <-c.raftReady:
	default:
		return false
	}
	servers, err := c.configuration()
	if err != nil {
		return false
	}
	return len(servers) == 0 || slices.ContainsFunc(servers, func(s raft.Server) bool { return s.ID == serverID(id) })
}

// voterCount is the voters of this node's configuration.
func (c *Controller) voterCount() int {
	servers, err := c.configuration()
	if err != nil {
		return len(c.cfg.Voters)
	}
	n := 0
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			n++
		}
	}
	return n
}

// quorumLoop heartbeats the leader with this node's progress (see the top
// of the file), at once and then every BrokerHeartbeatInterval; until the
// first heartbeat is answered it retries every 100 ms, so that a new node
// joins without waiting an interval.
func (c *Controller) quorumLoop() {
	defer c.wg.Done()
	<-c.raftReady
	wait := time.Duration(0)
	joined := false
	var leadingSince time.Time
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(wait):
		}
		if c.raft.State() != raft.Leader {
			leadingSince = time.Time{}
		} else {
			if leadingSince.IsZero() {
				leadingSince = time.Now()
			}
			c.pruneObservers(leadingSince)
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.BrokerHeartbeatInterval)
		e := &encoder{}
		e.u8(opHeartbeat)
		e.i32(c.cfg.NodeID)
		e.str(c.cfg.ownAddr())
		e.str(c.cfg.ClusterID)
		e.bool(c.cfg.NonVoter)
		e.u64(c.raft.LastIndex())
		_, err := c.quorumCall(ctx, e.b)
		cancel()
		switch {
		case err == nil:
			if !joined {
				joined = true
			}
			wait = c.cfg.BrokerHeartbeatInterval
		case errors.Is(err, ErrInconsistentClusterID):
			c.log.Error("controller: the quorum refuses this node", "error", err)
			wait = c.cfg.BrokerHeartbeatInterval
		default:
			if joined && c.ctx.Err() == nil {
				c.log.Debug("controller: quorum heartbeat failed", "error", err)
			}
			wait = 100 * time.Millisecond
			if joined {
				wait = c.cfg.BrokerHeartbeatInterval
			}
		}
	}
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

// quorumCall runs a quorum RPC op on the leader: this node when it leads,
// else the leader raft names, else the last leader a node named, else the
// bootstrap servers and static voters in turn. It retries on
// NOT_CONTROLLER and broken connections until ctx ends.
func (c *Controller) quorumCall(ctx context.Context, body []byte) (reply, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultRequestTimeout)
		defer cancel()
	}
	var seeds []string
	for _, v := range c.cfg.Voters {
		if v.ID != c.cfg.NodeID && v.Addr != "" {
			seeds = append(seeds, v.Addr)
		}
	}
	seeds = append(seeds, c.cfg.BootstrapServers...)
	hint := ""
	next := 0
	backoff := 5 * time.Millisecond
	for {
		var r reply
		var err error
		addr, id := c.raft.LeaderWithID()
		target := ""
		switch {
		case c.raft.State() == raft.Leader:
		case id != "" && id != serverID(c.cfg.NodeID):
			target = string(addr)
		case hint != "":
			target, hint = hint, ""
		case len(seeds) > 0:
			target = seeds[next%len(seeds)]
			next++
		}
		switch {
		case c.raft.State() == raft.Leader:
			r, err = c.leadQuorum(ctx, body)
		case target != "" && target != c.cfg.ownAddr():
			r, err = c.call(ctx, target, quorumMagic, body)
			if errors.Is(err, ErrNotController) && len(r.payload) > 0 {
				hint = string(r.payload)
			}
		default:
			err = errf(ErrNotController, "no raft leader known to node %d", c.cfg.NodeID)
		}
		if err == nil {
			return r, nil
		}
		var te *transportError
		if !errors.Is(err, ErrNotController) && !errors.As(err, &te) {
			return r, err
		}
		if c.ctx.Err() != nil {
			return reply{}, ErrClosed
		}
		select {
		case <-ctx.Done():
			return reply{}, fmt.Errorf("%w: quorum request: %w (last: %w)", ErrRequestTimedOut, ctx.Err(), err)
		case <-c.ctx.Done():
			return reply{}, ErrClosed
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// serveQuorum serves one quorum RPC connection (as serveRPC does the
// forwarding RPC). Under TLS, a heartbeat must come from the node it
// names, and membership changes from a node of the configuration.
func (c *Controller) serveQuorum(conn net.Conn, peer int32) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("controller: quorum RPC panic; closing the connection", "remote", conn.RemoteAddr().String(),
				"panic", r, "stack", string(debug.Stack()))
		}
	}()
	br := bufio.NewReader(conn)
	for {
		if err := conn.SetReadDeadline(time.Now().Add(rpcIdleTimeout)); err != nil {
			return
		}
		body, err := readFrame(br)
		if err != nil {
			return
		}
		var r reply
		d := &decoder{b: body}
		timeout := time.Duration(d.u32()) * time.Millisecond
		if d.err != nil || len(d.b) == 0 {
			err = fmt.Errorf("%w: quorum request of %d bytes", ErrCorrupt, len(body))
		} else if c.cfg.TLS != nil && !c.quorumAllowed(d.b, peer) {
			err = errf(ErrClusterAuthorization, "node %d may not send quorum op %d", peer, d.b[0])
		} else {
			ctx, cancel := context.WithTimeout(c.ctx, min(max(timeout, time.Millisecond), rpcTimeoutMax))
			select {
			case <-c.raftReady:
				r, err = c.leadQuorum(ctx, d.b)
			case <-ctx.Done():
				err = errf(ErrNotController, "node %d is starting", c.cfg.NodeID)
			}
			cancel()
			if errors.Is(err, ErrNotController) {
				if addr, _ := c.raft.LeaderWithID(); addr != "" {
					r.payload = []byte(addr)
				}
			}
		}
		if err := conn.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
			return
		}
		if err := writeFrame(conn, encodeResponse(r, err)); err != nil {
			return
		}
	}
}

// quorumAllowed is the TLS rule of serveQuorum: a heartbeat names its
// sender, a membership change comes from a member.
func (c *Controller) quorumAllowed(body []byte, peer int32) bool {
	d := &decoder{b: body}
	switch d.u8() {
	case opHeartbeat:
		return d.i32() == peer
	case opDescribe:
		return true
	default:
		return c.member(peer)
	}
}

// leadQuorum executes a quorum op on this node, which must lead.
func (c *Controller) leadQuorum(ctx context.Context, body []byte) (reply, error) {
	if c.raft.State() != raft.Leader {
		return reply{}, errf(ErrNotController, "node %d is not the raft leader", c.cfg.NodeID)
	}
	d := &decoder{b: body}
	op := d.u8()
	switch op {
	case opHeartbeat:
		id, addr, cluster, nonVoter, index := d.i32(), d.str(), d.str(), d.bool(), d.u64()
		if err := d.done(); err != nil {
			return reply{}, err
		}
		return reply{}, c.quorumHeartbeat(ctx, id, addr, cluster, nonVoter, index)
	case opDescribe:
		if err := d.done(); err != nil {
			return reply{}, err
		}
		info, err := c.describeQuorum()
		if err != nil {
			return reply{}, err
		}
		return reply{payload: encodeQuorumInfo(info)}, nil
	case opAddVoter:
		id, addr := d.i32(), d.str()
		if err := d.done(); err != nil {
			return reply{}, err
		}
		return c.addVoter(ctx, id, addr)
	case opRemoveVoter, opRemoveNode:
		id := d.i32()
		if err := d.done(); err != nil {
			return reply{}, err
		}
		if op == opRemoveNode {
			return c.removeNonVoter(ctx, id)
		}
		return c.removeVoter(ctx, id)
	}
	return reply{}, fmt.Errorf("%w: quorum op %d", ErrCorrupt, op)
}

// quorumHeartbeat is the leader's side of a node's heartbeat.
func (c *Controller) quorumHeartbeat(ctx context.Context, id int32, addr, cluster string, nonVoter bool, index uint64) error {
	if id < 0 {
		return errf(ErrInvalidRequest, "node id %d", id)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return errf(ErrInvalidRequest, "node %d: address %q: %v", id, addr, err)
	}
	if c.cfg.ClusterID != "" && cluster != "" && cluster != c.cfg.ClusterID {
		return errf(ErrInconsistentClusterID, "node %d has cluster id %s, the quorum %s", id, cluster, c.cfg.ClusterID)
	}
	c.progress.report(id, addr, nonVoter, index, c.raft.CommitIndex(), time.Now())
	servers, err := c.configuration()
	if err != nil {
		return err
	}
	timeout := time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	i := slices.IndexFunc(servers, func(s raft.Server) bool { return s.ID == serverID(id) })
	var f raft.IndexFuture
	switch {
	case i < 0:
		c.log.Info("controller: adding a non-voter (observer) to the quorum", "node", id, "addr", addr, "broker_only", nonVoter)
		f = c.raft.AddNonvoter(serverID(id), raft.ServerAddress(addr), 0, timeout)
	case string(servers[i].Address) == addr:
		return nil
	case servers[i].Suffrage == raft.Nonvoter:
		c.log.Info("controller: a non-voter moved", "node", id, "from", servers[i].Address, "to", addr)
		f = c.raft.AddNonvoter(serverID(id), raft.ServerAddress(addr), 0, timeout)
	default:
		// A voter's address comes from its configuration: a voter whose
		// port moved is removed and added again by an operator.
		return nil
	}
	if err := f.Error(); err != nil {
		return raftError(err)
	}
	return nil
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
	timeout := defaultRequestTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
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
	timeout := defaultRequestTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
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
	timeout := defaultRequestTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
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
