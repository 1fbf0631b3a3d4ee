package kafka

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/replication/controller"
)

// This file holds what the admin APIs (topics, partitions, configs,
// records) share: errors decided in the protocol layer, the checks Kafka
// applies to a request before any resource is touched, and the wait for a
// change made through the controller.
//
// Topic administration is the metadata quorum's: the checks that need no
// state are made here (names, configs, the request's shape), the rest by
// the controller (existence at the time of the write, the replication
// factor against the live brokers, the brokers an assignment names), and
// every change is waited for until this broker applied it (waitApplied).

// protoError is an error the protocol layer decides on its own (a request
// Kafka refuses before it reaches the engine), with the code it answers
// and the message clients show.
type protoError struct {
	code int16
	msg  string
}

func (e *protoError) Error() string { return e.msg }

// refuse returns a protoError answering k with a message in Kafka's words.
func refuse(k *kerr.Error, format string, args ...any) error {
	return &protoError{code: k.Code, msg: fmt.Sprintf(format, args...)}
}

// adminCode maps err to the code an admin API answers. Admin requests go
// to the controller, so a broker shutting down answers NOT_CONTROLLER, the
// retriable code that makes clients look for the controller again (data
// APIs answer NOT_LEADER_OR_FOLLOWER instead, see errorCode).
func adminCode(err error) int16 {
	var pe *protoError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &pe):
		return pe.code
	case errors.Is(err, engine.ErrClosed):
		return kerr.NotController.Code
	}
	return errorCode(err)
}

// Messages Kafka uses for request-level mistakes, kept word for word: some
// tools match on them.
const (
	msgDuplicateTopic    = "Duplicate topic name."
	msgDuplicateResource = "Each resource must appear at most once."
	msgDuplicateKeys     = "Error due to duplicate config keys"
)

// duplicates returns the names that appear more than once in a request.
// Kafka acts on none of their copies, since it cannot tell which one the
// client meant, and answers them with INVALID_REQUEST.
func duplicates[T any](items []T, name func(*T) string) map[string]bool {
	seen := make(map[string]bool)
	dups := make(map[string]bool)
	for i := range items {
		n := name(&items[i])
		if seen[n] {
			dups[n] = true
		}
		seen[n] = true
	}
	return dups
}

// checkBrokerResource checks the name of a BROKER config resource: empty
// (the cluster-wide defaults) or this node's id, as Kafka requires of the
// broker that receives the request.
func (s *Server) checkBrokerResource(name string) error {
	if name == "" {
		return nil
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return refuse(kerr.InvalidRequest, "Broker id must be an integer, but it is: %s", name)
	}
	if int32(id) != s.eng.NodeID() {
		return refuse(kerr.InvalidRequest, "Unexpected broker id, expected %d or empty string, but received %s", s.eng.NodeID(), name)
	}
	return nil
}

// transactionStateTopic is Kafka's topic of transaction coordinators.
// ringlog has none yet; the name is reserved so that clients see it as
// Kafka shows it (internal, its records not deletable) if one makes it.
const transactionStateTopic = "__transaction_state"

// isInternalTopic reports a topic Kafka's Topic.isInternal names: the
// group coordinator's and the transaction coordinator's. Kafka lets a
// client create, grow, reconfigure and delete them like any topic, and
// refuses only DeleteRecords on them (INVALID_TOPIC_EXCEPTION), which
// would cut committed offsets out from under the coordinator.
func isInternalTopic(name string) bool {
	return name == group.OffsetsTopic || name == transactionStateTopic
}

// maxTotalPartitions is the cap the controller holds a client's creation
// to: this broker's ringlog.max.partitions (every broker holds every
// partition), or 0 for none. The controller answers a creation beyond it
// with POLICY_VIOLATION: Kafka's code for a request a broker's policy
// refuses (as a CreateTopicPolicy would), which clients do not retry;
// INVALID_REQUEST would blame the request's form, and Kafka has no code of
// its own for a partition limit (KIP-578 was not adopted).
func (s *Server) maxTotalPartitions() int32 {
	m := s.eng.MaxPartitions()
	if m < 0 {
		return 0
	}
	return int32(min(m, math.MaxInt32))
}

// totalPartitions counts the partitions of every topic in img.
func totalPartitions(img *controller.Image) int {
	n := 0
	for _, name := range img.TopicNames() {
		n += len(img.Topic(name).Partitions)
	}
	return n
}

// adminTimeout bounds one controller request made for a client.
const adminTimeout = 30 * time.Second

// waitApplied waits until this broker's node applied everything the
// controller applied here so far (a write just made included), so that a
// client that changed the metadata through this broker and then asks it
// for metadata sees the change.
func (s *Server) waitApplied(ctx context.Context) error {
	n := s.cfg.Node
	return n.WaitApplied(ctx, n.Controller().Image().Index)
}
