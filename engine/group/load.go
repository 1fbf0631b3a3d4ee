package group

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// beforeInstall, when set (by tests), runs before each partition's groups
// are installed: it holds a partition in COORDINATOR_LOAD_IN_PROGRESS.
var beforeInstall func(partition int32)

// load replays every partition of __consumer_offsets, one after the other
// on a goroutine of its own (ReadAll works on the log's published views,
// not on the shard), and installs each partition's groups on its shard.
// Nothing writes to a partition before it is installed: its groups answer
// COORDINATOR_LOAD_IN_PROGRESS and expiry skips it.
func (c *Coordinator) load() {
	var left atomic.Int32
	left.Store(int32(len(c.parts)))
	finished := func(err error) {
		if err != nil {
			c.loadErr.CompareAndSwap(nil, &err)
		}
		if left.Add(-1) == 0 {
			close(c.loaded)
		}
	}
	start := time.Now()
	for _, p := range c.parts {
		st := newLoadState()
		err := c.eng.ReadAll(p.tp, func(b []byte) error { return replayBatch(b, st) })
		if err != nil {
			err = fmt.Errorf("group: replay %s-%d: %w", p.tp.Topic, p.tp.Partition, err)
			c.log.Error("group coordinator: partition unavailable", "err", err)
		}
		if st.bad > 0 {
			c.log.Warn("group coordinator: skipped undecodable records", "partition", p.tp.Partition, "records", st.bad, "last_err", st.lastErr)
		}
		if beforeInstall != nil {
			beforeInstall(p.tp.Partition)
		}
		callErr := c.eng.OnShard(p.tp, func() {
			switch {
			case p.state != partLoading:
			case err != nil:
				p.state = partFailed
			default:
				p.install(st)
				p.state = partLoaded
			}
			finished(err)
		})
		if callErr != nil {
			finished(errors.Join(err, callErr))
		}
	}
	c.log.Debug("group coordinator: replay queued", "partitions", len(c.parts), "took", time.Since(start))
}

// install builds the partition's groups from what replay found (Kafka's
// loadGroupsAndOffsets). A group with members comes back Stable with the
// generation, leader and assignments it had: its members keep consuming
// without a rebalance if they heartbeat within their session timeout,
// which starts now. Offsets without group metadata are a simple group's.
func (p *partition) install(st *loadState) {
	for id, v := range st.groups {
		g := p.newGroup(id)
		g.protocolType, g.generation, g.stateMs = v.ProtocolType, v.Generation, v.CurrentStateTimestamp
		g.state = stateEmpty
		if v.Protocol != nil && len(v.Members) > 0 {
			name := *v.Protocol
			g.protocol = &name
			g.state = stateStable
			for _, vm := range v.Members {
				if g.byID[vm.MemberID] != nil {
					continue
				}
				m := &member{id: vm.MemberID, instanceID: vm.InstanceID, clientID: vm.ClientID, clientHost: vm.ClientHost,
					protocolType: v.ProtocolType, protocols: []protocol{{name: name, metadata: vm.Subscription}},
					sessionTimeout: time.Duration(vm.SessionTimeoutMillis) * time.Millisecond, assignment: vm.Assignment}
				m.rebalanceTimeout = time.Duration(vm.RebalanceTimeoutMillis) * time.Millisecond
				if vm.RebalanceTimeoutMillis < 0 {
					m.rebalanceTimeout = m.sessionTimeout // a v0 record
				}
				g.add(m)
			}
			if v.Leader != nil && g.byID[*v.Leader] != nil {
				g.leader = *v.Leader
			}
			g.computeSubscribed()
			for _, m := range g.members {
				g.touch(m, m.sessionTimeout)
			}
			if len(g.members) > p.c.cfg.MaxSize {
				// group.max.size was lowered: rebalance, and the members
				// that rejoin last are left out.
				g.prepareRebalance()
			}
		}
	}
	p.installConsumers(st)
	for id, offs := range st.offsets {
		g := p.groups[id]
		if g == nil {
			g = p.newGroup(id)
		}
		g.offsets = offs
	}
}
