package kafka

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/internal/acl"
)

// DescribeConfigs v0-v4 for TOPIC and BROKER resources.
//
//   - v0 marks defaults with is_default; v1 replaces it by config_source
//     and adds synonyms on request (KIP-226);
//   - v3 adds the config type and documentation on request (KIP-569);
//   - v4 is flexible.
//
// With an authorizer, the principal needs DESCRIBE_CONFIGS on a topic
// (TOPIC_AUTHORIZATION_FAILED) or, for a broker, on the cluster
// (CLUSTER_AUTHORIZATION_FAILED).
func init() {
	register(api{key: kmsg.DescribeConfigs, min: 0, max: 4, sync: handleDescribeConfigs})
}

func handleDescribeConfigs(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	// A resource named again is answered once with its configs and then
	// refused: the answer is then bounded by what the broker holds, not
	// by the request (a few bytes naming the broker would otherwise buy
	// kilobytes of answer each). Kafka itself answers every copy.
	seen := make(map[string]bool)
	for i := range req.Resources {
		rr := &req.Resources[i]
		r := kmsg.NewDescribeConfigsResponseResource()
		r.ResourceType, r.ResourceName = rr.ResourceType, rr.ResourceName
		var configs []describedConfig
		var err error
		if code := s.configsRefused(cx, acl.OpDescribeConfigs, rr.ResourceType, rr.ResourceName); code != 0 {
			r.ErrorCode, r.ErrorMessage = code, errorMessageOf(code)
			resp.Resources = append(resp.Resources, r)
			continue
		}
		if key := rr.ResourceType.String() + "\x00" + rr.ResourceName; seen[key] {
			err = refuse(kerr.InvalidRequest, "%s", msgDuplicateResource)
		} else {
			seen[key] = true
			configs, err = s.describeResource(rr)
		}
		if err != nil {
			r.ErrorCode, r.ErrorMessage = adminCode(err), errorMessage(err)
			resp.Resources = append(resp.Resources, r)
			continue
		}
		for _, c := range filterConfigs(configs, rr.ConfigNames) {
			rc := kmsg.NewDescribeConfigsResponseResourceConfig()
			rc.Name, rc.Value, rc.ReadOnly, rc.Source = c.name, c.value, c.readOnly, c.source
			// v0 has no source, only is_default: true when nothing
			// but Kafka's own default sets the value.
			rc.IsDefault = c.source == kmsg.ConfigSourceDefaultConfig
			rc.ConfigType = c.typ
			if req.IncludeDocumentation {
				rc.Documentation = kmsg.StringPtr(c.doc)
			}
			if req.IncludeSynonyms {
				for _, syn := range c.synonyms {
					rs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					rs.Name, rs.Value, rs.Source = syn.name, kmsg.StringPtr(syn.value), syn.source
					rc.ConfigSynonyms = append(rc.ConfigSynonyms, rs)
				}
			}
			r.Configs = append(r.Configs, rc)
		}
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}

// describeResource lists the configs of one resource, or the error Kafka
// answers for it.
func (s *Server) describeResource(rr *kmsg.DescribeConfigsRequestResource) ([]describedConfig, error) {
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		if err := engine.ValidateTopicName(rr.ResourceName); err != nil {
			return nil, err
		}
		if info, ok := s.eng.Topic(rr.ResourceName); ok {
			return s.topicConfigs(info.Config, info.Overrides), nil
		}
		// A topic with no replica on this broker is not in its engine
		// (a reassignment moved its partitions away, or they were never
		// placed here): any broker answers for it, as Kafka's do, from
		// the cluster's metadata.
		t := s.cfg.Node.Image().Topic(rr.ResourceName)
		if t == nil {
			return nil, refuse(kerr.UnknownTopicOrPartition, "No topic named %s", rr.ResourceName)
		}
		cfg, err := engine.ParseTopicConfig(s.eng.Defaults(), t.Configs)
		if err != nil {
			return nil, err
		}
		return s.topicConfigs(cfg, t.Configs), nil
	case kmsg.ConfigResourceTypeBroker:
		if err := s.checkBrokerResource(rr.ResourceName); err != nil {
			return nil, err
		}
		// Kafka answers the empty name with the cluster-wide dynamic
		// defaults set; ringlog shows those and, as for a broker id, the
		// broker's (static) defaults, which is what such a client wants
		// to learn.
		cs := append(s.brokerConfigs(), s.dynamicBrokerConfigs(rr.ResourceName)...)
		slices.SortFunc(cs, func(a, b describedConfig) int { return strings.Compare(a.name, b.name) })
		return cs, nil
	}
	return nil, refuse(kerr.InvalidRequest, "Unsupported resource type: %s (ringlog describes TOPIC and BROKER configs)", rr.ResourceType)
}
