package node

import "ringlog/engine"

// Follows reports whether this broker is a follower of tp with a live
// leader: it may serve consumers below its high watermark (KIP-392).
func (n *Node) Follows(tp engine.TP) bool {
	pt := n.part(tp)
	if pt == nil {
		return false
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.role == engine.RoleFollower && pt.leaderID >= 0
}
