package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator, v0 to v6: one key before v4, several from v4 (KIP-699).
// On a single node this broker coordinates every group. Transactions are
// not implemented, so a TRANSACTION key is answered
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Produce and InitProducerId
// answer a transactional id: that code is fatal to a transactional
// producer in the Java client and franz-go, where COORDINATOR_NOT_AVAILABLE
// would have it retry until its timeout. Other key types (share groups,
// KIP-932) are INVALID_REQUEST.
func init() {
	register(api{key: kmsg.FindCoordinator, min: 0, max: 6, async: handleFindCoordinator})
}

const (
	coordinatorGroup       = 0
	coordinatorTransaction = 1
)

func handleFindCoordinator(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	find := func(key string) kmsg.FindCoordinatorResponseCoordinator {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.NodeID, c.Port = -1, -1
		var msg string
		switch {
		case req.CoordinatorType == coordinatorTransaction:
			c.ErrorCode, msg = kerr.TransactionalIDAuthorizationFailed.Code, "ringlog does not support transactions"
		case req.CoordinatorType != coordinatorGroup:
			c.ErrorCode, msg = kerr.InvalidRequest.Code, "unknown coordinator type"
		case s.cfg.Groups == nil:
			c.ErrorCode, msg = kerr.CoordinatorNotAvailable.Code, "this broker has no group coordinator"
		default:
			c.NodeID, c.Host, c.Port = s.cfg.NodeID, s.cfg.AdvertisedHost, s.cfg.AdvertisedPort
		}
		if msg != "" {
			c.ErrorMessage = &msg
		}
		return c
	}
	if req.Version >= 4 {
		resp.Coordinators = make([]kmsg.FindCoordinatorResponseCoordinator, 0, min(len(req.CoordinatorKeys), 1024))
		for _, k := range req.CoordinatorKeys {
			resp.Coordinators = append(resp.Coordinators, find(k))
		}
	} else {
		c := find(req.CoordinatorKey)
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
	}
	cx.reply(resp)
}
