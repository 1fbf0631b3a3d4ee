package kafka

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"

	"ringlog/replication/controller"
)

// DescribeQuorum v0-v2 (KIP-595, KIP-836, KIP-853): the metadata quorum as
// its leader sees it, forwarded to the leader as Kafka's brokers forward
// it to the active controller. The one partition is __cluster_metadata-0;
// a request naming anything else is answered UNKNOWN_TOPIC_OR_PARTITION on
// each partition it names, as KafkaRaftClient answers it.
//
// ringlog's quorum is hashicorp/raft, so the figures are raft's: the
// leader epoch is the raft term, the high watermark the commit index,
// and a replica's log end offset its last log index as it last reported
// it in its heartbeat (controller.QuorumReplica: hashicorp/raft keeps the
// followers' match indexes to itself). Observers are the broker-only
// nodes (raft non-voters) and controllers not added as voters yet.
func init() {
	register(api{key: kmsg.DescribeQuorum, min: 0, max: 2, sync: handleDescribeQuorum})
}

// metadataTopic is the name Kafka gives the metadata quorum's log.
const metadataTopic = "__cluster_metadata"

func handleDescribeQuorum(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeQuorumRequest)
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	if !s.authorizeCluster(cx, acl.OpDescribe) {
		// Kafka's KafkaApis checks DESCRIBE on the cluster first.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	if len(req.Topics) != 1 || req.Topics[0].Topic != metadataTopic ||
		len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].Partition != 0 {
		for _, t := range req.Topics {
			rt := kmsg.NewDescribeQuorumResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeQuorumResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	info, err := s.cfg.Node.Controller().DescribeQuorum(ctx)
	if err != nil {
		resp.ErrorCode = adminCode(err)
		if req.Version >= 2 {
			resp.ErrorMessage = errorMessage(err)
		}
		return resp
	}
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = metadataTopic
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = info.LeaderID, int32(info.Epoch), info.HighWatermark
	rp.CurrentVoters = quorumReplicas(info.Voters)
	rp.Observers = quorumReplicas(info.Observers)
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	if req.Version >= 2 {
		// The voters' endpoints (KIP-853): their controller ports.
		for _, v := range info.Voters {
			host, portStr, err := net.SplitHostPort(v.Addr)
			port, perr := strconv.ParseUint(portStr, 10, 16)
			if err != nil || perr != nil {
				continue
			}
			n := kmsg.NewDescribeQuorumResponseNode()
			n.NodeID = v.ID
			l := kmsg.NewDescribeQuorumResponseNodeListener()
			l.Name, l.Host, l.Port = "CONTROLLER", host, uint16(port)
			n.Listeners = append(n.Listeners, l)
			resp.Nodes = append(resp.Nodes, n)
		}
	}
	return resp
}

func quorumReplicas(rs []controller.QuorumReplica) []kmsg.DescribeQuorumResponseTopicPartitionReplicaState {
	out := []kmsg.DescribeQuorumResponseTopicPartitionReplicaState{}
	for _, r := range rs {
		st := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		st.ReplicaID, st.LogEndOffset = r.ID, r.LogEndOffset
		st.LastFetchTimestamp, st.LastCaughtUpTimestamp = millisOrNone(r.LastFetch), millisOrNone(r.LastCaughtUp)
		out = append(out, st)
	}
	return out
}

// millisOrNone is t in Unix milliseconds, -1 for the zero time (Kafka's
// "unknown").
func millisOrNone(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}
