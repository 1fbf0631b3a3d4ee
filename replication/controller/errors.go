package controller

import (
	"context"
	"errors"
	"fmt"
)

// Error is a controller error that stands for exactly one Kafka error code.
// The exported sentinels below are the only values; errors returned by the
// package wrap one of them with context (errors.Is works), and an error that
// came back from another node over the forwarding RPC wraps the same
// sentinel as it did on that node.
type Error struct {
	// Code is the Kafka protocol error code (kerr's numbering).
	Code int16
	// Name is Kafka's name for the code, for logs.
	Name string
	msg  string
}

func (e *Error) Error() string { return e.msg }

// The codes are Kafka's (see org.apache.kafka.common.protocol.Errors); the
// kafka layer translates them with ErrorCode. errors_test.go checks them
// against franz-go's kerr table.
var (
	ErrUnknown                  = &Error{-1, "UNKNOWN_SERVER_ERROR", "controller: unexpected error"}
	ErrUnknownTopicOrPartition  = &Error{3, "UNKNOWN_TOPIC_OR_PARTITION", "controller: unknown topic or partition"}
	ErrRequestTimedOut          = &Error{7, "REQUEST_TIMED_OUT", "controller: request timed out"}
	ErrInvalidTopic             = &Error{17, "INVALID_TOPIC_EXCEPTION", "controller: invalid topic name"}
	ErrClusterAuthorization     = &Error{31, "CLUSTER_AUTHORIZATION_FAILED", "controller: not authorized for the cluster action"}
	ErrTopicExists              = &Error{36, "TOPIC_ALREADY_EXISTS", "controller: topic already exists"}
	ErrInvalidPartitions        = &Error{37, "INVALID_PARTITIONS", "controller: invalid number of partitions"}
	ErrInvalidReplicationFactor = &Error{38, "INVALID_REPLICATION_FACTOR", "controller: invalid replication factor"}
	ErrInvalidReplicaAssignment = &Error{39, "INVALID_REPLICA_ASSIGNMENT", "controller: invalid replica assignment"}
	ErrInvalidConfig            = &Error{40, "INVALID_CONFIG", "controller: invalid config"}
	ErrNotController            = &Error{41, "NOT_CONTROLLER", "controller: no raft leader reachable"}
	ErrInvalidRequest           = &Error{42, "INVALID_REQUEST", "controller: invalid request"}
	ErrPolicyViolation          = &Error{44, "POLICY_VIOLATION", "controller: the request breaks a broker policy"}
	ErrFencedLeaderEpoch        = &Error{74, "FENCED_LEADER_EPOCH", "controller: leader epoch does not match the current one"}
	ErrStaleBrokerEpoch         = &Error{77, "STALE_BROKER_EPOCH", "controller: broker epoch has changed"}
	ErrPreferredLeaderNotAvail  = &Error{80, "PREFERRED_LEADER_NOT_AVAILABLE", "controller: preferred leader is not in the ISR or not live"}
	ErrElectionNotNeeded        = &Error{84, "ELECTION_NOT_NEEDED", "controller: the preferred replica already leads"}
	ErrNoReassignmentInProgress = &Error{85, "NO_REASSIGNMENT_IN_PROGRESS", "controller: no partition reassignment is in progress"}
	ErrEligibleLeadersNotAvail  = &Error{83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", "controller: no live replica can lead"}
	ErrInvalidUpdateVersion     = &Error{95, "INVALID_UPDATE_VERSION", "controller: partition epoch does not match the current one"}
	ErrBrokerIDNotRegistered    = &Error{102, "BROKER_ID_NOT_REGISTERED", "controller: broker id not registered"}
	ErrIneligibleReplica        = &Error{107, "INELIGIBLE_REPLICA", "controller: new ISR has a replica that is not eligible"}
	ErrInconsistentClusterID    = &Error{104, "INCONSISTENT_CLUSTER_ID", "controller: the cluster id does not match the quorum's"}
	ErrDuplicateVoter           = &Error{126, "DUPLICATE_VOTER", "controller: the node is a voter already"}
	ErrVoterNotFound            = &Error{127, "VOTER_NOT_FOUND", "controller: the node is not a voter"}
)

// ErrClosed is returned after Close. It has no Kafka code of its own: the
// kafka layer answers it as NOT_CONTROLLER (the client retries elsewhere).
var ErrClosed = errors.New("controller: closed")

// ErrCorrupt marks bytes that do not decode: a command, a snapshot or an
// RPC frame. It stands for INVALID_REQUEST when it reaches a client.
var ErrCorrupt = errors.New("controller: corrupt encoding")

var errorsByCode = func() map[int16]*Error {
	m := map[int16]*Error{}
	for _, e := range []*Error{ErrUnknown, ErrUnknownTopicOrPartition, ErrClusterAuthorization,
		ErrRequestTimedOut, ErrInvalidTopic, ErrTopicExists, ErrInvalidPartitions,
		ErrInvalidReplicationFactor, ErrInvalidReplicaAssignment, ErrInvalidConfig, ErrNotController,
		ErrInvalidRequest, ErrPolicyViolation, ErrFencedLeaderEpoch, ErrStaleBrokerEpoch, ErrPreferredLeaderNotAvail,
		ErrElectionNotNeeded, ErrEligibleLeadersNotAvail, ErrNoReassignmentInProgress, ErrInvalidUpdateVersion, ErrBrokerIDNotRegistered, ErrIneligibleReplica,
		ErrInconsistentClusterID, ErrDuplicateVoter, ErrVoterNotFound} {
		m[e.Code] = e
	}
	return m
}()

// ErrorCode returns the Kafka error code for err: 0 for nil, the code of the
// wrapped *Error, NOT_CONTROLLER for ErrClosed, REQUEST_TIMED_OUT for a
// context deadline, INVALID_REQUEST for ErrCorrupt, and
// UNKNOWN_SERVER_ERROR (-1) otherwise.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, ErrClosed):
		return ErrNotController.Code
	case errors.Is(err, ErrCorrupt):
		return ErrInvalidRequest.Code
	case errors.Is(err, context.DeadlineExceeded):
		return ErrRequestTimedOut.Code
	}
	return ErrUnknown.Code
}

// remoteError is an error decoded from an RPC response: the message as the
// leader wrote it, wrapping the sentinel of its code.
type remoteError struct {
	sentinel *Error
	msg      string
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// errorFromCode rebuilds an error sent by another node.
func errorFromCode(code int16, msg string) error {
	if code == 0 {
		return nil
	}
	s, ok := errorsByCode[code]
	if !ok {
		s = ErrUnknown
	}
	if msg == "" {
		msg = s.msg
	}
	return &remoteError{sentinel: s, msg: msg}
}

// errf wraps a sentinel with context.
func errf(sentinel *Error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}
