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
	"ringlog/engine/txn"
	"ringlog/internal/acl"
	"ringlog/replication/controller"
)

// FindCoordinator, v0 to v6: one key before v4, several from v4 (KIP-699).
// The coordinator of a group is the leader of the group's partition of
// __consumer_offsets, that of a transactional id the leader of the id's
// partition of __transaction_state, as in Kafka (a single broker leads
// them all); each topic is created through the controller by the first
// broker asked (internalTopic), so the handler may wait on the controller
// and runs on a goroutine of its own. Other key types (share groups,
// KIP-932) are INVALID_REQUEST. With an authorizer, the principal needs
// DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or the transactional
// id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), checked first as in Kafka.
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
		case req.CoordinatorType == coordinatorGroup && !s.authorize(cx, acl.OpDescribe, acl.ResourceGroup, key):
			c.ErrorCode = kerr.GroupAuthorizationFailed.Code
			if req.Version < 4 {
				// Kafka's error answer: the code's own message.
				msg = kerr.GroupAuthorizationFailed.Message
			}
		case req.CoordinatorType == coordinatorTransaction && !s.authorize(cx, acl.OpDescribe, acl.ResourceTransactionalID, key):
			c.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			if req.Version < 4 {
				msg = kerr.TransactionalIDAuthorizationFailed.Message
			}
		case req.CoordinatorType == coordinatorTransaction && s.cfg.Txns == nil:
			c.ErrorCode, msg = kerr.CoordinatorNotAvailable.Code, "this broker has no transaction coordinator"
		case req.CoordinatorType == coordinatorTransaction:
			if !looked {
				looked = true
				offsets, offsetsErr = s.txnStateTopic()
			}
			msg = s.coordinatorOf(cx, &c, txn.StateTopic, s.cfg.Txns.Partitions(), s.cfg.Txns.PartitionOf(key), offsets, offsetsErr)
		case req.CoordinatorType != coordinatorGroup:
			c.ErrorCode, msg = kerr.InvalidRequest.Code, "unknown coordinator type"
		case s.cfg.Groups == nil:
			c.ErrorCode, msg = kerr.CoordinatorNotAvailable.Code, "this broker has no group coordinator"
		default:
			if !looked {
				looked = true
				offsets, offsetsErr = s.offsetsTopic()
			}
			msg = s.coordinatorOf(cx, &c, group.OffsetsTopic, s.cfg.Groups.Partitions(), s.cfg.Groups.PartitionOf(key), offsets, offsetsErr)
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

// coordinatorOf names the coordinator of c.Key: the leader of its
// partition part of the internal topic (t, or err when creating it
// failed) in the metadata this broker applied, or COORDINATOR_NOT_AVAILABLE
// (with the reason) when there is none. A leader that has not applied its
// election yet answers the key's requests NOT_COORDINATOR, and the client
// asks again. partitions is the count the coordinator hashes keys with.
func (s *Server) coordinatorOf(cx *reqCtx, c *kmsg.FindCoordinatorResponseCoordinator, topic string, partitions, part int32, t *controller.Topic, err error) string {
	fail := func(msg string) string {
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return msg
	}
	if err != nil {
		return fail(fmt.Sprintf("%s is not available: %v", topic, err))
	}
	if n := int32(len(t.Partitions)); n != partitions {
		// The topic was created with another count than this broker's
		// coordinator hashes keys with (the partition count setting
		// differs between brokers): answering would send the client to
		// the wrong partition's leader.
		return fail(fmt.Sprintf("%s has %d partitions, this broker's coordinator %d (restart it)", topic, n, partitions))
	}
	img := s.cfg.Node.Image()
	p, ok := img.Partition(topic, part)
	if !ok || p.Leader < 0 {
		return fail(fmt.Sprintf("%s-%d has no leader", topic, part))
	}
	b, ok := img.Broker(p.Leader)
	if !ok || b.Fenced {
		return fail(fmt.Sprintf("the leader of %s-%d, broker %d, is not available", topic, part, p.Leader))
	}
	addr, ok := b.Endpoint(cx.listener())
	host, port, ok2 := splitHostPort(addr)
	if !ok || !ok2 {
		return fail(fmt.Sprintf("broker %d has no usable address", p.Leader))
	}
	c.NodeID, c.Host, c.Port = p.Leader, host, port
	return ""
}

// offsetsTopic returns __consumer_offsets, creating it when no broker has
// yet, as Kafka creates it at the first FindCoordinator (or Metadata
// request naming it): offsets.topic.num.partitions partitions of
// offsets.topic.replication.factor replicas, capped by the live brokers,
// with the coordinator's configs (compacted).
func (s *Server) offsetsTopic() (*controller.Topic, error) {
	return s.internalTopic(group.OffsetsTopic, s.cfg.Groups.Partitions(), s.cfg.Groups.ReplicationFactor(),
		func(int) map[string]string { return s.cfg.Groups.TopicConfigs() })
}

// txnStateTopic returns __transaction_state, creating it when no broker
// has yet (Kafka creates it at the first FindCoordinator for a
// transaction): transaction.state.log.num.partitions partitions of
// transaction.state.log.replication.factor replicas, capped by the live
// brokers, compacted, with min.insync.replicas from
// transaction.state.log.min.isr (capped by the replication factor).
func (s *Server) txnStateTopic() (*controller.Topic, error) {
	return s.internalTopic(txn.StateTopic, s.cfg.Txns.Partitions(), s.cfg.Txns.ReplicationFactor(), s.cfg.Txns.TopicConfigs)
}

// internalTopic returns an internal topic of a coordinator, creating it
// through the controller when no broker has yet. TOPIC_ALREADY_EXISTS
// means another broker was first. Creations run one at a time on a
// broker; the answer waits until this broker applied the topic. configs
// gets the replication factor the topic is created with.
func (s *Server) internalTopic(name string, partitions int32, wantRF int16, configs func(rf int) map[string]string) (*controller.Topic, error) {
	n := s.cfg.Node
	if t := n.Image().Topic(name); t != nil {
		return t, nil
	}
	s.offsetsMu.Lock()
	defer s.offsetsMu.Unlock()
	if t := n.Image().Topic(name); t != nil {
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
	rf := min(int(wantRF), max(live, 1))
	_, err := n.Controller().CreateTopic(ctx, controller.CreateTopicRequest{Name: name,
		Partitions: partitions, ReplicationFactor: int16(rf), Configs: configs(rf)})
	switch {
	case errors.Is(err, controller.ErrTopicExists):
	case err != nil:
		return nil, err
	default:
		s.log.Info("created a coordinator's topic", "topic", name, "partitions", partitions,
			"replication_factor", rf, "live_brokers", live)
		if rf < int(wantRF) {
			// Worth a warning when brokers of the cluster were down at the
			// time; a cluster of fewer brokers (one, alone) can do no more.
			level := slog.LevelInfo
			if len(n.Image().Brokers()) > rf {
				level = slog.LevelWarn
			}
			s.log.Log(ctx, level, "the internal topic's replication factor is capped by the live brokers", "topic", name, "wanted", wantRF, "got", rf,
				"registered_brokers", len(n.Image().Brokers()))
		}
	}
	if err := s.waitApplied(ctx); err != nil {
		return nil, err
	}
	t := n.Image().Topic(name)
	if t == nil {
		return nil, fmt.Errorf("%s was deleted meanwhile", name)
	}
	return t, nil
}
