package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	c.serveFrames(conn, "quorum RPC", func(body []byte) (reply, error) {
		d := &decoder{b: body}
		timeout := time.Duration(d.u32()) * time.Millisecond
		if d.err != nil || len(d.b) == 0 {
			return reply{}, fmt.Errorf("%w: quorum request of %d bytes", ErrCorrupt, len(body))
		}
		if c.cfg.TLS != nil && !c.quorumAllowed(d.b, peer) {
			return reply{}, errf(ErrClusterAuthorization, "node %d may not send quorum op %d", peer, d.b[0])
		}
		r, err := c.whenReady(timeout, func(ctx context.Context) (reply, error) { return c.leadQuorum(ctx, d.b) })
		if errors.Is(err, ErrNotController) {
			// The leader's address, for the caller to ask next.
			if addr, _ := c.raft.LeaderWithID(); addr != "" {
				r.payload = []byte(addr)
			}
		}
		return r, err
	})
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
	case id == c.cfg.NodeID && servers[i].Address == localAddr:
		// A cluster's seed (bootstrap.go), leading: its voter's address
		// is still the local quorum's, which no other node could reach
		// once it leads or votes. AddVoter of a voter moves its address.
		c.log.Info("controller: the seed's voter takes its controller address", "node", id, "addr", addr)
		f = c.raft.AddVoter(serverID(id), raft.ServerAddress(addr), 0, timeout)
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
