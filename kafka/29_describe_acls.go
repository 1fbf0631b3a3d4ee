package kafka

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// DescribeAcls, v0 to v3 (KIP-11, KIP-290): the bindings a filter
// matches, grouped by resource pattern. The principal needs DESCRIBE on
// the cluster (CLUSTER_AUTHORIZATION_FAILED); without an authorizer the
// answer is SECURITY_DISABLED, as Kafka's. A filter with an UNKNOWN
// field, or a pattern type v0 cannot carry, is a request Kafka does not
// parse: the connection is closed.
func init() {
	register(api{key: kmsg.DescribeACLs, min: 0, max: 3, sync: handleDescribeAcls, check: checkDescribeAcls})
}

func checkDescribeAcls(_ *Server, version int16, body []byte) error {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.Version = version
	if err := req.ReadFrom(body); err != nil {
		return fmt.Errorf("%w: DescribeAcls: %v", errBadRequest, err)
	}
	f := aclFilter(req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType)
	if version == 0 && f.PatternType != acl.PatternLiteral && f.PatternType != acl.PatternAny {
		return fmt.Errorf("%w: DescribeAcls v0 supports only LITERAL and ANY patterns", errBadRequest)
	}
	if err := f.Validate(); err != nil {
		return fmt.Errorf("%w: DescribeAcls: %v", errBadRequest, err)
	}
	return nil
}

func handleDescribeAcls(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if !s.authorizeCluster(cx, acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	if s.cfg.Authorizer == nil {
		resp.ErrorCode = kerr.SecurityDisabled.Code
		resp.ErrorMessage = kmsg.StringPtr("No Authorizer is configured on the broker")
		return resp
	}
	f := aclFilter(req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType)
	// The set keeps bindings sorted by resource pattern first: each run
	// of equal patterns is one resource of the answer.
	for _, b := range s.cfg.Authorizer.Set().Match(f) {
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != kmsg.ACLResourceType(b.ResourceType) ||
			resp.Resources[n-1].ResourceName != b.ResourceName || resp.Resources[n-1].ResourcePatternType != kmsg.ACLResourcePatternType(b.PatternType) {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceType(b.ResourceType), b.ResourceName, kmsg.ACLResourcePatternType(b.PatternType)
			resp.Resources = append(resp.Resources, r)
			n++
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, a)
	}
	return resp
}

// aclFilter converts a request's filter fields.
func aclFilter(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType) acl.Filter {
	return acl.Filter{ResourceType: acl.ResourceType(rt), ResourceName: name, PatternType: acl.PatternType(pt),
		Principal: principal, Host: host, Operation: acl.Operation(op), Permission: acl.Permission(perm)}
}
