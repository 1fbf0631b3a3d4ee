package kafka

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/internal/acl"
)

// AlterConfigs v0-v2: replaces all of a resource's overrides with the
// given set (names left out go back to their defaults). Kafka deprecates it
// for IncrementalAlterConfigs (KIP-339) because of that read-modify-write
// race, but kcat and older tools still send it. v2 is flexible.
//
// With an authorizer, the principal needs ALTER_CONFIGS on a topic
// (TOPIC_AUTHORIZATION_FAILED) or, for a broker, on the cluster
// (CLUSTER_AUTHORIZATION_FAILED).
func init() {
	register(api{key: kmsg.AlterConfigs, min: 0, max: 2, sync: handleAlterConfigs})
}

func handleAlterConfigs(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	dups := duplicates(req.Resources, func(r *kmsg.AlterConfigsRequestResource) string {
		return r.ResourceType.String() + "\x00" + r.ResourceName
	})
	for i := range req.Resources {
		rr := &req.Resources[i]
		var err error
		if code := s.configsRefused(cx, acl.OpAlterConfigs, rr.ResourceType, rr.ResourceName); code != 0 {
			// Checked before anything else, with no message, as Kafka's
			// broker does before forwarding to the controller.
			r := kmsg.NewAlterConfigsResponseResource()
			r.ResourceType, r.ResourceName, r.ErrorCode = rr.ResourceType, rr.ResourceName, code
			resp.Resources = append(resp.Resources, r)
			continue
		}
		if dups[rr.ResourceType.String()+"\x00"+rr.ResourceName] {
			// Every copy is answered, as Kafka does: the response
			// pairs answers with resources by position.
			err = refuse(kerr.InvalidRequest, msgDuplicateResource)
		} else {
			err = s.alterConfigs(rr, req.ValidateOnly)
		}
		r := kmsg.NewAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		r.ErrorCode, r.ErrorMessage = adminCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}

func (s *Server) alterConfigs(rr *kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	names := make([]string, 0, len(rr.Configs))
	var nulls []string
	overrides := make(map[string]string, len(rr.Configs))
	for _, c := range rr.Configs {
		names = append(names, c.Name)
		if c.Value == nil {
			nulls = append(nulls, c.Name)
			continue
		}
		overrides[c.Name] = *c.Value
	}
	if err := checkAlterNames(names, nulls); err != nil {
		return err
	}
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		return s.alterTopicConfig(rr.ResourceName, overrides, nil, false, validateOnly)
	case kmsg.ConfigResourceTypeBroker:
		if err := s.checkBrokerResource(rr.ResourceName); err != nil {
			return err
		}
		return s.replaceBrokerConfigs(rr.ResourceName, overrides, validateOnly)
	}
	return refuse(kerr.InvalidRequest, "Unknown resource type %d (ringlog alters TOPIC configs)", int8(rr.ResourceType))
}

// alterTopicConfig replaces a topic's overrides (AlterConfigs), or with
// incremental applies ops to them (IncrementalAlterConfigs), through the
// controller, and waits until this broker applied the change.
func (s *Server) alterTopicConfig(name string, overrides map[string]string, ops []engine.ConfigOp, incremental, validateOnly bool) error {
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

// checkAlterNames applies Kafka's request checks shared by both alter APIs:
// a name at most once per resource, and a value for every name (nulls
// lists those without one, DELETE operations excepted).
func checkAlterNames(names, nulls []string) error {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(names) {
		return refuse(kerr.InvalidRequest, msgDuplicateKeys)
	}
	if len(nulls) > 0 {
		return refuse(kerr.InvalidRequest, "Null value not supported for : %s", strings.Join(nulls, ", "))
	}
	return nil
}

// refuseBrokerChange answers a change of static broker configs (all but
// the dynamic ones, broker_configs.go), refused the way Kafka refuses a
// change of a config it cannot update while it runs: INVALID_REQUEST, "Cannot
// update these configs dynamically" (Kafka reports a failed broker config
// validation as INVALID_REQUEST, KAFKA-13609). Changing nothing succeeds,
// as in Kafka.
func refuseBrokerChange(names []string) error {
	if len(names) == 0 {
		return nil
	}
	return refuse(kerr.InvalidRequest,
		"Cannot update these configs dynamically: [%s]: ringlog changes only leader.replication.throttled.rate and follower.replication.throttled.rate while it runs; set the others in server.properties and restart",
		strings.Join(names, ", "))
}
