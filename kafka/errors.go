package kafka

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringlog/engine"
	"ringlog/replication"
	"ringlog/replication/controller"
	"ringlog/replication/node"
	"ringlog/segment"
	"ringlog/segment/batch"
)

// errorCode maps an engine or log error to the Kafka error code clients
// know how to handle (retry, refresh metadata, fail the record).
func errorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, engine.ErrUnknownTopicOrPartition):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, segment.ErrOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, segment.ErrBatchTooBig):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, batch.ErrCRC), errors.Is(err, batch.ErrLength), errors.Is(err, batch.ErrShort), errors.Is(err, batch.ErrMagic):
		// The bytes were damaged on the way: CORRUPT_MESSAGE, retriable.
		return kerr.CorruptMessage.Code
	case errors.Is(err, segment.ErrInvalidBatch):
		// Well framed but wrong content: INVALID_RECORD, not retriable.
		return kerr.InvalidRecord.Code
	case errors.Is(err, engine.ErrTopicExists):
		return kerr.TopicAlreadyExists.Code
	case errors.Is(err, engine.ErrInvalidTopic):
		return kerr.InvalidTopicException.Code
	case errors.Is(err, engine.ErrTooManyPartitions):
		return kerr.PolicyViolation.Code
	case errors.Is(err, engine.ErrInvalidPartitions):
		return kerr.InvalidPartitions.Code
	case errors.Is(err, engine.ErrInvalidReplication):
		return kerr.InvalidReplicationFactor.Code
	case errors.Is(err, engine.ErrInvalidConfig):
		return kerr.InvalidConfig.Code
	case errors.Is(err, engine.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, engine.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, engine.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, engine.ErrTransactionCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	case errors.Is(err, engine.ErrInvalidTimestamp):
		return kerr.InvalidTimestamp.Code
	case errors.Is(err, engine.ErrNotEnoughReplicas):
		return kerr.NotEnoughReplicas.Code
	case errors.Is(err, engine.ErrStorage):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, engine.ErrClosed):
		// Shutting down: clients refresh metadata and retry elsewhere.
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, engine.ErrInvalidRequest):
		return kerr.InvalidRequest.Code
	case errors.Is(err, engine.ErrNotLeader), errors.Is(err, engine.ErrNotFollower), errors.Is(err, node.ErrNotLeader):
		// Clients refresh their metadata and find the new leader.
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, engine.ErrStaleEpoch), errors.Is(err, node.ErrFencedLeaderEpoch):
		return kerr.FencedLeaderEpoch.Code
	case errors.Is(err, replication.ErrStaleBrokerEpoch):
		return kerr.StaleBrokerEpoch.Code
	case errors.Is(err, node.ErrUnknownLeaderEpoch):
		return kerr.UnknownLeaderEpoch.Code
	case errors.Is(err, replication.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	}
	if code := controller.ErrorCode(err); code != kerr.UnknownServerError.Code {
		// The controller's errors are Kafka's codes already.
		return code
	}
	return kerr.UnknownServerError.Code
}

// leaderCode is the answer to a consumer's request for tp: 0 when this
// broker leads tp; KAFKA_STORAGE_ERROR when its replica here is offline
// (Kafka's ReplicaManager answers an offline partition so before it looks
// at leadership); UNKNOWN_TOPIC_OR_PARTITION when the cluster has no such
// partition; NOT_LEADER_OR_FOLLOWER when another broker leads it (Kafka's
// codes: each makes a client refresh its metadata, but only the last two
// say whether the partition exists).
func (s *Server) leaderCode(tp engine.TP) int16 { return leaderCode(s.eng, s.cfg.Node, tp) }

func leaderCode(eng *engine.Core, n *node.Node, tp engine.TP) int16 {
	if errors.Is(eng.Offline(tp), engine.ErrStorage) {
		return kerr.KafkaStorageError.Code
	}
	if _, ok := n.Leads(tp); ok {
		return 0
	}
	if t := n.Image().Topic(tp.Topic); t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
		return kerr.UnknownTopicOrPartition.Code
	}
	return kerr.NotLeaderForPartition.Code
}

// errorMessage is the text some responses carry beside the code.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}
