package node

import (
	"context"
	"slices"
	"time"

	"ringlog/engine"
	"ringlog/replication/controller"
)

// Offline partitions (engine/offline.go): the engine keeps a partition
// whose log did not open, or whose disk failed under it, offline. The
// node gives it no role, and reports the set to the controller, which
// takes the replica out of its ISR and moves its leadership (KIP-858's
// offline log directories, per partition): each registration carries the
// set, and a reporter goroutine sends it again whenever the engine's set
// and the controller's image differ (a partition went offline at run
// time; a report lost with a controller failover).

// OnOffline is the engine's hook (engine.Config.OnOffline) for a
// partition that went offline at run time. It runs on a shard goroutine:
// it only wakes the reporter.
func (n *Node) OnOffline(tp engine.TP, err error) {
	n.log.Warn("node: partition offline, reporting it to the controller", "topic", tp.Topic, "partition", tp.Partition, "err", err)
	n.kickOffline()
}

func (n *Node) kickOffline() {
	select {
	case n.offlineKick <- struct{}{}:
	default:
	}
}

// offlineSet is the engine's offline partitions by topic id, sorted
// (BrokerInfo.Offline, and what the reporter sends).
func (n *Node) offlineSet() []controller.TopicIDPartition {
	var out []controller.TopicIDPartition
	for _, op := range n.eng.OfflinePartitions() {
		t, ok := n.eng.Topic(op.TP.Topic)
		if !ok {
			continue
		}
		out = append(out, controller.TopicIDPartition{ID: controller.TopicID(t.ID), Partition: op.TP.Partition})
	}
	slices.SortFunc(out, func(a, b controller.TopicIDPartition) int {
		if c := slices.Compare(a.ID[:], b.ID[:]); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

// reportOffline runs until Close: woken by the engine's hook or by a new
// image, it compares the engine's offline partitions with those the
// image holds for this broker, and reports the engine's set when they
// differ, retrying every second until the image agrees.
func (n *Node) reportOffline() {
	defer n.wg.Done()
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	me := n.cfg.NodeID
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.offlineKick:
		case <-retry.C:
		}
		img := n.ctl.Image()
		b, ok := img.Broker(me)
		if !ok {
			continue // the registration carries the set
		}
		want := n.offlineSet()
		if slices.Equal(want, img.OfflineReplicas(me)) {
			continue
		}
		ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
		err := n.ctl.ReportOfflineReplicas(ctx, me, b.Epoch, want)
		cancel()
		if err != nil && n.ctx.Err() == nil {
			n.log.Warn("node: offline replicas not reported yet", "count", len(want), "err", err)
		}
	}
}

// applyOffline leaves an offline partition without a role: no fetching,
// no leader state, services told it is not led here. It reports false when
// tp serves (apply goroutine only).
func (n *Node) applyOffline(pt *part, p controller.Partition) bool {
	if n.eng.Offline(pt.tp) == nil {
		return false
	}
	n.stopFollowing(pt)
	n.dropLeader(pt)
	n.resigned(pt, p.LeaderEpoch)
	pt.mu.Lock()
	pt.role, pt.leaderID, pt.leaderEpoch = engine.RoleNone, p.Leader, p.LeaderEpoch
	pt.mu.Unlock()
	return true
}

// recoveredLogEnds is what the engine's start recovered from an unclean
// shutdown, by topic id, for the registration (controller.BrokerInfo).
func (n *Node) recoveredLogEnds() []controller.ReplicaLogEnd {
	var out []controller.ReplicaLogEnd
	for _, r := range n.eng.RecoveredLogs() {
		t, ok := n.eng.Topic(r.TP.Topic)
		if !ok {
			continue
		}
		out = append(out, controller.ReplicaLogEnd{TopicIDPartition: controller.TopicIDPartition{ID: controller.TopicID(t.ID), Partition: r.TP.Partition},
			LastEpoch: r.LastEpoch, LEO: r.LEO})
	}
	return out
}
