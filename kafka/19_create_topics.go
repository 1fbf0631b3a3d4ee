package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/internal/acl"
	"ringlog/replication/controller"
)

// CreateTopics v0-v7.
//
//   - v1: validate_only, error messages;
//   - v4: -1 partitions and replication factor take the broker's defaults
//     (KIP-464); older clients send real numbers, -1 is accepted from them
//     too;
//   - v5: the response carries the partition count, replication factor
//     and every resulting config (KIP-525), flexible versions;
//   - v7: the topic id (KIP-516).
//
// With an authorizer, a topic needs CREATE on the cluster or on itself
// (TOPIC_AUTHORIZATION_FAILED, "Authorization failed."), and its configs,
// partition count and replication factor are answered only with
// DESCRIBE_CONFIGS on it (else topic_config_error_code
// TOPIC_AUTHORIZATION_FAILED), as Kafka's controller answers.
func init() {
	register(api{key: kmsg.CreateTopics, min: 0, max: 7, sync: handleCreateTopics})
}

// maxCreateTopics bounds the topics one request may create or validate.
// Each answer lists every config (KIP-525), about a kilobyte, so without a
// bound a validate-only request of a few megabytes of short names would
// make the broker build a response of hundreds of megabytes. Topics past
// the bound get a short INVALID_REQUEST each.
const maxCreateTopics = 10000

func handleCreateTopics(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	dups := duplicates(req.Topics, func(t *kmsg.CreateTopicsRequestTopic) string { return t.Topic })
	answered := make(map[string]bool, len(dups))
	// With an authorizer, CREATE on the cluster allows every topic,
	// otherwise CREATE on each.
	clusterCreate := s.authorizeCluster(cx, acl.OpCreate)
	mq := s.newMutationQuota(cx, 6) // KIP-599: strict from v6
	for i := range req.Topics {
		t := &req.Topics[i]
		if i >= maxCreateTopics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic = t.Topic
			rt.ErrorCode = kerr.InvalidRequest.Code
			rt.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("ringlog creates at most %d topics per request", maxCreateTopics))
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		if dups[t.Topic] {
			if !answered[t.Topic] {
				answered[t.Topic] = true
				rt := kmsg.NewCreateTopicsResponseTopic()
				rt.Topic = t.Topic
				rt.ErrorCode, rt.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(msgDuplicateTopic)
				resp.Topics = append(resp.Topics, rt)
			}
			continue
		}
		if !clusterCreate && !s.authorize(cx, acl.OpCreate, acl.ResourceTopic, t.Topic) {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic = t.Topic
			rt.ErrorCode, rt.ErrorMessage = kerr.TopicAuthorizationFailed.Code, kmsg.StringPtr("Authorization failed.")
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		rt := s.createTopic(t, req.ValidateOnly, mq)
		if rt.ErrorCode == 0 && !s.authorize(cx, acl.OpDescribeConfigs, acl.ResourceTopic, t.Topic) {
			// Created, but its configs are not the principal's to see:
			// Kafka's controller leaves them, the partition count and the
			// replication factor out and says why (KIP-525).
			rt.Configs, rt.NumPartitions, rt.ReplicationFactor = nil, -1, -1
			rt.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
		}
		resp.Topics = append(resp.Topics, rt)
	}
	resp.ThrottleMillis = int32(mq.throttleTime(cx).Milliseconds())
	return resp
}

// createTopic creates (or with validateOnly, checks) one topic through
// the controller. The checks run in the order of Kafka's controller, so
// that a request with several mistakes gets the same code: name,
// existence, configs, then counts and assignments. Those that need no
// state are made here; the controller makes the rest (the replication
// factor against the live brokers, the brokers an assignment names). The
// answer waits until this broker applied the new topic.
func (s *Server) createTopic(t *kmsg.CreateTopicsRequestTopic, validateOnly bool, mq *mutationQuota) kmsg.CreateTopicsResponseTopic {
	rt := kmsg.NewCreateTopicsResponseTopic()
	rt.Topic = t.Topic
	fail := func(err error) kmsg.CreateTopicsResponseTopic {
		rt.ErrorCode, rt.ErrorMessage = adminCode(err), errorMessage(err)
		return rt
	}
	if err := engine.ValidateTopicName(t.Topic); err != nil {
		return fail(err)
	}
	if s.cfg.Node.Image().Topic(t.Topic) != nil {
		return fail(refuse(kerr.TopicAlreadyExists, "Topic '%s' already exists.", t.Topic))
	}
	overrides := make(map[string]string)
	for _, c := range t.Configs {
		if c.Value == nil {
			return fail(refuse(kerr.InvalidConfig, "Null value not supported for topic configs: %s", c.Name))
		}
		// A name given twice: the last value wins, as in Kafka's
		// controller, which reads the list into a map.
		overrides[c.Name] = *c.Value
	}
	cfg, err := engine.ParseTopicConfig(s.eng.Defaults(), overrides)
	if err != nil {
		return fail(err)
	}
	req := controller.CreateTopicRequest{Name: t.Topic, Partitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor,
		Configs: overrides, ValidateOnly: validateOnly, MaxTotal: s.maxTotalPartitions()}
	if len(t.ReplicaAssignment) > 0 {
		if t.ReplicationFactor != -1 {
			return fail(refuse(kerr.InvalidRequest, "A manual partition assignment was specified, but replication factor was not set to -1."))
		}
		if t.NumPartitions != -1 {
			return fail(refuse(kerr.InvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1."))
		}
		if req.Assignments, err = manualAssignment(t.ReplicaAssignment); err != nil {
			return fail(err)
		}
	} else {
		if t.ReplicationFactor == 0 || t.ReplicationFactor < -1 {
			return fail(refuse(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value."))
		}
		if t.NumPartitions == 0 || t.NumPartitions < -1 {
			return fail(refuse(kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value."))
		}
		if req.Partitions == -1 {
			req.Partitions = s.eng.NumPartitions()
		}
	}
	// The controller mutation quota (KIP-599), after the checks that
	// come before it in Kafka's controller; the credits go back if the
	// controller refuses the topic for what it checks itself (they come
	// first in Kafka's too).
	n := int(req.Partitions)
	if len(req.Assignments) > 0 {
		n = len(req.Assignments)
	}
	if err := mq.take(n); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	topic, err := s.cfg.Node.Controller().CreateTopic(ctx, req)
	if err != nil {
		mq.give(n)
		return fail(err)
	}
	if !validateOnly {
		// A validate-only create makes no topic, so it has no id (the
		// zero UUID means none, KIP-516).
		rt.TopicID = [16]byte(topic.ID)
		if err := s.waitApplied(ctx); err != nil {
			return fail(err)
		}
	}
	rt.NumPartitions = int32(len(topic.Partitions))
	rt.ReplicationFactor = 0
	if len(topic.Partitions) > 0 {
		rt.ReplicationFactor = int16(len(topic.Partitions[0].Replicas))
	}
	for _, c := range s.topicConfigs(cfg, overrides) {
		rc := kmsg.NewCreateTopicsResponseTopicConfig()
		rc.Name, rc.Value, rc.ReadOnly, rc.Source = c.name, c.value, c.readOnly, int8(c.source)
		rt.Configs = append(rt.Configs, rc)
	}
	return rt
}

// manualAssignment reads CreateTopics' manual assignment into the
// replicas of each partition: one entry per partition, numbered 0 to n-1,
// none empty. The brokers it names are the controller's to check.
func manualAssignment(as []kmsg.CreateTopicsRequestTopicReplicaAssignment) ([][]int32, error) {
	out := make([][]int32, len(as))
	for _, a := range as {
		if a.Partition < 0 || int(a.Partition) >= len(out) || out[a.Partition] != nil {
			return nil, refuse(kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence")
		}
		if len(a.Replicas) == 0 {
			return nil, refuse(kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
		}
		out[a.Partition] = a.Replicas
	}
	return out, nil
}
