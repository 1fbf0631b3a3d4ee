package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine/group"
	"ringlog/replication/controller"
)

// FindCoordinator, v0 to v6: one key before v4, several from v4 (KIP-699).
// The coordinator of a group is the leader of the group's partition of
// __consumer_offsets, as in Kafka (a single broker leads them all); the
// topic is created through the controller by the first broker asked
// (offsetsTopic), so the handler may wait on the controller and runs on a
// goroutine of its own. Transactions are not implemented, so a TRANSACTION
// key is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Produce and
// InitProducerId answer a transactional id: that code is fatal to a
// transactional producer in the Java client and franz-go, where
// COORDINATOR_NOT_AVAILABLE would have it retry until its timeout. Other
// key types (share groups, KIP-932) are INVALID_REQUEST.
func init() {
	register(api{key: kmsg.FindCoordinator, min: 0, max: 6, sync: handleFindCoordinator})
}

const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1
)

// offsetsTopicTimeout bounds the creation of __consumer_offsets for a
// FindCoordinator: well within a client's request timeout, which then
// retries on COORDINATOR_NOT_AVAILABLE.
const offsetsTopicTimeout = 10 * time.Second

func handleFindCoordinator(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	// The topic is looked up (or created) once per request, however many
	// keys it has.
	var offsets *controller.Topic
	var offsetsErr error
	looked := false
	find := func(key string) kmsg.FindCoordinatorResponseCoordinator {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.NodeID, c.Port = -1, -1
		var msg string
		switch {
		case req.CoordinatorType == coordinatorTransaction:
			c.ErrorCode, msg = kerr.TransactionalIDAuthorizationFailed.Code, "ringlog does not support transactions"
		case req.CoordinatorType != coordinatorGroup:
			c.ErrorCode, msg = kerr.InvalidRequest.Code, "unknown coordinator type"
		case s.cfg.Groups == nil:
			c.ErrorCode, msg = kerr.CoordinatorNotAvailable.Code, "this broker has no group coordinator"
		default:
			if !looked {
				looked = true
				offsets, offsetsErr = s.offsetsTopic()
			}
			msg = s.groupCoordinator(cx, &c, offsets, offsetsErr)
		}
		if msg != "" {
			c.ErrorMessage = &msg
		}
		return c
	}
	if req.Version >= 4 {
		resp.Coordinators = make([]kmsg.FindCoordinatorResponseCoordinator, 0, min(len(req.CoordinatorKeys), 1024))
		for _, k := range req.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, find(k))
		}
	} else {
		c := find(req.CoordinatorKey)
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
	}
	return resp
}

// groupCoordinator names the coordinator of the group c.Key: the leader
// of its partition of __consumer_offsets (t, or err when offsetsTopic
// failed) in the metadata this broker applied, or COORDINATOR_NOT_AVAILABLE
// (with the reason) when there is none. A leader that has not applied its
// election yet answers the group's requests NOT_COORDINATOR, and the
// client asks again.
func (s *Server) groupCoordinator(cx *reqCtx, c *kmsg.FindCoordinatorResponseCoordinator, t *controller.Topic, err error) string {
	fail := func(msg string) string {
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return msg
	}
	if err != nil {
		return fail(fmt.Sprintf("%s is not available: %v", group.OffsetsTopic, err))
	}
	if n := int32(len(t.Partitions)); n != s.cfg.Groups.Partitions() {
		// The topic was created with another count than this broker's
		// coordinator hashes groups with (offsets.topic.num.partitions
		// differs between brokers): answering would send the client to
		// the wrong partition's leader.
		return fail(fmt.Sprintf("%s has %d partitions, this broker's group coordinator %d (restart it)", group.OffsetsTopic, n, s.cfg.Groups.Partitions()))
	}
	part := s.cfg.Groups.PartitionOf(c.Key)
	img := s.cfg.Node.Image()
	p, ok := img.Partition(group.OffsetsTopic, part)
	if !ok || p.Leader < 0 {
		return fail(fmt.Sprintf("%s-%d has no leader", group.OffsetsTopic, part))
	}
	b, ok := img.Broker(p.Leader)
	if !ok || b.Fenced {
		return fail(fmt.Sprintf("the leader of %s-%d, broker %d, is not available", group.OffsetsTopic, part, p.Leader))
	}
	addr, ok := b.Endpoint(cx.listener())
	host, port, ok2 := splitHostPort(addr)
	if !ok || !ok2 {
		return fail(fmt.Sprintf("broker %d has no usable address", p.Leader))
	}
	c.NodeID, c.Host, c.Port = p.Leader, host, port
	return ""
}

// offsetsTopic returns __consumer_offsets, creating it through the
// controller when no broker has yet, as Kafka creates it at the first
// FindCoordinator (or Metadata request naming it):
// offsets.topic.num.partitions partitions of
// offsets.topic.replication.factor replicas, capped by the live brokers,
// with the coordinator's configs (compacted). TOPIC_ALREADY_EXISTS means
// another broker was first. Creations run one at a time on a broker; the
// answer waits until this broker applied the topic.
func (s *Server) offsetsTopic() (*controller.Topic, error) {
	n := s.cfg.Node
	if t := n.Image().Topic(group.OffsetsTopic); t != nil {
		return t, nil
	}
	s.offsetsMu.Lock()
	defer s.offsetsMu.Unlock()
	if t := n.Image().Topic(group.OffsetsTopic); t != nil {
		return t, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), offsetsTopicTimeout)
	defer cancel()
	live := 0
	for _, b := range n.Controller().Image().Brokers() {
		if !b.Fenced {
			live++
		}
	}
	rf := min(int(s.cfg.Groups.ReplicationFactor()), max(live, 1))
	_, err := n.Controller().CreateTopic(ctx, controller.CreateTopicRequest{Name: group.OffsetsTopic,
		Partitions: s.cfg.Groups.Partitions(), ReplicationFactor: int16(rf), Configs: s.cfg.Groups.TopicConfigs()})
	switch {
	case errors.Is(err, controller.ErrTopicExists):
	case err != nil:
		return nil, err
	default:
		s.log.Info("created the group coordinator's topic", "topic", group.OffsetsTopic, "partitions", s.cfg.Groups.Partitions(),
			"replication_factor", rf, "live_brokers", live)
		if rf < int(s.cfg.Groups.ReplicationFactor()) {
			// Worth a warning when brokers of the cluster were down at the
			// time; a cluster of fewer brokers (one, alone) can do no more.
			level := slog.LevelInfo
			if len(n.Image().Brokers()) > rf {
				level = slog.LevelWarn
			}
			s.log.Log(ctx, level, "offsets.topic.replication.factor capped by the live brokers", "wanted", s.cfg.Groups.ReplicationFactor(), "got", rf,
				"registered_brokers", len(n.Image().Brokers()))
		}
	}
	if err := s.waitApplied(ctx); err != nil {
		return nil, err
	}
	t := n.Image().Topic(group.OffsetsTopic)
	if t == nil {
		return nil, fmt.Errorf("%s was deleted meanwhile", group.OffsetsTopic)
	}
	return t, nil
}
