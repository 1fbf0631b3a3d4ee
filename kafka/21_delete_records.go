package kafka

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/internal/acl"
)

// DeleteRecords v0-v2 (KIP-107): move a partition's log start offset
// forward. Offset -1 means the high watermark; an offset beyond it is
// OFFSET_OUT_OF_RANGE; one below the current log start changes nothing.
// The answer carries the new low watermark (the log start offset). v2 is
// flexible. On a single node there is no follower to wait for, so
// timeout_ms is not needed. Internal topics (__consumer_offsets,
// __transaction_state) are refused with INVALID_TOPIC_EXCEPTION, as Kafka
// refuses them.
func init() {
	register(api{key: kmsg.DeleteRecords, min: 0, max: 2, sync: handleDeleteRecords})
}

func handleDeleteRecords(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		info, exists := s.eng.Topic(t.Topic)
		refused := !s.authorize(cx, acl.OpDelete, acl.ResourceTopic, t.Topic)
		for _, p := range t.Partitions {
			tp := engine.TP{Topic: t.Topic, Partition: p.Partition}
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition = p.Partition
			// -1 is Kafka's "no low watermark" in an error answer.
			rp.LowWatermark = -1
			switch {
			case refused:
				// With an authorizer, DELETE on the topic, checked first.
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case isInternalTopic(t.Topic):
				// Kafka's answer, whatever the partition's state: the
				// coordinator's records are not a client's to delete.
				rp.ErrorCode = kerr.InvalidTopicException.Code
			case exists && !strings.Contains(info.Config.CleanupPolicy, "delete"):
				// A compacted topic keeps the latest value of every
				// key; Kafka refuses to cut its head.
				rp.ErrorCode = kerr.PolicyViolation.Code
			case s.leaderCode(tp) != 0:
				rp.ErrorCode = s.leaderCode(tp)
			default:
				low, err := s.eng.DeleteRecords(tp, p.Offset)
				if err != nil {
					rp.ErrorCode = errorCode(err)
				} else {
					rp.LowWatermark = low
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
