package controller

import "errors"

// AlterOutcome is what a partition leader may conclude from an error of
// AlterPartition about the ISR change it proposed.
type AlterOutcome int

const (
	// AlterRefused: the quorum applied nothing, and refused the change at
	// the very partition epoch it was based on, so the leader's committed
	// ISR is the quorum's. The leader drops the change
	// (replication.Leader.ISRRejected).
	AlterRefused AlterOutcome = iota
	// AlterSuperseded: the partition moved on (FENCED_LEADER_EPOCH,
	// INVALID_UPDATE_VERSION, or the leader's incarnation is gone), maybe
	// by this very change: a forward whose reply was lost is sent again
	// by submit and finds the epoch it bumped. The change stays pending,
	// and the HW keeps waiting for its members, until the metadata brings
	// the quorum's state (replication.Leader.UpdateISR).
	AlterSuperseded
	// AlterUnknown: no answer (a timeout, no controller, a closed node):
	// the change may or may not be in the log. It stays pending and is
	// sent again, as Kafka's AlterPartitionManager retries.
	AlterUnknown
)

// AlterPartitionOutcome classifies err, an error of AlterPartition.
// Dropping a change whose outcome is not known is what must not happen:
// an expansion the quorum applied but the leader dropped leaves in the
// ISR a follower the leader's HW no longer waits for, and the quorum may
// elect it without records the leader acknowledged (found by the
// controller simulation; TestLostAlterPartitionAnswerKeepsExpansionPending).
func AlterPartitionOutcome(err error) AlterOutcome {
	switch {
	case errors.Is(err, ErrIneligibleReplica), errors.Is(err, ErrInvalidRequest):
		// Both are checked after the leader and partition epochs matched
		// (statemachine_topics.go's alterPartition), or before anything
		// was proposed (a command too large).
		return AlterRefused
	case errors.Is(err, ErrFencedLeaderEpoch), errors.Is(err, ErrInvalidUpdateVersion), errors.Is(err, ErrStaleBrokerEpoch),
		errors.Is(err, ErrBrokerIDNotRegistered), errors.Is(err, ErrUnknownTopicOrPartition):
		return AlterSuperseded
	}
	return AlterUnknown
}
