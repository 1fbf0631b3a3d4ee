package kafka

import (
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
	"ringlog/replication/controller"
)

// DescribeClientQuotas, v0 and v1 (KIP-546): the quotas of the entities a
// filter matches, from the metadata image. A component matches an entity
// type by exact name (EXACT), its default entity (DEFAULT) or any entity
// of the type (SPECIFIED); strict leaves out entities with other types.
// Refusals are Kafka's (ClientQuotasImage.describe): an empty or repeated
// type, a match string where the match type takes none or none where it
// needs one, IP beside user or client-id are INVALID_REQUEST, an unknown
// type UNSUPPORTED_VERSION. The principal needs DESCRIBE_CONFIGS on the
// cluster.
func init() {
	register(api{key: kmsg.DescribeClientQuotas, min: 0, max: 1, sync: handleDescribeClientQuotas})
}

// Kafka's match types.
const (
	quotaMatchExact     = 0
	quotaMatchDefault   = 1
	quotaMatchSpecified = 2
)

func handleDescribeClientQuotas(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(k *kerr.Error, msg string) kmsg.Response {
		resp.ErrorCode, resp.ErrorMessage = k.Code, kmsg.StringPtr(msg)
		return resp
	}
	if !s.authorizeCluster(cx, acl.OpDescribeConfigs) {
		return fail(kerr.ClusterAuthorizationFailed, kerr.ClusterAuthorizationFailed.Message)
	}
	exact := map[string]*string{}
	specified := map[string]bool{}
	for _, c := range req.Components {
		_, e := exact[c.EntityType]
		switch {
		case c.EntityType == "":
			return fail(kerr.InvalidRequest, "Invalid empty entity type.")
		case e || specified[c.EntityType]:
			return fail(kerr.InvalidRequest, "Entity type "+c.EntityType+" cannot appear more than once in the filter.")
		case c.EntityType != controller.QuotaIP && c.EntityType != controller.QuotaUser && c.EntityType != controller.QuotaClientID:
			return fail(kerr.UnsupportedVersion, "Unsupported entity type "+c.EntityType)
		}
		switch c.MatchType {
		case quotaMatchExact:
			if c.Match == nil {
				return fail(kerr.InvalidRequest, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
			}
			exact[c.EntityType] = c.Match
		case quotaMatchDefault:
			if c.Match != nil {
				return fail(kerr.InvalidRequest, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
			}
			exact[c.EntityType] = nil
		case quotaMatchSpecified:
			if c.Match != nil {
				return fail(kerr.InvalidRequest, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
			}
			specified[c.EntityType] = true
		default:
			return fail(kerr.InvalidRequest, "Unknown match type "+strconv.Itoa(int(c.MatchType)))
		}
	}
	has := func(t string) bool { _, e := exact[t]; return e || specified[t] }
	if has(controller.QuotaIP) && (has(controller.QuotaUser) || has(controller.QuotaClientID)) {
		return fail(kerr.InvalidRequest, "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.")
	}
	for _, q := range s.cfg.Node.Image().Quotas() {
		if !quotaMatches(q.Entity, exact, specified, req.Strict) {
			continue
		}
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range q.Entity {
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = p.Type, p.Name
			e.Entity = append(e.Entity, ent)
		}
		for _, k := range slices.Sorted(maps.Keys(q.Values)) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q.Values[k]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return resp
}

// quotaMatches is Kafka's filter: every exact component names the
// entity's part of its type (nil: the default), every specified type is
// a part, and with strict the entity has no other part.
func quotaMatches(ent controller.QuotaEntity, exact map[string]*string, specified map[string]bool, strict bool) bool {
	if strict && len(ent) != len(exact)+len(specified) {
		return false
	}
	part := func(t string) (controller.QuotaEntityPart, bool) {
		for _, p := range ent {
			if p.Type == t {
				return p, true
			}
		}
		return controller.QuotaEntityPart{}, false
	}
	for t, name := range exact {
		p, ok := part(t)
		if !ok || (p.Name == nil) != (name == nil) || (name != nil && *p.Name != *name) {
			return false
		}
	}
	for t := range specified {
		if _, ok := part(t); !ok {
			return false
		}
	}
	return true
}
