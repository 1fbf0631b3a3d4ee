package mirror

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// syncTopicACLs copies the source's topic ACLs to the remote topics, as
// MM2's MirrorSourceConnector.syncTopicAcls does (sync.topic.acls.enabled):
// the bindings on a literal topic name that the flow mirrors, renamed to
// the remote topic; an ALLOW WRITE is not copied (only the mirror writes
// remote topics) and an ALLOW ALL becomes ALLOW READ. Other bindings
// (DENY ones included) are copied as they are. ACLs are only ever created
// on the target, never deleted, as in MM2. A failure is logged, never
// fatal to the flow: the records still flow.
func (w *worker) syncTopicACLs(ctx context.Context) {
	if !w.f.SyncTopicACLs {
		return
	}
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeTopic
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, w.srcCl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	switch {
	case errors.Is(err, kerr.SecurityDisabled):
		if !w.noSourceAuthorizer {
			w.noSourceAuthorizer = true
			w.log.Info("mirror: the source has no ACL authorizer: no topic ACLs to sync (sync.topic.acls.enabled = false stops asking)", "flow", w.f.Name())
		}
		return
	case err != nil:
		w.log.Warn("mirror: describe the source's topic ACLs", "flow", w.f.Name(), "err", err)
		return
	}
	creq := kmsg.NewPtrCreateACLsRequest()
	for _, r := range resp.Resources {
		if r.ResourceType != kmsg.ACLResourceTypeTopic || r.ResourcePatternType != kmsg.ACLResourcePatternTypeLiteral || !w.f.Wanted(r.ResourceName) {
			continue
		}
		for _, a := range r.ACLs {
			op := a.Operation
			if a.PermissionType == kmsg.ACLPermissionTypeAllow {
				if op == kmsg.ACLOperationWrite {
					continue
				}
				if op == kmsg.ACLOperationAll {
					op = kmsg.ACLOperationRead
				}
			}
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType = kmsg.ACLResourceTypeTopic
			c.ResourceName = w.f.Policy.RemoteTopic(w.f.SourceAlias, r.ResourceName)
			c.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
			c.Principal, c.Host, c.Operation, c.PermissionType = a.Principal, a.Host, op, a.PermissionType
			creq.Creations = append(creq.Creations, c)
		}
	}
	if len(creq.Creations) == 0 {
		return
	}
	cresp, err := creq.RequestWith(ctx, w.dstCl)
	if err != nil {
		w.log.Warn("mirror: create topic ACLs on the target", "flow", w.f.Name(), "err", err)
		return
	}
	for i, r := range cresp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil && i < len(creq.Creations) {
			c := creq.Creations[i]
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage
			}
			w.log.Warn("mirror: could not sync an ACL of a topic", "flow", w.f.Name(), "topic", c.ResourceName,
				"acl", fmt.Sprintf("%s %s %s from %s", c.PermissionType, c.Operation, c.Principal, c.Host), "err", err, "msg", msg)
		}
	}
}
