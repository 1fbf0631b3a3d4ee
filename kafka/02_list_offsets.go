package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/internal/acl"
)

// ListOffsets, v1 to v11. v0 (a list of offsets per partition, for
// message sets) is not served: every client that writes RecordBatch v2
// speaks v1 or newer.
//
// The special timestamps are the engine's: -1 latest (the high watermark
// for isolation_level 0, the last stable offset for 1, read_committed), -2
// earliest (the log start offset), -3 the first record with the largest
// timestamp (KIP-734), -4 earliest local (KIP-405; nothing is tiered, so
// the log start offset), -5 latest tiered (KIP-1005: none, so -1).
func init() {
	register(api{key: kmsg.ListOffsets, min: 1, max: 11, sync: handleListOffsets})
}

func handleListOffsets(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)

	// Kafka refuses a partition that appears twice in one request, both
	// times (INVALID_REQUEST): which answer would be the right one?
	count := make(map[engine.TP]int)
	for i := range req.Topics {
		for _, p := range req.Topics[i].Partitions {
			count[engine.TP{Topic: req.Topics[i].Topic, Partition: p.Partition}]++
		}
	}

	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		t := &resp.Topics[i]
		t.Default()
		t.Topic = rt.Topic
		t.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(rt.Partitions))
		refused := !s.authorize(cx, acl.OpDescribe, acl.ResourceTopic, rt.Topic)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			out := &t.Partitions[j]
			out.Default()
			out.Partition = rp.Partition
			tp := engine.TP{Topic: rt.Topic, Partition: rp.Partition}
			switch {
			case refused:
				// With an authorizer, DESCRIBE on the topic.
				out.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case count[tp] > 1:
				out.ErrorCode = kerr.InvalidRequest.Code
			case req.IsolationLevel != 0 && req.IsolationLevel != 1:
				out.ErrorCode = kerr.InvalidRequest.Code
			default:
				s.listOffset(tp, rp, engine.Isolation(req.IsolationLevel), out)
			}
		}
	}
	return resp
}

// listOffset answers one partition.
func (s *Server) listOffset(tp engine.TP, rp *kmsg.ListOffsetsRequestTopicPartition, iso engine.Isolation, out *kmsg.ListOffsetsResponseTopicPartition) {
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
	offset, ts, epoch, err := s.eng.ListOffset(tp, rp.Timestamp, iso)
	if err != nil {
		out.ErrorCode = errorCode(err)
		return
	}
	// Not found (no record at or after the timestamp) is offset -1 and
	// timestamp -1 with no error, as Kafka answers it.
	out.Offset, out.Timestamp, out.LeaderEpoch = offset, ts, epoch
}

// checkLeaderEpoch applies KIP-320's fencing of a request that names the
// leader epoch the client believes current (-1: no check). A client ahead
// of this broker has metadata this broker has not caught up with
// (UNKNOWN_LEADER_EPOCH, retriable); a client behind has stale metadata
// (FENCED_LEADER_EPOCH: refresh it, then retry).
func checkLeaderEpoch(client, ours int32) int16 {
	switch {
	case client < 0 || client == ours:
		return 0
	case client > ours:
		return kerr.UnknownLeaderEpoch.Code
	}
	return kerr.FencedLeaderEpoch.Code
}
