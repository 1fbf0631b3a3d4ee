package kafka

import (
	"context"
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
	"ringlog/replication/controller"
)

// AlterClientQuotas, v0 and v1 (KIP-546): each entity's quota changes go
// to the metadata quorum, which applies those that pass Kafka's checks
// (controller.ValidateQuotaAlteration) and answers the others
// INVALID_REQUEST with Kafka's message; validate_only checks without
// applying. The answer comes once this broker applied the entry. The
// principal needs ALTER_CONFIGS on the cluster.
func init() {
	register(api{key: kmsg.AlterClientQuotas, min: 0, max: 1, sync: handleAlterClientQuotas})
}

func handleAlterClientQuotas(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	// One answer per entity, as Kafka's (its results are a map by
	// entity): an entity named twice is answered once, with the result of
	// its last alteration. All alterations are applied in order.
	as := make([]controller.QuotaAlteration, len(req.Entries))
	slot := make([]int, len(req.Entries)) // alteration -> answer
	seen := map[string]int{}
	for i, e := range req.Entries {
		for _, p := range e.Entity {
			as[i].Entity = append(as[i].Entity, controller.QuotaEntityPart{Type: p.Type, Name: p.Name})
		}
		controller.SortQuotaEntity(as[i].Entity)
		for _, op := range e.Ops {
			as[i].Ops = append(as[i].Ops, controller.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
		k := as[i].Entity.Key()
		j, ok := seen[k]
		if !ok {
			j = len(resp.Entries)
			seen[k] = j
			// The entity's parts sorted by type (Kafka's come from a
			// map, in its order).
			r := kmsg.NewAlterClientQuotasResponseEntry()
			for _, p := range as[i].Entity {
				ent := kmsg.NewAlterClientQuotasResponseEntryEntity()
				ent.Type, ent.Name = p.Type, p.Name
				r.Entity = append(r.Entity, ent)
			}
			resp.Entries = append(resp.Entries, r)
		}
		slot[i] = j
	}
	failAll := func(code int16, msg string) kmsg.Response {
		for i := range resp.Entries {
			resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = code, kmsg.StringPtr(msg)
		}
		return resp
	}
	if !s.authorizeCluster(cx, acl.OpAlterConfigs) {
		return failAll(kerr.ClusterAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Message)
	}
	if len(as) == 0 {
		return resp
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	errs, err := s.cfg.Node.Controller().AlterClientQuotas(ctx, as, req.ValidateOnly)
	if err == nil && !req.ValidateOnly {
		err = s.waitApplied(ctx)
	}
	if err != nil {
		return failAll(adminCode(err), err.Error())
	}
	for i, e := range errs {
		r := &resp.Entries[slot[i]]
		r.ErrorCode, r.ErrorMessage = 0, nil
		if e == nil {
			continue
		}
		r.ErrorCode = adminCode(e)
		if errors.Is(e, controller.ErrInvalidRequest) {
			r.ErrorCode = kerr.InvalidRequest.Code
		}
		r.ErrorMessage = kmsg.StringPtr(strings.TrimPrefix(e.Error(), controller.ErrInvalidRequest.Error()+": "))
	}
	return resp
}
