package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/internal/acl"
)

// IncrementalAlterConfigs v0-v1 (KIP-339): SET, DELETE, APPEND and
// SUBTRACT on single config names, leaving the others as they are. v1 is
// flexible.
//
// With an authorizer, the principal needs ALTER_CONFIGS on a topic
// (TOPIC_AUTHORIZATION_FAILED) or, for a broker, on the cluster
// (CLUSTER_AUTHORIZATION_FAILED).
func init() {
	register(api{key: kmsg.IncrementalAlterConfigs, min: 0, max: 1, sync: handleIncrementalAlterConfigs})
}

func handleIncrementalAlterConfigs(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	dups := duplicates(req.Resources, func(r *kmsg.IncrementalAlterConfigsRequestResource) string {
		return r.ResourceType.String() + "\x00" + r.ResourceName
	})
	for i := range req.Resources {
		rr := &req.Resources[i]
		var err error
		if code := s.configsRefused(cx, acl.OpAlterConfigs, rr.ResourceType, rr.ResourceName); code != 0 {
			// Checked before anything else, with no message, as Kafka's
			// broker does before forwarding to the controller.
			r := kmsg.NewIncrementalAlterConfigsResponseResource()
			r.ResourceType, r.ResourceName, r.ErrorCode = rr.ResourceType, rr.ResourceName, code
			resp.Resources = append(resp.Resources, r)
			continue
		}
		if dups[rr.ResourceType.String()+"\x00"+rr.ResourceName] {
			err = refuse(kerr.InvalidRequest, msgDuplicateResource)
		} else {
			err = s.incrementalAlterConfigs(rr, req.ValidateOnly)
		}
		r := kmsg.NewIncrementalAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		r.ErrorCode, r.ErrorMessage = adminCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}

func (s *Server) incrementalAlterConfigs(rr *kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	names := make([]string, 0, len(rr.Configs))
	var nulls []string
	ops := make([]engine.ConfigOp, 0, len(rr.Configs))
	for _, c := range rr.Configs {
		names = append(names, c.Name)
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if c.Value == nil {
				nulls = append(nulls, c.Name)
				continue
			}
		case kmsg.IncrementalAlterConfigOpDelete:
		default:
			return refuse(kerr.InvalidRequest, "Unknown operations type %d", int8(c.Op))
		}
		op := engine.ConfigOp{Name: c.Name, Op: int8(c.Op)}
		if c.Value != nil {
			op.Value = *c.Value
		}
		ops = append(ops, op)
	}
	if err := checkAlterNames(names, nulls); err != nil {
		return err
	}
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		return s.alterTopicConfig(rr.ResourceName, nil, ops, true, validateOnly)
	case kmsg.ConfigResourceTypeBroker:
		if err := s.checkBrokerResource(rr.ResourceName); err != nil {
			return err
		}
		return s.incrementalAlterBrokerConfigs(rr.ResourceName, ops, validateOnly)
	}
	return refuse(kerr.InvalidRequest, "Unknown resource type %d (ringlog alters TOPIC configs)", int8(rr.ResourceType))
}
