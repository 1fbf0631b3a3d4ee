package kafka

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// AddRaftVoter v0-v1 (KIP-853, KIP-1186): make a running controller, an
// observer of the metadata quorum, a voter. Brokers forward it to the
// quorum's leader, which answers once the new voter set is committed
// (AckWhenCommitted=false is answered the same way: later, never
// earlier). The voter's endpoint is the listener named CONTROLLER, or the
// only one given. Errors are Kafka's: DUPLICATE_VOTER, REQUEST_TIMED_OUT
// when the node has not joined as an observer or not caught up within
// the request's timeout, INCONSISTENT_CLUSTER_ID, INVALID_REQUEST. ringlog
// has no directory ids (KIP-853's voter key is id and directory id): a
// voter is its node id, VoterDirectoryID is not checked.
func init() {
	register(api{key: kmsg.AddRaftVoter, min: 0, max: 1, sync: handleAddRaftVoter})
}

func handleAddRaftVoter(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.AddRaftVoterRequest)
	resp := req.ResponseKind().(*kmsg.AddRaftVoterResponse)
	fail := func(code int16, msg string) kmsg.Response {
		resp.ErrorCode, resp.ErrorMessage = code, kmsg.StringPtr(msg)
		return resp
	}
	if !s.authorizeCluster(cx, acl.OpAlter) {
		return fail(kerr.ClusterAuthorizationFailed.Code, "ALTER on the cluster is needed to change the quorum's voters")
	}
	if msg, ok := s.checkClusterID(req.ClusterID); !ok {
		return fail(kerr.InconsistentClusterID.Code, msg)
	}
	var addr string
	for _, l := range req.Listeners {
		if addr == "" || l.Name == "CONTROLLER" {
			addr = net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
		}
	}
	if addr == "" || req.VoterID < 0 {
		return fail(kerr.InvalidRequest.Code, "AddRaftVoter needs a voter id and the voter's controller endpoint")
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 || timeout > adminTimeout {
		timeout = adminTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.cfg.Node.Controller().AddVoter(ctx, req.VoterID, addr); err != nil {
		return fail(adminCode(err), err.Error())
	}
	return resp
}

// checkClusterID compares a membership request's cluster id, when it
// names one, with this broker's (KIP-853: INCONSISTENT_CLUSTER_ID).
func (s *Server) checkClusterID(id *string) (string, bool) {
	if id == nil || *id == s.eng.ClusterID() {
		return "", true
	}
	return "cluster id " + *id + " is not this cluster's (" + s.eng.ClusterID() + ")", false
}
