package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// UnregisterBroker v0 (KIP-631): remove a broker's registration, and take
// a broker-only node out of the metadata quorum's configuration. Brokers
// forward it to the quorum. As Kafka's controller, it does not refuse a
// live broker (which registers again at its next heartbeat): it is meant
// for a broker stopped for good. Errors: BROKER_ID_NOT_REGISTERED, and
// INVALID_REQUEST while the broker is still a replica of a partition
// (controller.UnregisterBroker says why ringlog differs there).
func init() {
	register(api{key: kmsg.UnregisterBroker, min: 0, max: 0, sync: handleUnregisterBroker})
}

func handleUnregisterBroker(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.UnregisterBrokerRequest)
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	if !s.authorizeCluster(cx, acl.OpAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	err := s.cfg.Node.Controller().UnregisterBroker(ctx, req.BrokerID)
	if err == nil {
		err = s.waitApplied(ctx)
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = adminCode(err), errorMessage(err)
	}
	return resp
}
