package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/internal/acl"
)

// DescribeProducers, v0 (KIP-664): the active producers of each partition
// named, as its log's producer state holds them (producer id and epoch,
// last sequence and timestamp, the epoch of the coordinator that wrote the
// producer's last marker, and the first offset of its open transaction or
// -1); the admin tools use it to find a hanging transaction.
//
// Kafka answers from any replica that hosts the partition's log, leader or
// follower (Partition.activeProducerState; the admin client asks the
// leader unless told a broker): a known partition hosted elsewhere is
// NOT_LEADER_OR_FOLLOWER, an unknown topic or partition
// UNKNOWN_TOPIC_OR_PARTITION, an invalid topic name
// INVALID_TOPIC_EXCEPTION with a message, an offline log
// KAFKA_STORAGE_ERROR. ringlog answers the same. The state is copied on
// the partition's shard (engine.ActiveProducers), so the handler blocks.
// With an authorizer, a topic the principal may not READ is
// TOPIC_AUTHORIZATION_FAILED (with Kafka's message).
func init() {
	register(api{key: kmsg.DescribeProducers, min: 0, max: 0, sync: handleDescribeProducers})
}

func handleDescribeProducers(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	resp.Topics = make([]kmsg.DescribeProducersResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		t := &resp.Topics[i]
		t.Default()
		t.Topic = rt.Topic
		t.Partitions = make([]kmsg.DescribeProducersResponseTopicPartition, len(rt.Partitions))
		// READ on the topic, checked after its name, as Kafka does.
		refused := engine.ValidateTopicName(rt.Topic) == nil && !s.authorize(cx, acl.OpRead, acl.ResourceTopic, rt.Topic)
		for j, part := range rt.Partitions {
			out := &t.Partitions[j]
			out.Default()
			out.Partition = part
			if refused {
				out.ErrorCode, out.ErrorMessage = kerr.TopicAuthorizationFailed.Code, kmsg.StringPtr(kerr.TopicAuthorizationFailed.Message)
				continue
			}
			s.describeProducers(engine.TP{Topic: rt.Topic, Partition: part}, out)
		}
	}
	return resp
}

// describeProducers answers one partition.
func (s *Server) describeProducers(tp engine.TP, out *kmsg.DescribeProducersResponseTopicPartition) {
	if err := engine.ValidateTopicName(tp.Topic); err != nil {
		out.ErrorCode, out.ErrorMessage = kerr.InvalidTopicException.Code, errorMessage(err)
		return
	}
	out.ErrorCode = s.leaderCode(tp)
	if out.ErrorCode == kerr.NotLeaderForPartition.Code {
		// A follower holds the state too, from the batches it copies.
		if st, err := s.eng.State(tp); err == nil && st.Role == engine.RoleFollower {
			out.ErrorCode = 0
		}
	}
	if out.ErrorCode != 0 {
		return
	}
	producers, err := s.eng.ActiveProducers(tp)
	if errors.Is(err, engine.ErrUnknownTopicOrPartition) {
		// In the metadata but not (or no longer) on this broker.
		out.ErrorCode = kerr.NotLeaderForPartition.Code
		return
	}
	if err != nil {
		out.ErrorCode = errorCode(err)
		return
	}
	out.ActiveProducers = make([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, len(producers))
	for i, p := range producers {
		ap := &out.ActiveProducers[i]
		ap.Default()
		ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = p.ProducerID, int32(p.ProducerEpoch), p.LastSequence
		ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = p.LastTimestamp, p.CoordinatorEpoch, p.TxnStartOffset
	}
}
