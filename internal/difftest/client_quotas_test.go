package difftest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// quotaEntry is one AlterClientQuotas entry: entity parts as type, name
// pairs (name "" is the default entity), then one op.
func quotaEntry(parts [][2]string, key string, value float64, remove bool) kmsg.AlterClientQuotasRequestEntry {
	e := kmsg.NewAlterClientQuotasRequestEntry()
	for _, p := range parts {
		ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ent.Type = p[0]
		if p[1] != "" {
			ent.Name = kmsg.StringPtr(p[1])
		}
		e.Entity = append(e.Entity, ent)
	}
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value, op.Remove = key, value, remove
	e.Ops = append(e.Ops, op)
	return e
}

func alterQuotasReq(validateOnly bool, entries ...kmsg.AlterClientQuotasRequestEntry) *kmsg.AlterClientQuotasRequest {
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.SetVersion(1)
	req.Entries, req.ValidateOnly = entries, validateOnly
	return req
}

func describeQuotasReq(strict bool, comps ...kmsg.DescribeClientQuotasRequestComponent) *kmsg.DescribeClientQuotasRequest {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.SetVersion(1)
	req.Components, req.Strict = comps, strict
	return req
}

func quotaComp(typ string, match kmsg.QuotasMatchType, name *string) kmsg.DescribeClientQuotasRequestComponent {
	c := kmsg.NewDescribeClientQuotasRequestComponent()
	c.EntityType, c.MatchType, c.Match = typ, match, name
	return c
}

// TestClientQuotas: AlterClientQuotas' checks (entity types and their
// combinations, keys per entity, values) and DescribeClientQuotas'
// filters (exact, default, specified, strict, and the filters Kafka
// refuses), on entities only this test names. Kafka answers in the order
// of a hash map, so each step's answer holds one entry: one entity per
// alteration (an entity named twice is answered once), strict filters.
func TestClientQuotas(t *testing.T) {
	run(t, func(s *side) {
		user := name(s.t, "u")
		client := name(s.t, "c")
		s.do("validate only", alterQuotasReq(true, quotaEntry([][2]string{{"user", user}}, "producer_byte_rate", 1048576, false)))
		s.do("a user", alterQuotasReq(false, quotaEntry([][2]string{{"user", user}}, "producer_byte_rate", 1048576, false)))
		s.do("a user and a client id", alterQuotasReq(false, quotaEntry([][2]string{{"user", user}, {"client-id", client}}, "consumer_byte_rate", 2e6, false)))
		s.do("a user and the default client id", alterQuotasReq(false, quotaEntry([][2]string{{"user", user}, {"client-id", ""}}, "request_percentage", 12.5, false)))
		s.do("an entity twice: answered once", alterQuotasReq(false,
			quotaEntry([][2]string{{"user", user}}, "request_percentage", 50, false),
			quotaEntry([][2]string{{"user", user}}, "no_such_key", 3, false)))
		for _, r := range []struct {
			what  string
			parts [][2]string
			key   string
			value float64
		}{
			{"fractional bytes", [][2]string{{"user", user}}, "producer_byte_rate", 1.5},
			{"a connection rate for a user", [][2]string{{"user", user}}, "connection_creation_rate", 3},
			{"an unknown key", [][2]string{{"user", user}}, "no_such_key", 3},
			{"a negative value", [][2]string{{"user", user}}, "consumer_byte_rate", -4},
			{"too large for a LONG", [][2]string{{"user", user}}, "consumer_byte_rate", 1e30},
			{"not an IP", [][2]string{{"ip", "not-an-ip"}}, "connection_creation_rate", 3},
			{"an IP and a user", [][2]string{{"ip", "10.1.2.3"}, {"user", user}}, "connection_creation_rate", 3},
			{"an unknown type", [][2]string{{"group", "g"}}, "producer_byte_rate", 3},
			{"no entity", nil, "producer_byte_rate", 3},
			{"an empty name", [][2]string{{"user", ""}, {"client-id", ""}}, "producer_byte_rate", 3},
		} {
			s.do("refused: "+r.what, alterQuotasReq(false, quotaEntry(r.parts, r.key, r.value, false)))
		}
		// "An empty name" is taken, not refused: both brokers read it as
		// the default user and client id, and Kafka then holds every
		// client of the shared broker to 3 bytes/s, so that the scenarios
		// after this one timed out on Kafka's produces. Remove it at once.
		s.quiet(alterQuotasReq(false, quotaEntry([][2]string{{"user", ""}, {"client-id", ""}}, "producer_byte_rate", 0, true)))
		s.do("describe the user alone, strict", describeQuotasReq(true, quotaComp("user", 0, &user)))
		s.do("describe the user and the client id", describeQuotasReq(true, quotaComp("user", 0, &user), quotaComp("client-id", 0, &client)))
		s.do("describe the user and the default client id", describeQuotasReq(true, quotaComp("user", 0, &user), quotaComp("client-id", 1, nil)))
		s.do("describe the client id, not strict", describeQuotasReq(false, quotaComp("client-id", 0, &client)))
		s.do("describe: exact without a name", describeQuotasReq(false, quotaComp("user", 0, nil)))
		s.do("describe: default with a name", describeQuotasReq(false, quotaComp("user", 1, &user)))
		s.do("describe: specified with a name", describeQuotasReq(false, quotaComp("user", 2, &user)))
		s.do("describe: a type twice", describeQuotasReq(false, quotaComp("user", 2, nil), quotaComp("user", 0, &user)))
		s.do("describe: an unknown type", describeQuotasReq(false, quotaComp("group", 2, nil)))
		s.do("describe: an empty type", describeQuotasReq(false, quotaComp("", 2, nil)))
		s.do("describe: ip beside user", describeQuotasReq(false, quotaComp("ip", 2, nil), quotaComp("user", 0, &user)))
		s.do("remove one key", alterQuotasReq(false, quotaEntry([][2]string{{"user", user}}, "producer_byte_rate", 0, true)))
		s.do("describe after the removal", describeQuotasReq(true, quotaComp("user", 0, &user)))
		s.do("remove the last key of an entity", alterQuotasReq(false, quotaEntry([][2]string{{"user", user}}, "request_percentage", 0, true)))
		s.do("describe: the entity is gone", describeQuotasReq(true, quotaComp("user", 0, &user)))
		s.do("remove a key that is not set", alterQuotasReq(false, quotaEntry([][2]string{{"user", user}}, "request_percentage", 0, true)))
	})
}

// TestAclsWithoutAuthorizer: the ACL APIs of a broker without an
// authorizer answer SECURITY_DISABLED.
func TestAclsWithoutAuthorizer(t *testing.T) {
	run(t, func(s *side) {
		d := kmsg.NewPtrDescribeACLsRequest()
		d.SetVersion(3)
		d.ResourceType, d.ResourcePatternType, d.Operation, d.PermissionType = 1, 1, 1, 1
		s.do("describe", d)
		c := kmsg.NewPtrCreateACLsRequest()
		c.SetVersion(3)
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = 2, "t", 3
		cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:a", "*", 3, 3
		c.Creations = append(c.Creations, cr)
		s.do("create", c)
		del := kmsg.NewPtrDeleteACLsRequest()
		del.SetVersion(3)
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = 1, 1, 1, 1
		del.Filters = append(del.Filters, f)
		s.do("delete", del)
	})
}
