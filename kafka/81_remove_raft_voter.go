package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// RemoveRaftVoter v0 (KIP-853): take a controller's vote. Brokers forward
// it to the quorum's leader; a leader that removes itself steps down once
// the change commits. A removed node that still runs observes (its next
// heartbeat adds it back as a non-voter), as Kafka's removed voter does.
// Errors: VOTER_NOT_FOUND, INVALID_REQUEST for the last voter,
// INCONSISTENT_CLUSTER_ID.
func init() {
	register(api{key: kmsg.RemoveRaftVoter, min: 0, max: 0, sync: handleRemoveRaftVoter})
}

func handleRemoveRaftVoter(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.RemoveRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.RemoveRaftVoterResponse)
	if !s.authorizeCluster(cx, acl.OpAlter) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	if msg, ok := s.checkClusterID(req.ClusterID); !ok {
		resp.ErrorCode, resp.ErrorMessage = kerr.InconsistentClusterID.Code, kmsg.StringPtr(msg)
		return resp
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := s.cfg.Node.Controller().RemoveVoter(ctx, req.VoterID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = adminCode(err), errorMessage(err)
	}
	return resp
}
