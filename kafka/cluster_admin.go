package kafka

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/replication/controller"
)

// Topic administration on a broker in a cluster: the checks that need no
// state are the single broker's (names, configs, request shape), the rest
// is the controller's (existence, replication factor against the live
// brokers, assignments), and every change is waited for until this broker
// applied it.

// topicExists reports whether a topic exists, in the cluster's metadata on
// a broker in a cluster.
func (s *Server) topicExists(name string) bool {
	if s.cfg.Node != nil {
		return s.cfg.Node.Image().Topic(name) != nil
	}
	_, ok := s.eng.Topic(name)
	return ok
}

// clusterCreateTopic creates a topic through the controller, after
// createTopic's checks of the request's shape.
func (s *Server) clusterCreateTopic(t *kmsg.CreateTopicsRequestTopic, overrides map[string]string, cfg engine.TopicConfig, validateOnly bool) kmsg.CreateTopicsResponseTopic {
	rt := kmsg.NewCreateTopicsResponseTopic()
	rt.Topic = t.Topic
	fail := func(err error) kmsg.CreateTopicsResponseTopic {
		rt.ErrorCode, rt.ErrorMessage = adminCode(err), errorMessage(err)
		return rt
	}
	req := controller.CreateTopicRequest{Name: t.Topic, Partitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor,
		Configs: overrides, ValidateOnly: validateOnly}
	if len(t.ReplicaAssignment) > 0 {
		as := make([][]int32, len(t.ReplicaAssignment))
		for _, a := range t.ReplicaAssignment {
			if a.Partition < 0 || int(a.Partition) >= len(as) || as[a.Partition] != nil {
				return fail(refuse(kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence"))
			}
			if len(a.Replicas) == 0 {
				return fail(refuse(kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list."))
			}
			as[a.Partition] = a.Replicas
		}
		req.Assignments = as
	} else if req.Partitions == -1 {
		req.Partitions = s.eng.NumPartitions()
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	topic, err := s.cfg.Node.Controller().CreateTopic(ctx, req)
	if err != nil {
		return fail(err)
	}
	if !validateOnly {
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

// clusterDeleteTopic deletes a topic through the controller; d names it
// by name or id.
func (s *Server) clusterDeleteTopic(d *deleteTarget) kmsg.DeleteTopicsResponseTopic {
	img := s.cfg.Node.Image()
	var t *controller.Topic
	if d.name == nil {
		if t = img.TopicByID(controller.TopicID(d.id)); t == nil {
			return deleteAnswer(nil, d.id, refuse(kerr.UnknownTopicID, "No topic with id %s", uuidString(d.id)))
		}
		d.name = &t.Name
	} else if t = img.Topic(*d.name); t == nil {
		return deleteAnswer(d.name, d.id, refuse(kerr.UnknownTopicOrPartition, "No topic named %s", *d.name))
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	err := s.cfg.Node.Controller().DeleteTopic(ctx, t.Name)
	if err == nil {
		err = s.waitApplied(ctx)
	}
	return deleteAnswer(d.name, [16]byte(t.ID), err)
}

// clusterCreatePartitions grows a topic through the controller, after
// createPartitions' checks. A validate-only request is checked there
// only: the controller's placement is not tried.
func (s *Server) clusterCreatePartitions(t *kmsg.CreatePartitionsRequestTopic, validateOnly bool) error {
	var as [][]int32
	for _, a := range t.Assignment {
		as = append(as, a.Replicas)
	}
	if validateOnly {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := s.cfg.Node.Controller().CreatePartitions(ctx, t.Topic, t.Count, as); err != nil {
		return err
	}
	return s.waitApplied(ctx)
}

// clusterAlterTopicConfig replaces a topic's overrides (AlterConfigs), or
// with ops applies an incremental change, through the controller.
func (s *Server) clusterAlterTopicConfig(name string, overrides map[string]string, ops []engine.ConfigOp, incremental, validateOnly bool) error {
	ct := s.cfg.Node.Image().Topic(name)
	if ct == nil {
		return refuse(kerr.UnknownTopicOrPartition, "Topic %s does not exist.", name)
	}
	if incremental {
		var err error
		if overrides, err = engine.ApplyConfigOps(maps.Clone(ct.Configs), s.eng.Defaults(), ops); err != nil {
			return err
		}
	}
	if _, err := engine.ParseTopicConfig(s.eng.Defaults(), overrides); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	var deletes []string
	for k := range ct.Configs {
		if _, ok := overrides[k]; !ok {
			deletes = append(deletes, k)
		}
	}
	slices.Sort(deletes)
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := s.cfg.Node.Controller().AlterConfigs(ctx, name, overrides, deletes); err != nil {
		return err
	}
	return s.waitApplied(ctx)
}
