package kafka

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// CreateAcls, v0 to v3: bindings added through the metadata quorum, so
// that every broker enforces them once it applied the entry (the answer
// comes once this broker did). The principal needs ALTER on the cluster.
// Each creation is answered on its own: a CLUSTER resource not named
// kafka-cluster, an empty name, a MATCH or ANY pattern, an ANY operation
// or permission, or a principal not of the form Type:name is
// INVALID_REQUEST with Kafka's message; the valid ones are created in one
// entry. A creation with an UNKNOWN field, or a v0 creation that is not
// LITERAL, is a request Kafka does not parse: the connection is closed.
func init() {
	register(api{key: kmsg.CreateACLs, min: 0, max: 3, sync: handleCreateAcls, check: checkCreateAcls})
}

func checkCreateAcls(_ *Server, version int16, body []byte) error {
	req := kmsg.NewPtrCreateACLsRequest()
	req.Version = version
	if err := req.ReadFrom(body); err != nil {
		return fmt.Errorf("%w: CreateAcls: %v", errBadRequest, err)
	}
	for _, c := range req.Creations {
		if version == 0 && c.ResourcePatternType != kmsg.ACLResourcePatternTypeLiteral {
			return fmt.Errorf("%w: CreateAcls v0 supports only literal resource pattern types", errBadRequest)
		}
		if c.ResourcePatternType == 0 || c.ResourceType == 0 || c.PermissionType == 0 || c.Operation == 0 {
			return fmt.Errorf("%w: CreateAcls: creations contain unknown elements", errBadRequest)
		}
	}
	return nil
}

func handleCreateAcls(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	fail := func(i int, code int16, msg string) {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, kmsg.StringPtr(msg)
	}
	if !s.authorizeCluster(cx, acl.OpAlter) {
		for i := range resp.Results {
			fail(i, kerr.ClusterAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Message)
		}
		return resp
	}
	if s.cfg.Authorizer == nil {
		for i := range resp.Results {
			fail(i, kerr.SecurityDisabled.Code, "No Authorizer is configured.")
		}
		return resp
	}
	var valid []acl.Binding
	var at []int
	for i, c := range req.Creations {
		b := acl.Binding{ResourceType: acl.ResourceType(c.ResourceType), ResourceName: c.ResourceName,
			PatternType: acl.PatternType(c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
			Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType)}
		if err := b.Validate(); err != nil {
			fail(i, kerr.InvalidRequest.Code, aclMessage(err))
			continue
		}
		valid = append(valid, b)
		at = append(at, i)
	}
	if len(valid) == 0 {
		return resp
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	err := s.cfg.Node.Controller().CreateAcls(ctx, valid)
	if err == nil {
		err = s.waitApplied(ctx)
	}
	if err != nil {
		for _, i := range at {
			fail(i, adminCode(err), err.Error())
		}
	}
	return resp
}

// aclMessage is the message of an acl validation error, without the
// package's prefix: Kafka's words.
func aclMessage(err error) string {
	msg := err.Error()
	if p := acl.ErrInvalid.Error() + ": "; errors.Is(err, acl.ErrInvalid) && len(msg) > len(p) && msg[:len(p)] == p {
		return msg[len(p):]
	}
	return msg
}
