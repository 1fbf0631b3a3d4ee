package replication

import "errors"

// The errors of the leader's and the follower's decisions.
var (
	// ErrNotReplica means a fetch came from a broker outside the
	// partition's assignment (Kafka answers NOT_LEADER_OR_FOLLOWER).
	ErrNotReplica = errors.New("replication: not a replica of the partition")
	// ErrOffsetOutOfRange means a follower fetched beyond the leader's LEO
	// or below zero (OFFSET_OUT_OF_RANGE); its state is not updated.
	ErrOffsetOutOfRange = errors.New("replication: fetch offset out of range")
	// ErrInvalidAssignment means replicas or an ISR that cannot be: an
	// empty or oversized list, duplicates, negative ids, an ISR member
	// outside the replicas, or an ISR without the leader.
	ErrInvalidAssignment = errors.New("replication: invalid replicas or ISR")
	// ErrInvalidOffsets means a LEO or HW that contradicts the leader's
	// state (a LEO going backwards, an HW above the LEO).
	ErrInvalidOffsets = errors.New("replication: invalid offsets")
	// ErrProposalInFlight means an ISR change was about to be sent while
	// another is pending; Kafka allows one AlterPartition at a time.
	ErrProposalInFlight = errors.New("replication: an ISR change is already in flight")
	// ErrStale means an answer or update that no longer applies (for an
	// ISR change that is not the pending one, or an older partition
	// epoch). It was ignored and the state is unchanged.
	ErrStale = errors.New("replication: stale update ignored")
	// ErrLeaderEpoch means an update for another leader epoch: this leader
	// is deposed (or not yet installed) and the caller must rebuild it.
	ErrLeaderEpoch = errors.New("replication: leader epoch mismatch")
	// ErrStaleBrokerEpoch means a fetch from an earlier incarnation of a
	// follower (its broker epoch is older than one already seen): the
	// process that sent it is gone, and what it fetched says nothing about
	// the log of the one that replaced it (KIP-903).
	ErrStaleBrokerEpoch = errors.New("replication: fetch from a previous incarnation of the follower")
	// ErrInvalidAnswer means an OffsetForLeaderEpoch answer that breaks
	// the protocol (an epoch above the one asked), which could otherwise
	// make the follower ask forever.
	ErrInvalidAnswer = errors.New("replication: invalid OffsetForLeaderEpoch answer")
)
