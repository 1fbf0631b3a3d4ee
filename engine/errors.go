package engine

import (
	"errors"
	"fmt"

	"ringlog/segment"
)

// Errors the engine returns; the protocol layer maps each to its error code.
// Errors from the log (segment.ErrOutOfRange, segment.ErrInvalidBatch,
// segment.ErrBatchTooBig, ...) are wrapped, not replaced: errors.Is works
// on both.
var (
	ErrUnknownTopicOrPartition = errors.New("engine: unknown topic or partition")
	ErrTopicExists             = errors.New("engine: topic already exists")
	ErrInvalidTopic            = errors.New("engine: invalid topic name")
	ErrInvalidPartitions       = errors.New("engine: invalid number of partitions")
	ErrInvalidReplication      = errors.New("engine: invalid replication factor")
	ErrOutOfOrderSequence      = errors.New("engine: out of order sequence number")
	ErrInvalidProducerEpoch    = errors.New("engine: producer epoch is older than the current one")
	// ErrInvalidTxnState: a batch outside a transaction from a producer
	// whose transaction on the partition is open, or an unverified
	// transactional batch whose transaction is not (AppendOptions.
	// OngoingTxn) (Kafka's INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("engine: producer has a transaction open on the partition")
	// ErrTransactionCoordinatorFenced: a marker from a transaction
	// coordinator epoch older than the partition's last marker of the
	// producer (Kafka's TRANSACTION_COORDINATOR_FENCED).
	ErrTransactionCoordinatorFenced = errors.New("engine: transaction coordinator epoch is older than the current one")
	ErrInvalidTimestamp             = errors.New("engine: timestamp out of the accepted range")
	ErrStorage                      = errors.New("engine: storage error")
	ErrClosed                       = errors.New("engine: closed")
	ErrInvalidRequest               = errors.New("engine: invalid request")
	// ErrTooManyPartitions: the broker would hold more partitions than
	// Config.MaxPartitions (ringlog.max.partitions).
	ErrTooManyPartitions = errors.New("engine: too many partitions")

	// Replication (replication.go, replica.go).
	ErrNotLeader        = errors.New("engine: not the leader of the partition")
	ErrNotFollower      = errors.New("engine: not a follower of the partition")
	ErrStaleEpoch       = errors.New("engine: leader epoch older than the partition's")
	ErrUnexpectedOffset = errors.New("engine: replica batches do not start at the log end offset")
	ErrTopicIDMismatch  = errors.New("engine: topic exists with another topic id")
)

// unknownPartition is ErrUnknownTopicOrPartition naming tp.
func unknownPartition(tp TP) error {
	return fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, tp.Topic, tp.Partition)
}

// storageError marks an error of the disk under a log (a failed write or
// sync, a failed log), which Kafka reports as KAFKA_STORAGE_ERROR.
func storageError(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, segment.ErrInvalidBatch), errors.Is(err, segment.ErrBatchTooBig),
		errors.Is(err, segment.ErrOutOfRange), errors.Is(err, segment.ErrEmpty):
		return err
	}
	return fmt.Errorf("%w: %w", ErrStorage, err)
}
