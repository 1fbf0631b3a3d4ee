package node

import (
	"context"
	"time"

	"ringlog/engine"
	"ringlog/replication"
	"ringlog/replication/controller"
	"ringlog/replication/fetcher"
)

// becomeFollower makes this broker a follower of tp at p.LeaderEpoch and
// starts copying from the leader (after truncating, KIP-101).
func (n *Node) becomeFollower(img *controller.Image, pt *part, p controller.Partition) {
	n.dropLeader(pt)
	n.stopFollowing(pt)
	err := n.eng.BecomeFollower(pt.tp, p.LeaderEpoch)
	// Whatever the engine answered, the controller says this broker no
	// longer leads tp: services on top of it stop using it.
	n.resigned(pt, p.LeaderEpoch)
	if err != nil {
		n.log.Error("node: cannot become follower", "topic", pt.tp.Topic, "partition", pt.tp.Partition, "epoch", p.LeaderEpoch, "err", err)
		return
	}
	pt.mu.Lock()
	pt.role, pt.leaderID, pt.leaderEpoch = engine.RoleFollower, p.Leader, p.LeaderEpoch
	pt.mu.Unlock()
	n.log.Info("node: follower", "topic", pt.tp.Topic, "partition", pt.tp.Partition, "leader", p.Leader, "epoch", p.LeaderEpoch)
	if p.Leader < 0 {
		return // offline: no live ISR member
	}
	b, ok := img.Broker(p.Leader)
	if !ok {
		return
	}
	n.startFetching(pt, b.Addr, n.ownEpoch(img))
}

// startFetching adds tp to the stream of its leader, asking first where to
// truncate; the stream's fetches carry this broker's epoch.
func (n *Node) startFetching(pt *part, leaderAddr string, epoch int64) {
	st, err := n.eng.State(pt.tp)
	if err != nil {
		return
	}
	entries, err := n.eng.LeaderEpochs(pt.tp)
	if err != nil {
		return
	}
	t := replication.StartTruncation(entries, st.LEO, st.HW)
	fp := fetcher.Partition{TP: pt.tp, LogStartOffset: st.LogStartOffset, FetchOffset: st.LEO}
	if t.Done {
		// No epoch known (an empty log): truncate to the HW and fetch.
		if t.TruncateTo < st.LEO {
			if err := n.eng.Truncate(pt.tp, t.TruncateTo); err != nil {
				n.log.Error("node: truncation failed", "topic", pt.tp.Topic, "partition", pt.tp.Partition, "err", err)
				return
			}
			if st, err = n.eng.State(pt.tp); err != nil {
				return
			}
			fp.FetchOffset = st.LEO
		}
	} else {
		fp.NeedsTruncation, fp.LastFetchedEpoch = true, t.Ask
	}
	pt.mu.Lock()
	fp.TopicID, fp.LeaderEpoch = pt.id, pt.leaderEpoch
	leader := pt.leaderID
	pt.asked = t.Ask
	pt.pausedAt = time.Time{}
	pt.mu.Unlock()
	s := n.stream(leader, leaderAddr, epoch)
	if s == nil {
		return
	}
	s.Add(fp)
}

// stream returns the fetch stream to a leader, creating it, or replacing
// it when the leader's address changed (it came back on another port) or
// this broker's own epoch did (its fetches would carry the epoch of the
// previous incarnation, which the leader refuses once it knows of this one).
func (n *Node) stream(leader int32, addr string, epoch int64) *fetcher.Stream {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx.Err() != nil {
		return nil
	}
	if st := n.streams[leader]; st != nil {
		if st.addr == addr && st.epoch == epoch {
			return st.s
		}
		go st.s.Close(context.Background())
		delete(n.streams, leader)
	}
	cfg := n.cfg.Fetch
	cfg.Addr, cfg.ReplicaID, cfg.BrokerEpoch = addr, n.cfg.NodeID, epoch
	if cfg.Throttle == nil {
		cfg.Throttle = (*followerThrottle)(n)
	}
	s, err := fetcher.New(cfg, (*handler)(n))
	if err != nil {
		n.log.Error("node: cannot start a fetch stream", "leader", leader, "addr", addr, "err", err)
		return nil
	}
	n.streams[leader] = &stream{addr: addr, epoch: epoch, s: s}
	return s
}

// ownEpoch is this broker's registration epoch in img, -1 before it has
// registered.
func (n *Node) ownEpoch(img *controller.Image) int64 {
	if b, ok := img.Broker(n.cfg.NodeID); ok {
		return b.Epoch
	}
	return -1
}

// staleStreams returns the leaders whose stream must be replaced: the
// leader's address is no longer the one it connects to, or this broker's
// epoch is no longer the one its fetches carry.
func (n *Node) staleStreams(img *controller.Image) map[int32]bool {
	epoch := n.ownEpoch(img)
	n.mu.Lock()
	defer n.mu.Unlock()
	stale := map[int32]bool{}
	for leader, st := range n.streams {
		b, ok := img.Broker(leader)
		if (ok && st.addr != b.Addr) || st.epoch != epoch {
			stale[leader] = true
		}
	}
	return stale
}

// stopFollowing removes tp from the stream it is fetched by, if any.
func (n *Node) stopFollowing(pt *part) {
	pt.mu.Lock()
	leader, role := pt.leaderID, pt.role
	pt.mu.Unlock()
	if role != engine.RoleFollower {
		return
	}
	n.mu.Lock()
	st := n.streams[leader]
	n.mu.Unlock()
	if st != nil {
		st.s.Remove(pt.tp)
	}
}

// closeIdleStreams closes the streams to brokers this broker no longer
// follows anything from.
func (n *Node) closeIdleStreams(img *controller.Image) {
	used := map[int32]bool{}
	n.mu.Lock()
	for _, pt := range n.parts {
		pt.mu.Lock()
		if pt.role == engine.RoleFollower {
			used[pt.leaderID] = true
		}
		pt.mu.Unlock()
	}
	var idle []*stream
	for id, st := range n.streams {
		if !used[id] {
			idle = append(idle, st)
			delete(n.streams, id)
		}
	}
	n.mu.Unlock()
	for _, st := range idle {
		go st.s.Close(context.Background())
	}
}

// retryPaused starts again the partitions a stream paused (the leader
// answered NOT_LEADER_OR_FOLLOWER or an epoch error before it applied the
// metadata this broker has, an append failed) a tick ago, from a fresh
// truncation.
func (n *Node) retryPaused() {
	img := n.Image()
	n.mu.Lock()
	var retry []*part
	for _, pt := range n.parts {
		pt.mu.Lock()
		if pt.role == engine.RoleFollower && !pt.pausedAt.IsZero() && time.Since(pt.pausedAt) >= n.cfg.ISRCheckInterval/2 {
			retry = append(retry, pt)
		}
		pt.mu.Unlock()
	}
	n.mu.Unlock()
	for _, pt := range retry {
		pt.mu.Lock()
		leader := pt.leaderID
		pt.mu.Unlock()
		if b, ok := img.Broker(leader); ok {
			n.startFetching(pt, b.Addr, n.ownEpoch(img))
		}
	}
}

// handler is the node as the fetch streams' Handler.
type handler Node

func (h *handler) node() *Node { return (*Node)(h) }

// Records appends what the leader sent and takes the leader's HW (capped
// by what this replica has).
func (h *handler) Records(tp engine.TP, data []byte, hw, logStart int64, done func(int64, error)) {
	n := h.node()
	n.eng.AppendReplica(tp, data, func(leo int64, err error) {
		if err == nil {
			_ = n.eng.SetHW(tp, replication.FollowerHW(hw, logStart, leo))
			n.followLogStart(tp, logStart)
		}
		done(leo, err)
	})
}

// followLogStart moves a follower's log start up to its leader's (records
// deleted there by DeleteRecords or retention), as Kafka's followers do,
// once its own high watermark has reached it. It does not wait: the move
// runs on a goroutine, one at a time per partition.
func (n *Node) followLogStart(tp engine.TP, logStart int64) {
	st, err := n.eng.State(tp)
	if err != nil || logStart <= st.LogStartOffset || logStart > st.HW {
		return
	}
	pt := n.part(tp)
	if pt == nil || !pt.movingStart.CompareAndSwap(false, true) {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		defer pt.movingStart.Store(false)
		if _, err := n.eng.DeleteRecords(tp, logStart); err != nil && n.ctx.Err() == nil {
			n.log.Warn("node: cannot move the log start to the leader's", "topic", tp.Topic, "partition", tp.Partition, "log_start", logStart, "err", err)
		}
	}()
}

// Truncate carries out one step of the truncation walk (on a goroutine of
// its own: it waits for the shard).
func (h *handler) Truncate(tp engine.TP, epoch int32, endOffset int64, done func(int64, error)) {
	n := h.node()
	pt := n.part(tp)
	if pt == nil {
		done(0, engine.ErrUnknownTopicOrPartition)
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		pt.mu.Lock()
		asked, leaderEpoch := pt.asked, pt.leaderEpoch
		pt.mu.Unlock()
		st, err := n.eng.State(tp)
		if err != nil {
			done(0, err)
			return
		}
		entries, err := n.eng.LeaderEpochs(tp)
		if err != nil {
			done(0, err)
			return
		}
		step, err := replication.TruncationStep(entries, st.LEO, st.HW, asked, replication.EpochEndOffset{Epoch: epoch, EndOffset: endOffset})
		if err != nil {
			done(0, err)
			return
		}
		// Truncating to the LEO itself changes no data but drops the
		// leader-epoch entries that start there (an epoch led without
		// writes), as Kafka's truncateTo does.
		if step.TruncateTo <= st.LEO {
			if err := n.eng.Truncate(tp, step.TruncateTo); err != nil {
				done(0, err)
				return
			}
		}
		if step.TruncateTo < st.LEO {
			n.log.Info("node: truncated", "topic", tp.Topic, "partition", tp.Partition, "from", st.LEO, "to", step.TruncateTo, "leader_epoch", leaderEpoch)
		}
		if st, err = n.eng.State(tp); err != nil {
			done(0, err)
			return
		}
		if step.Done {
			done(st.LEO, nil)
			return
		}
		// Ask again about an older epoch (KIP-279): a replacing Add.
		pt.mu.Lock()
		if pt.leaderEpoch != leaderEpoch || pt.role != engine.RoleFollower {
			pt.mu.Unlock()
			return
		}
		pt.asked = step.Ask
		fp := fetcher.Partition{TP: tp, TopicID: pt.id, LeaderEpoch: pt.leaderEpoch, FetchOffset: st.LEO, LogStartOffset: st.LogStartOffset,
			NeedsTruncation: true, LastFetchedEpoch: step.Ask}
		leader := pt.leaderID
		pt.mu.Unlock()
		n.mu.Lock()
		s := n.streams[leader]
		n.mu.Unlock()
		if s != nil {
			s.s.Add(fp)
		}
	}()
}

// OutOfRange resets a follower the leader cannot serve from its LEO.
func (h *handler) OutOfRange(tp engine.TP, leaderLogStart, leaderHW int64, done func(int64, error)) {
	n := h.node()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		st, err := n.eng.State(tp)
		if err != nil {
			done(0, err)
			return
		}
		r := replication.OutOfRange(st.LEO, leaderLogStart, leaderHW)
		switch {
		case r.StartAt:
			err = n.eng.TruncateFullyAndStartAt(tp, r.FetchFrom)
		case r.TruncateTo < st.LEO:
			err = n.eng.Truncate(tp, r.TruncateTo)
		}
		if err != nil {
			done(0, err)
			return
		}
		n.log.Info("node: fetch offset out of range at the leader", "topic", tp.Topic, "partition", tp.Partition,
			"leo", st.LEO, "leader_log_start", leaderLogStart, "leader_hw", leaderHW, "fetch_from", r.FetchFrom)
		done(r.FetchFrom, nil)
	}()
}

// HighWatermark takes the leader's HW from a response without records.
func (h *handler) HighWatermark(tp engine.TP, hw, logStart int64) {
	n := h.node()
	st, err := n.eng.State(tp)
	if err != nil {
		return
	}
	_ = n.eng.SetHW(tp, replication.FollowerHW(hw, logStart, st.LEO))
	n.followLogStart(tp, logStart)
}

// Paused notes that the stream stopped fetching tp; the next tick (or the
// next metadata) starts it again.
func (h *handler) Paused(tp engine.TP, err error) {
	n := h.node()
	if pt := n.part(tp); pt != nil {
		pt.mu.Lock()
		pt.pausedAt = time.Now()
		pt.mu.Unlock()
	}
	n.log.Debug("node: fetch paused", "topic", tp.Topic, "partition", tp.Partition, "err", err)
}
