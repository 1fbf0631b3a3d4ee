package kafka

import (
	"net"

	"ringlog/engine/group"
)

// The group APIs (FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
// DeleteGroups, OffsetDelete, and KIP-848's ConsumerGroupHeartbeat and
// ConsumerGroupDescribe) are thin: each hands its decoded request to
// the group coordinator (engine/group), which keeps a group's state on the
// shard that owns the group's partition of __consumer_offsets and answers
// through the reply function, from that shard or at once. They are async
// handlers: nothing they do blocks, and a JoinGroup may stay parked for a
// whole rebalance without holding a goroutine.

// groupClient is who sent the request, as DescribeGroups shows members:
// the client id and "/" followed by the IP address (Java's
// InetAddress.toString, which Kafka prints).
func groupClient(cx *reqCtx) group.Client {
	host := ""
	if a := cx.c.RemoteAddr(); a != nil {
		host = a.String()
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
	}
	return group.Client{ID: cx.clientID, Host: "/" + host}
}
