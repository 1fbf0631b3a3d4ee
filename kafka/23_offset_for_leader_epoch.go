package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/internal/acl"
)

// OffsetForLeaderEpoch, v0 to v4 (KIP-101, KIP-279): where a leader epoch
// ends in this broker's log. Consumers call it after a leader change to
// detect a truncated log (KIP-320); followers, to truncate before fetching.
// With an authorizer, a principal without CLUSTER_ACTION gets
// TOPIC_AUTHORIZATION_FAILED for a topic it may not DESCRIBE.
func init() {
	register(api{key: kmsg.OffsetForLeaderEpoch, min: 0, max: 4, sync: handleOffsetForLeaderEpoch})
}

func handleOffsetForLeaderEpoch(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, len(req.Topics))
	// A replica (CLUSTER_ACTION) may ask about every topic, a consumer
	// (KIP-320) about those it may DESCRIBE.
	replica := s.cfg.Authorizer == nil || s.clusterAction(cx) || s.authorizeCluster(cx, acl.OpClusterAction)
	for i := range req.Topics {
		rt := &req.Topics[i]
		t := &resp.Topics[i]
		t.Default()
		t.Topic = rt.Topic
		t.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, len(rt.Partitions))
		refused := !replica && !s.authorize(cx, acl.OpDescribe, acl.ResourceTopic, rt.Topic)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			out := &t.Partitions[j]
			out.Default()
			out.Partition = rp.Partition
			if refused {
				out.ErrorCode, out.LeaderEpoch, out.EndOffset = kerr.TopicAuthorizationFailed.Code, -1, -1
				continue
			}
			s.endOffsetForEpoch(engine.TP{Topic: rt.Topic, Partition: rp.Partition}, rp, out)
		}
	}
	return resp
}

func (s *Server) endOffsetForEpoch(tp engine.TP, rp *kmsg.OffsetForLeaderEpochRequestTopicPartition, out *kmsg.OffsetForLeaderEpochResponseTopicPartition) {
	if out.ErrorCode = s.leaderCode(tp); out.ErrorCode != 0 {
		return
	}
	st, err := s.eng.State(tp)
	if err != nil {
		out.ErrorCode = errorCode(err)
		return
	}
	if code := checkLeaderEpoch(rp.CurrentLeaderEpoch, st.LeaderEpoch); code != 0 {
		out.ErrorCode = code
		return
	}
	epoch, end, err := s.eng.EndOffsetForEpoch(tp, rp.LeaderEpoch)
	if err != nil {
		out.ErrorCode = errorCode(err)
		return
	}
	if epoch < 0 && rp.LeaderEpoch == st.LeaderEpoch && rp.LeaderEpoch >= 0 {
		// The log's epoch cache learns an epoch with the first batch written
		// in it, while Kafka's leader records its epoch when it becomes
		// leader. Asked for the current epoch before any write in it (an
		// empty partition, typically), Kafka answers the current epoch
		// ending at the log end offset, and so does this broker.
		epoch, end = st.LeaderEpoch, st.LEO
	}
	out.LeaderEpoch, out.EndOffset = epoch, end
}
