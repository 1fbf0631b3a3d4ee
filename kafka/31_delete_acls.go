package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// DeleteAcls, v0 to v3: each filter removes the bindings it matches,
// through the metadata quorum, and is answered with them (a binding two
// filters match is in both answers). The principal needs ALTER on the
// cluster. A filter with an UNKNOWN field, or a v0 filter whose pattern
// type is not LITERAL or ANY, is a request Kafka does not parse: the
// connection is closed.
func init() {
	register(api{key: kmsg.DeleteACLs, min: 0, max: 3, sync: handleDeleteAcls, check: checkDeleteAcls})
}

func checkDeleteAcls(_ *Server, version int16, body []byte) error {
	req := kmsg.NewPtrDeleteACLsRequest()
	req.Version = version
	if err := req.ReadFrom(body); err != nil {
		return fmt.Errorf("%w: DeleteAcls: %v", errBadRequest, err)
	}
	for _, f := range req.Filters {
		af := aclFilter(f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host, f.Operation, f.PermissionType)
		if version == 0 && af.PatternType != acl.PatternLiteral && af.PatternType != acl.PatternAny {
			return fmt.Errorf("%w: DeleteAcls v0 supports only LITERAL and ANY patterns", errBadRequest)
		}
		if err := af.Validate(); err != nil {
			return fmt.Errorf("%w: DeleteAcls: %v", errBadRequest, err)
		}
	}
	return nil
}

func handleDeleteAcls(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	fail := func(code int16, msg string) kmsg.Response {
		for i := range resp.Results {
			resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, kmsg.StringPtr(msg)
		}
		return resp
	}
	if !s.authorizeCluster(cx, acl.OpAlter) {
		return fail(kerr.ClusterAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Message)
	}
	if s.cfg.Authorizer == nil {
		return fail(kerr.SecurityDisabled.Code, "No Authorizer is configured.")
	}
	filters := make([]acl.Filter, len(req.Filters))
	for i, f := range req.Filters {
		filters[i] = aclFilter(f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host, f.Operation, f.PermissionType)
	}
	if len(filters) == 0 {
		return resp
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	deleted, err := s.cfg.Node.Controller().DeleteAcls(ctx, filters)
	if err == nil {
		err = s.waitApplied(ctx)
	}
	if err != nil {
		return fail(adminCode(err), err.Error())
	}
	for i, bs := range deleted {
		r := kmsg.NewDeleteACLsResponseResult()
		for _, b := range bs {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(b.ResourceType), b.ResourceName, kmsg.ACLResourcePatternType(b.PatternType)
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
			r.MatchingACLs = append(r.MatchingACLs, m)
		}
		resp.Results[i] = r
	}
	return resp
}
