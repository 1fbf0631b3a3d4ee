package kafka

import (
	"context"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
)

// Topic administration on a broker in a cluster: the checks that need no
// state are the single broker's (names, configs, request shape), the rest
// is the controller's (existence, replication factor against the live
// brokers, assignments), and every change is waited for until this broker
// applied it.

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
