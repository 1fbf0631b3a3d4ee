package kafka

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/replication/controller"
)

// Dynamic broker configs (KIP-226): the replication throttles' rates,
// set on a broker id or on the empty name (the cluster default) and kept
// in the metadata quorum (controller.AlterBrokerConfigs), so that every
// broker applies them. Every other broker config is static: a change of
// one is refused as Kafka refuses a change of a config it cannot update
// while it runs.

// alterBrokerConfigs validates a broker resource's next dynamic configs
// (next: all of them; deletes: the dynamic ones set now and absent from
// next) as Kafka's broker does before it forwards the change, then writes
// them through the controller and waits until this broker applied them.
func (s *Server) alterBrokerConfigs(resource string, set map[string]string, deletes []string, validateOnly bool) error {
	var static []string
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if !controller.IsDynamicBrokerConfig(k) {
			static = append(static, k)
		}
	}
	if err := refuseBrokerChange(static); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if err := controller.ValidateBrokerConfig(k, set[k]); err != nil {
			return refuse(kerr.InvalidRequest, "%s", strings.TrimPrefix(err.Error(), controller.ErrInvalidRequest.Error()+": "))
		}
	}
	if validateOnly || (len(set) == 0 && len(deletes) == 0) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := s.cfg.Node.Controller().AlterBrokerConfigs(ctx, resource, set, deletes); err != nil {
		return err
	}
	return s.waitApplied(ctx)
}

// incrementalAlterBrokerConfigs applies IncrementalAlterConfigs operations
// to a broker resource: SET and DELETE (APPEND and SUBTRACT are for LIST
// configs, and no dynamic broker config is one). Deleting a config that
// is not set, dynamic or not, changes nothing, as in Kafka.
func (s *Server) incrementalAlterBrokerConfigs(resource string, ops []engine.ConfigOp, validateOnly bool) error {
	cur := s.cfg.Node.Image().BrokerConfigs(resource)
	set := map[string]string{}
	var deletes []string
	for _, op := range ops {
		switch op.Op {
		case 0:
			set[op.Name] = op.Value
		case 1:
			if _, ok := cur[op.Name]; ok {
				deletes = append(deletes, op.Name)
			}
		case 2, 3:
			if !controller.IsDynamicBrokerConfig(op.Name) {
				// Not a config ringlog changes while it runs: refused as
				// any change of one is, below.
				set[op.Name] = op.Value
				continue
			}
			verb := "append"
			if op.Op == 3 {
				verb = "subtract"
			}
			return refuse(kerr.InvalidConfig, "Config value %s is not allowed for config key: %s", verb, op.Name)
		}
	}
	return s.alterBrokerConfigs(resource, set, deletes, validateOnly)
}

// replaceBrokerConfigs is AlterConfigs on a broker resource: the given
// configs replace all of its dynamic ones.
func (s *Server) replaceBrokerConfigs(resource string, configs map[string]string, validateOnly bool) error {
	var deletes []string
	for _, k := range slices.Sorted(maps.Keys(s.cfg.Node.Image().BrokerConfigs(resource))) {
		if _, ok := configs[k]; !ok {
			deletes = append(deletes, k)
		}
	}
	return s.alterBrokerConfigs(resource, configs, deletes, validateOnly)
}

// dynamicBrokerConfigs describes the dynamic broker configs of a broker
// resource that are set: for a broker id, the value in effect on that
// broker and its synonyms (DYNAMIC_BROKER_CONFIG, then
// DYNAMIC_DEFAULT_BROKER_CONFIG); for the empty name, the cluster
// defaults. Kafka's KafkaConfig does not define the rates (only its
// dynamic config does), so, as in Kafka (difftest's
// TestReplicationThrottleConfigs), a rate set nowhere is not listed and
// no DEFAULT_CONFIG synonym follows the dynamic ones: its default,
// Long.MAX_VALUE, is no bound.
func (s *Server) dynamicBrokerConfigs(resource string) []describedConfig {
	img := s.cfg.Node.Image()
	own, def := img.BrokerConfigs(resource), img.BrokerConfigs("")
	var out []describedConfig
	for _, name := range controller.DynamicBrokerConfigs() {
		var syns []configSynonym
		if resource != "" {
			if v, ok := own[name]; ok {
				syns = append(syns, configSynonym{name, v, kmsg.ConfigSourceDynamicBrokerConfig})
			}
		}
		if v, ok := def[name]; ok {
			syns = append(syns, configSynonym{name, v, kmsg.ConfigSourceDynamicDefaultBrokerConfig})
		}
		if len(syns) == 0 {
			continue
		}
		v := syns[0].value
		out = append(out, describedConfig{
			name: name, value: &v, source: syns[0].source, typ: kmsg.ConfigTypeLong, synonyms: syns,
			doc: "The upper bound (bytes/sec) on replication traffic of the replicas listed in " +
				strings.Replace(name, ".rate", ".replicas", 1) + " of each topic. Set dynamically.",
		})
	}
	return out
}
